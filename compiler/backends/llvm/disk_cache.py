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
    magic b"KILNOBJ\\0" | format version (u32) | payload length (u64) | sha256 of the payload |
    sha256 of the entry's key (32 bytes each)
so an entry names the key it was stored under: a file copied or renamed to another key's name is
not that key's entry. Only a regular file is read (not a FIFO, a device, a directory or a
symbolic link), opened without blocking, and only when it is at most MAX_ENTRY_BYTES long. A
file that fails any of this (truncated, corrupted, another key's, written by another format
version, not a regular file) is deleted when it can be and reported as a miss, with one warning,
never returned; the callers also `discard` an entry whose payload they cannot use (its object
code does not parse or link), and recompile. Every OSError on the cache's path is a miss (or a
store that did not happen), never an error of the call: a read-only or vanished cache directory
only costs compile time. Writes go to a temporary file in the same directory followed by
`os.replace`, which is atomic: concurrent writers of one key each replace a complete file, and
readers see either the old complete file or the new one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import stat
import struct
import sys
import tempfile
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from . import blas

FORMAT_VERSION = 2
MAGIC = b"KILNOBJ\0"
MAX_ENTRY_BYTES = 1 << 30
_HEADER = struct.Struct("<8sIQ32s32s")
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


def _key_digest(entry_key: str) -> bytes:
    return hashlib.sha256(entry_key.encode()).digest()


def _encode(entry_key: str, data: bytes) -> bytes:
    return _HEADER.pack(MAGIC, FORMAT_VERSION, len(data), hashlib.sha256(data).digest(),
                        _key_digest(entry_key)) + data


def _decode(entry_key: str, blob: bytes) -> tuple[bytes | None, str]:
    """(the payload of a well-formed entry of `entry_key`, "") or (None, what is wrong)."""
    if len(blob) < _HEADER.size:
        return None, "truncated header"
    magic, version, length, checksum, owner = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if (magic, version) != (MAGIC, FORMAT_VERSION):
        return None, "not an entry of this format version"
    if length != len(payload) or hashlib.sha256(payload).digest() != checksum:
        return None, "truncated or corrupt"
    if owner != _key_digest(entry_key):
        return None, "stored under another key"
    return payload, ""


def _read_regular(path: Path) -> tuple[bytes | None, str]:
    """(the bytes of `path` if it is a regular file of at most MAX_ENTRY_BYTES, "") or
    (None, why not); (None, "") when there is no such file. Opened without following a
    symbolic link and without blocking (a FIFO would otherwise wait for a writer)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, ""
    except OSError as error:
        if path.is_symlink():
            return None, "a symbolic link"
        return None, f"unreadable ({error.strerror or error})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > MAX_ENTRY_BYTES:
            return None, f"{info.st_size} bytes, over the {MAX_ENTRY_BYTES}-byte bound"
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), ""
    except OSError as error:
        return None, f"unreadable ({error.strerror or error})"
    finally:
        os.close(fd)


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
        """The stored payload, or None on a miss (absent, unreadable, corrupt, another key's,
        not a regular file: such entries are deleted, see the module docstring)."""
        if self.directory is None:
            return None
        path = self._path(entry_key)
        blob, problem = _read_regular(path)
        if blob is None:
            if problem:
                self._drop(path, problem)
            return None
        payload, problem = _decode(entry_key, blob)
        if payload is None:
            self._drop(path, problem)
        return payload

    def discard(self, entry_key: str, reason: str) -> None:
        """Delete the entry of `entry_key`, whose payload the caller could not use."""
        if self.directory is not None:
            self._drop(self._path(entry_key), reason)

    @staticmethod
    def _drop(path: Path, reason: str) -> None:
        _log.warning("kiln: ignoring cache entry %s (%s); it will be recompiled", path, reason)
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError as error:   # read-only cache, a non-empty directory, ...
            _log.debug("kiln: cannot delete cache entry %s: %s", path, error)

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
                out.write(_encode(entry_key, bytes(data)))
            os.replace(temp, path)
            return True
        except OSError as error:
            _log.debug("kiln: cannot write cache entry %s: %s", path, error)
            if temp is not None:
                with contextlib.suppress(OSError):
                    Path(temp).unlink(missing_ok=True)
            return False

    def _files(self) -> list[Path]:
        if self.directory is None:
            return []
        try:
            return [p for p in self.directory.iterdir()
                    if p.suffix == _SUFFIX or p.name.startswith(_TEMP_PREFIX)]
        except OSError:   # absent or unreadable
            return []

    def info(self) -> dict:
        """{'path', 'enabled', 'entries', 'bytes'} for `kiln cache info`."""
        sizes = [_size(p) for p in self._files() if p.suffix == _SUFFIX]
        return {"path": None if self.directory is None else str(self.directory),
                "enabled": self.directory is not None, "entries": len(sizes), "bytes": sum(sizes)}

    def clear(self) -> int:
        """Delete every entry (and stale temporary files); returns the number of entries deleted."""
        removed = 0
        for path in self._files():
            try:
                path.unlink(missing_ok=True)
            except OSError:   # a directory in an entry's place, a read-only cache
                continue
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


def discard(entry_key: str, reason: str) -> None:
    default().discard(entry_key, reason)


def info() -> dict:
    return default().info()


def clear() -> int:
    return default().clear()
