"""On-disk cache of the LLVM backend's object code, so a second process skips LLVM entirely.

The backend compiles a specialised SSA function to an object file; `store(key, data)` keeps it and
`load(key)` returns it in a later process. `key(*parts)` hashes what determines the object code (the
SSA text, target triple, CPU name and features, ...) together with this process's fingerprint: the
cache format version, kiln's version, the llvmlite and LLVM versions, the BLAS interface the code
calls (blas.py) and the name, size and modification time of each of the backend's source files (so
an edited code generator never reuses stale objects in a development checkout).

Location: `$KILN_CACHE_DIR` if set, else `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`; object files
live in its `llvm/` sub-directory, one `<key>.kobj` file per entry. Setting `KILN_CACHE_DIR` to the
empty string (or `0`, `off`, `none`, `false`) disables the cache: `load` always misses and `store`
does nothing. The cache is best effort: a directory that cannot be created or written is a miss.

Each entry is a header followed by the payload:
    magic b"KILNOBJ\\0" | format version (u32) | payload length (u64) | sha256 of the payload (32 bytes)
A file whose header, length or checksum does not match (truncated, corrupted, written by another
format version) is deleted and reported as a miss, never returned. Writes go to a temporary file in
the same directory followed by `os.replace`, which is atomic: concurrent writers of one key each
replace a complete file, and readers see either the old complete file or the new one.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import struct
import sys
import tempfile
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from . import blas

FORMAT_VERSION = 1
MAGIC = b"KILNOBJ\0"
_HEADER = struct.Struct("<8sIQ32s")
_SUFFIX = ".kobj"
_TEMP_PREFIX = ".tmp-"
_DISABLED = {"", "0", "off", "none", "false"}
_log = logging.getLogger("kiln.cache")


def cache_root() -> Path | None:
    """kiln's cache directory, or None when `KILN_CACHE_DIR` disables caching."""
    setting = os.environ.get("KILN_CACHE_DIR")
    if setting is not None:
        return None if setting.strip().lower() in _DISABLED else Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kiln"


def _kiln_version() -> str:
    # `kiln` (the runtime package) is always loaded before its sub-package `kiln.compiler`; reading
    # its version attribute is not an import, and is much faster than importlib.metadata.
    return getattr(sys.modules.get("kiln"), "__version__", "unknown")


@functools.cache
def fingerprint() -> bytes:
    """What, besides the caller's parts, decides the object code this process produces."""
    digest = hashlib.sha256()
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    for part in (f"format {FORMAT_VERSION}", f"kiln {_kiln_version()}", f"llvmlite {llvmlite.__version__}",
                 f"llvm {llvm_version}", f"blas {blas.library().name}"):
        digest.update(part.encode() + b"\0")
    for source in sorted(Path(__file__).parent.glob("*.py")):  # like .pyc files: name, size, mtime
        status = source.stat()
        digest.update(f"{source.name} {status.st_size} {status.st_mtime_ns}".encode() + b"\0")
    return digest.digest()


def key(*parts: str | bytes) -> str:
    """Hex sha256 over the parts (each length-prefixed, so boundaries matter) and `fingerprint()`."""
    digest = hashlib.sha256(fingerprint())
    for part in parts:
        data = part.encode() if isinstance(part, str) else bytes(part)
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def _encode(data: bytes) -> bytes:
    return _HEADER.pack(MAGIC, FORMAT_VERSION, len(data), hashlib.sha256(data).digest()) + data


def _decode(blob: bytes) -> bytes | None:
    """The payload of a well-formed entry, None for anything else."""
    if len(blob) < _HEADER.size:
        return None
    magic, version, length, checksum = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    valid = (magic, version, length) == (MAGIC, FORMAT_VERSION, len(payload))
    return payload if valid and hashlib.sha256(payload).digest() == checksum else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # deleted by another process meanwhile
        return 0


class DiskCache:
    """One directory of entries; `directory=None` is a disabled cache."""

    def __init__(self, directory: Path | None):
        self.directory = directory

    def _path(self, entry_key: str) -> Path:
        if not (entry_key and all(c in "0123456789abcdef" for c in entry_key)):
            raise ValueError(f"disk cache keys are lower-case hex digests (from key()), got {entry_key!r}")
        return self.directory / (entry_key + _SUFFIX)

    def load(self, entry_key: str) -> bytes | None:
        """The stored payload, or None on a miss (absent, unreadable, corrupt: corrupt files are deleted)."""
        if self.directory is None:
            return None
        path = self._path(entry_key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload = _decode(blob)
        if payload is None:
            _log.warning("kiln: deleting corrupt cache entry %s (it will be recompiled)", path)
            path.unlink(missing_ok=True)
        return payload

    def store(self, entry_key: str, data: bytes) -> bool:
        """Write an entry atomically; False (and nothing left behind) when the directory is unusable."""
        if self.directory is None:
            return False
        path = self._path(entry_key)
        temp = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=self.directory, prefix=_TEMP_PREFIX)
            with os.fdopen(handle, "wb") as out:
                out.write(_encode(bytes(data)))
            os.replace(temp, path)
            return True
        except OSError as error:
            _log.debug("kiln: cannot write cache entry %s: %s", path, error)
            if temp is not None:
                Path(temp).unlink(missing_ok=True)
            return False

    def _files(self) -> list[Path]:
        if self.directory is None or not self.directory.is_dir():
            return []
        return [p for p in self.directory.iterdir() if p.suffix == _SUFFIX or p.name.startswith(_TEMP_PREFIX)]

    def info(self) -> dict:
        """{'path', 'enabled', 'entries', 'bytes'} for `kiln cache info`."""
        sizes = [_size(p) for p in self._files() if p.suffix == _SUFFIX]
        return {"path": None if self.directory is None else str(self.directory),
                "enabled": self.directory is not None, "entries": len(sizes), "bytes": sum(sizes)}

    def clear(self) -> int:
        """Delete every entry (and stale temporary files); returns the number of entries deleted."""
        removed = 0
        for path in self._files():
            path.unlink(missing_ok=True)
            removed += path.suffix == _SUFFIX
        return removed


def default() -> DiskCache:
    """The cache at the location the environment names now (see the module docstring)."""
    root = cache_root()
    return DiskCache(None if root is None else root / "llvm")


def load(entry_key: str) -> bytes | None:
    return default().load(entry_key)


def store(entry_key: str, data: bytes) -> bool:
    return default().store(entry_key, data)


def info() -> dict:
    return default().info()


def clear() -> int:
    return default().clear()
