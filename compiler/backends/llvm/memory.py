"""Caching allocator for the large buffers of compiled code (outputs, workspaces).

The LLVM backend's executables allocate their outputs and workspace on every call. A fresh 100 MB
NumPy array costs a page fault per 4 KiB page on first touch (about 25,000 faults), which dominates a
bandwidth-bound kernel. `empty(shape, dtype)` instead hands out memory from a pool of blocks that
earlier arrays released, so repeated calls reuse pages that are already mapped.

How a block travels:
- Requests below `THRESHOLD_BYTES` (or of object dtypes) are plain `np.empty`.
- A large request is rounded up to a size class (at most 1/8 above the request, a multiple of the
  page size) and served from the pool's blocks of that class, most recently returned first, or from
  a fresh private anonymous `mmap` (page aligned, so 64-byte aligned for vector loads).
- The array handed out is a view of a 1-D "token" array created over the block. NumPy collapses
  the base of every later view onto that token (it stops at the first base that is not an ndarray),
  so the token lives exactly as long as the user's array or any view of it. A weak reference on the
  token puts the block back into the pool when the last of them is dropped.
- Returned blocks are cached up to `limit_bytes()` (default: a quarter of physical memory, at most
  2 GiB; `KILN_BUFFER_POOL` sets it in bytes with an optional K/M/G suffix, 0 disables caching);
  beyond that the least recently returned blocks are unmapped.

The pool is thread-safe. Weak-reference callbacks may run in any thread, at any allocation, even while
that thread holds the lock: they append the block to a deque and move it into the pool only if the
lock is free at once; otherwise the lock's next holder does.
`stats()` and `clear()` serve tests and `kiln cache`-style reporting.
"""

from __future__ import annotations

import collections
import math
import mmap
import operator
import os
import threading
import weakref

import numpy as np

THRESHOLD_BYTES = 1 << 20
PAGE_BYTES = mmap.PAGESIZE
_HUGE_PAGES = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux only
_DEFAULT_LIMIT_CAP = 2 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _parse_bytes(text: str, variable: str) -> int:
    """'512M' -> 536870912; a clear error naming the environment variable otherwise."""
    body = text.strip().upper().removesuffix("B")
    unit = body[-1:] if body[-1:] in _UNITS else ""
    number = body[: len(body) - len(unit)]
    if not number.isdigit():
        raise ValueError(
            f"{variable}={text!r} is not a size: use a number of bytes with an optional K, M or G "
            f"suffix, e.g. {variable}=512M (0 disables the buffer pool)")
    return int(number) * _UNITS[unit]


def _default_limit() -> int:
    setting = os.environ.get("KILN_BUFFER_POOL")
    if setting is not None:
        return _parse_bytes(setting, "KILN_BUFFER_POOL")
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(_DEFAULT_LIMIT_CAP, physical // 4)


def size_class(nbytes: int) -> int:
    """The block size serving a request of `nbytes`: 8 to 16 classes per power of two, whole pages."""
    step = max(PAGE_BYTES, 1 << max(nbytes.bit_length() - 4, 0))
    return -(-nbytes // step) * step


class OutOfMemoryError(MemoryError, RuntimeError):
    """A failed allocation: a MemoryError, and a RuntimeError as JAX's XlaRuntimeError for
    RESOURCE_EXHAUSTED is."""


def out_of_memory(nbytes: int, why: str = "") -> OutOfMemoryError:
    """JAX's message for a failed allocation, with the size in bytes."""
    return OutOfMemoryError(f"Out of memory allocating {nbytes} bytes ({nbytes / 2**30:.3g} GiB)"
                       + (f": {why}" if why else ""))


def _map(nbytes: int) -> mmap.mmap:
    try:
        block = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, OverflowError) as error:
        raise out_of_memory(nbytes, getattr(error, "strerror", None) or str(error)) from None
    if _HUGE_PAGES is not None:
        try:  # fewer first-touch faults and TLB misses where transparent huge pages are available
            block.madvise(_HUGE_PAGES)
        except OSError:
            pass
    return block


class BufferPool:
    """A bounded cache of freed large blocks, keyed by size class, released least recently used first."""

    def __init__(self, limit: int | None = None):
        self._limit = _default_limit() if limit is None else limit
        self._lock = threading.Lock()
        self._free: dict[int, list[mmap.mmap]] = collections.defaultdict(list)
        self._lru: collections.OrderedDict[int, mmap.mmap] = collections.OrderedDict()
        self._returned: collections.deque[mmap.mmap] = collections.deque()
        self._tokens: dict[int, weakref.ref] = {}  # keeps the weak references alive
        self._counts = dict.fromkeys(("hits", "misses", "evictions"), 0)
        self._cached_bytes = 0
        self._live_blocks = 0
        self._live_bytes = 0

    # -- allocation ------------------------------------------------------------------------------
    def empty(self, shape, dtype=np.float64) -> np.ndarray:
        """Like `np.empty(shape, dtype)` (C order); large buffers come from the pool."""
        dtype = np.dtype(dtype)
        shape = tuple(map(operator.index, shape)) if np.iterable(shape) else (operator.index(shape),)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes < THRESHOLD_BYTES or dtype.hasobject:
            return np.empty(shape, dtype)
        block = self._take(size_class(nbytes))
        token = np.frombuffer(block, dtype=dtype, count=count)
        ref = weakref.ref(token, self._on_release(block))
        self._tokens[id(ref)] = ref
        return token.reshape(shape)

    def _take(self, nbytes: int) -> mmap.mmap:
        with self._lock:
            self._drain()
            blocks = self._free.get(nbytes)
            block = blocks.pop() if blocks else None
            if block is not None:
                del self._lru[id(block)]
                self._cached_bytes -= nbytes
            self._counts["hits" if block is not None else "misses"] += 1
            self._live_blocks += 1
            self._live_bytes += nbytes
        return block if block is not None else _map(nbytes)

    def _on_release(self, block: mmap.mmap):
        def release(token_ref, block=block):
            self._tokens.pop(id(token_ref), None)
            self._returned.append(block)
            if self._lock.acquire(blocking=False):  # never waits: this may run inside a lock holder
                try:
                    self._drain()
                finally:
                    self._lock.release()
        return release

    # -- pool maintenance (lock held) ------------------------------------------------------------
    def _drain(self) -> None:
        while self._returned:
            block = self._returned.popleft()
            self._live_blocks -= 1
            self._live_bytes -= len(block)
            if len(block) > self._limit:  # would flush the whole pool, and still not fit
                self._counts["evictions"] += 1
                continue
            self._free[len(block)].append(block)
            self._lru[id(block)] = block
            self._cached_bytes += len(block)
        self._shrink(self._limit)

    def _shrink(self, limit: int) -> None:
        while self._cached_bytes > limit:
            _, block = self._lru.popitem(last=False)
            self._free[len(block)].remove(block)
            self._cached_bytes -= len(block)
            self._counts["evictions"] += 1

    # -- reporting -------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counters (hits, misses, evictions), cached and live blocks/bytes, limit and threshold."""
        with self._lock:
            self._drain()
            return {**self._counts, "cached_blocks": len(self._lru), "cached_bytes": self._cached_bytes,
                    "live_blocks": self._live_blocks, "live_bytes": self._live_bytes,
                    "limit_bytes": self._limit, "threshold_bytes": THRESHOLD_BYTES}

    def clear(self) -> int:
        """Unmap every cached block (live arrays are untouched); returns the bytes released."""
        with self._lock:
            self._drain()
            released = self._cached_bytes
            self._shrink(0)
            return released

    def set_limit(self, nbytes: int) -> None:
        """Change the cap on cached bytes (0 disables caching), releasing blocks above it."""
        with self._lock:
            self._limit = nbytes
            self._drain()

    def limit_bytes(self) -> int:
        return self._limit

    def _after_fork(self) -> None:
        self._lock = threading.Lock()


POOL = BufferPool()
os.register_at_fork(after_in_child=POOL._after_fork)

empty = POOL.empty
stats = POOL.stats
clear = POOL.clear
set_limit = POOL.set_limit
limit_bytes = POOL.limit_bytes
