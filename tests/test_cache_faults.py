"""The disk cache under attack: entries swapped between keys, re-sealed with a valid checksum,
truncated, or replaced by a FIFO, a symbolic link to /dev/zero or a directory, between two
processes. The second process must compute the right results, never crash or hang, and
recompile what it could not use (disk_cache.py, object_symbols.py, executable.py, rtlib.py)."""
import errno
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.backends.llvm import disk_cache, object_symbols as elf

PROGRAM = textwrap.dedent("""
    import numpy as np, kiln, kiln.numpy as jnp
    f = kiln.jit(lambda x: jnp.tanh(x) * 3.0 + x, backend="llvm")
    g = kiln.jit(lambda x, y: (x @ y).sum(axis=0) - 1.0, backend="llvm")
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    print(np.asarray(f(x)).round(4).tolist())
    print(np.asarray(g(x, x.T)).round(3).tolist())
""")


def _expected():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    return (f"{(np.tanh(x) * 3 + x).round(4).tolist()}\n"
            f"{((x @ x.T).sum(axis=0) - 1).round(3).tolist()}\n")


def _run(script, cache):
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, KILN_CACHE_DIR=str(cache)))
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture
def filled(tmp_path):
    """(script, cache directory, entries) after a first process filled the cache."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    cache = tmp_path / "cache"
    assert _run(script, cache).stdout == _expected()
    entries = sorted((cache / "llvm").glob("*.kobj"))
    assert len(entries) >= 3   # f, g and the runtime library
    return script, cache, entries


def _second_run(script, cache, faults):
    out = _run(script, cache)
    assert out.stdout == _expected()
    assert out.stderr.count("ignoring cache entry") == faults, out.stderr
    out = _run(script, cache)   # the bad entries were replaced: a clean third run
    assert out.stdout == _expected() and "ignoring" not in out.stderr


def _reseal(path, payload):
    """Write `payload` under a header with a valid checksum for the entry's own key."""
    key = path.stem
    path.write_bytes(disk_cache._encode(key, payload))


def test_entries_swapped_between_keys(filled):
    script, cache, entries = filled
    blobs = [p.read_bytes() for p in entries]
    for path, blob in zip(entries, blobs[1:] + blobs[:1]):
        path.write_bytes(blob)
    _second_run(script, cache, len(entries))


@pytest.mark.parametrize("damage", ["garbage", "truncated object", "no entry point",
                                    "bad lengths", "bad names"])
def test_resealed_payloads(filled, damage):
    script, cache, entries = filled
    for path in entries:
        payload = disk_cache._decode(path.stem, path.read_bytes())[0]
        if damage == "garbage":
            payload = hashlib.sha256(payload).digest() * 50
        elif damage == "truncated object":
            payload = payload[:len(payload) * 2 // 3]
        elif damage == "no entry point":   # names that do not match the objects' symbols
            payload = payload.replace(b"kiln.", b"kiXn.")
        elif damage == "bad lengths":
            payload = payload[:12] + b"\xff" * 8 + payload[20:]
        else:
            payload = payload[:16] + b"\xff\xfe" + payload[18:]
        _reseal(path, payload)
    out = _run(script, cache)
    assert out.stdout == _expected()
    assert out.returncode == 0


def test_truncated_and_empty_entries(filled):
    script, cache, entries = filled
    entries[0].write_bytes(entries[0].read_bytes()[:100])
    entries[1].write_bytes(b"")
    _second_run(script, cache, 2)


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "directory",
                                  "symlink to an entry"])
def test_entries_that_are_not_regular_files(filled, kind):
    script, cache, entries = filled
    for path in entries:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "symlink to /dev/zero":
            path.symlink_to("/dev/zero")
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to(entries[0] if path != entries[0] else entries[1])
    # a hang (FIFO) or an endless read (/dev/zero) would hit _run's timeout
    out = _run(script, cache)
    assert out.stdout == _expected()
    assert out.stderr.count("ignoring cache entry") >= len(entries) - 1


def test_unusable_entry_in_a_read_only_cache(tmp_path, monkeypatch, caplog):
    """A corrupt entry that cannot be deleted (read-only file system) is a miss, not an
    OSError out of the call; the store that follows fails quietly."""
    cache = disk_cache.DiskCache(tmp_path)
    key = disk_cache.key("read-only")
    (tmp_path / (key + ".kobj")).write_bytes(b"KILNOBJ\0 corrupt")

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(Path, "unlink", read_only)
    monkeypatch.setattr(os, "replace", read_only)
    assert cache.load(key) is None
    assert "ignoring cache entry" in caplog.text
    assert cache.store(key, b"payload") is False
    monkeypatch.setattr(disk_cache, "default", lambda: cache)
    f = kiln.jit(lambda x: x * 7.0 - 2.5, backend="llvm")
    np.testing.assert_array_equal(np.asarray(f(np.arange(3, dtype=np.float32))),
                                  np.arange(3, dtype=np.float32) * 7 - 2.5)


def test_entries_name_their_key(tmp_path):
    cache = disk_cache.DiskCache(tmp_path)
    a, b = disk_cache.key("a"), disk_cache.key("b")
    assert cache.store(a, b"payload of a")
    os.replace(tmp_path / (a + ".kobj"), tmp_path / (b + ".kobj"))
    assert cache.load(b) is None
    assert not (tmp_path / (b + ".kobj")).exists()


def test_oversized_entries_are_not_read(tmp_path, monkeypatch):
    cache = disk_cache.DiskCache(tmp_path)
    key = disk_cache.key("big")
    assert cache.store(key, b"x" * 1000)
    monkeypatch.setattr(disk_cache, "MAX_ENTRY_BYTES", 100)
    assert cache.load(key) is None


def test_object_check():
    import llvmlite.binding as llvm
    from kiln.compiler.backends.llvm import target
    obj = target.object_code(target.optimize(
        'define i32 @f() {\n  ret i32 1\n}\n', "probe"))
    elf.check_object(obj)
    for bad, why in [(b"", "shorter"), (obj[:40], "shorter"), (b"\x7fELF\x01" + obj[5:], "64-bit"), (obj[:len(obj) // 2], "outside"),
                     (obj[:16] + b"\x02\x00" + obj[18:], "relocatable")]:
        with pytest.raises(elf.BadObject, match=why):
            elf.check_object(bad)
    assert llvm   # the object came from this process's LLVM
