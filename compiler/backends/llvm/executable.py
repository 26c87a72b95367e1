"""A compiled function: native code for one specialised SSA function, callable on NumPy arrays.

`compile_function(fn)` returns an `Executable` with the reference backend's interface:
`__call__(*ndarrays) -> list of ndarrays`, `as_text(level)`. Its native code comes from, in
order:
1. this process's table of loaded code (`_LOADED`, keyed by the disk cache key): compiling the
   same SSA function again reuses the code already in the JIT;
2. the on-disk object cache (disk_cache.py; `KILN_CACHE_DIR` moves or disables it), keyed by
   the SSA text, the target triple, the host CPU's name and features, and disk_cache's
   fingerprint (kiln, llvmlite and LLVM versions, the BLAS interface, the backend's sources). A
   hit loads the object code into the JIT (`target.load_object`) without building any IR;
   the code generator is not even imported;
3. a compilation: codegen builds the module, target.py optimises it for the host CPU and emits
   object code, which is stored in the cache and loaded.
Either way the extern globals (BLAS routines, pthreads, the thread count) are bound after the
load. A cache entry is the object code behind a small header (the workspace size and the
module's name); a corrupt entry is a miss (disk_cache.py checks its checksum) and is
recompiled. The texts `as_text` returns are built lazily: for code that came from the disk,
the IR is rebuilt (and optimised again) on first request.

Calls (`__call__`) are the dispatch fast path. Everything that does not depend on the
arguments is prepared once per executable: the entry point as a ctypes function, the expected
dtypes and C-contiguity of each input, the output shapes and dtypes. A call checks each input
(`type`, dtype and flags: an array already in the right form is used as it is, anything else
goes through `np.ascontiguousarray`), allocates the outputs (plain `np.empty` for small
ones, memory.py's pool for large ones, `empty`) and the workspace, writes the buffer
addresses into a ctypes pointer array and calls `kiln_main` (ctypes releases the GIL, so
several Python threads run compiled code at once; each call has its own outputs, workspace and
pointer array).
"""
import ctypes
import struct
import threading

import numpy as np

from ...ir.ssa import Function
from . import target, memory, externs, disk_cache

LEVELS = ("llvm", "llvm-unoptimized", "asm")
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_ENTRY_HEADER = struct.Struct("<QI")   # workspace bytes, length of the module name
_SMALL = memory.THRESHOLD_BYTES


def empty(shape, dtype):
    """Memory for an output or the workspace: the caching allocator (memory.py) reuses the
    pages of freed large buffers, so repeated calls do not page-fault."""
    return memory.empty(shape, dtype)


class Native:
    """Native code of one SSA function in the JIT, and its texts (built on first request)."""

    def __init__(self, fn, loaded, workspace, unoptimized=None, optimized=None):
        self.function = fn
        self.loaded = loaded
        self.workspace = workspace
        self._unoptimized = unoptimized
        self._optimized = optimized   # a ModuleRef until printed, then its text
        self._asm = None

    def text(self, level):
        if level == "asm":
            if self._asm is None:
                with target.LOCK:
                    self._asm = target.assembly(target.parse(self.text("llvm")))
            return self._asm
        if self._unoptimized is None:
            module, _ = _codegen().build(self.function)
            self._unoptimized = str(module)
        if level == "llvm-unoptimized":
            return self._unoptimized
        with target.LOCK:
            if self._optimized is None:
                self._optimized = target.optimize(self._unoptimized, self.loaded.name)
            if not isinstance(self._optimized, str):
                self._optimized = str(self._optimized)
        return self._optimized


class Executable:
    def __init__(self, fn):
        self.function = fn
        self.native = native_code(fn)
        self.name = self.native.loaded.name
        self._entry = _ENTRY_TYPE(self.native.loaded.entry)
        self._inputs = [(np.dtype(v.aval.dtype), tuple(v.aval.shape)) for v in fn.invars]
        self._outs = [_allocator(tuple(v.aval.shape), np.dtype(v.aval.dtype))
                      for v in fn.outvars]
        workspace = self.native.workspace
        self._workspace = _allocator((workspace,), np.dtype(np.uint8)) if workspace else None
        self._slots = ctypes.c_void_p * (len(fn.invars) + len(fn.outvars) + 1)

    def __call__(self, *args):
        inputs = self._inputs
        if len(args) != len(inputs):
            raise TypeError(f"{self.function.name} takes {len(inputs)} arrays, "
                            f"got {len(args)}")
        ins = [a if type(a) is np.ndarray and a.dtype == dt and a.shape == shape
               and a.flags.c_contiguous else _contiguous(a, dt, shape)
               for a, (dt, shape) in zip(args, inputs)]
        outs = [make() for make in self._outs]
        buffers = ins + outs
        if self._workspace is not None:
            buffers.append(self._workspace())
        status = self._entry(self._slots(*[b.__array_interface__["data"][0] for b in buffers]))
        if status:
            raise RuntimeError(f"kiln: compiled code for {self.function.name} failed "
                               f"(status {status})")
        return outs

    def as_text(self, level="llvm"):
        """The optimised LLVM IR ("llvm"), the IR before optimisation ("llvm-unoptimized"),
        or the host assembly ("asm")."""
        if level not in LEVELS:
            raise ValueError(f"unknown text level {level!r}; the LLVM backend has "
                             f"{', '.join(map(repr, LEVELS))}")
        return self.native.text(level)


def compile_function(fn):
    return Executable(fn)


def _contiguous(a, dtype, shape):
    out = np.ascontiguousarray(a, dtype=dtype)
    if out.shape != shape:
        raise TypeError(f"kiln: a compiled function expected an array of shape {shape}, "
                        f"got {out.shape}")
    return out


def _allocator(shape, dtype):
    """A zero-argument function returning a fresh uninitialised array of shape and dtype."""
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize < _SMALL:
        return lambda: np.empty(shape, dtype)
    return lambda: empty(shape, dtype)


# ------------------------------------------------------------------------ native code

_LOADED = {}   # cache key -> Native
_COMPILING = threading.Lock()


def cache_key(fn):
    """The disk cache key of SSA function `fn` compiled for this host."""
    cpu, features = target.host_cpu()
    return disk_cache.key(key_text(fn), target.triple(), cpu, features)


def key_text(fn):
    """Everything the SSA text of `fn` says, in a compact form that is quicker to produce than
    the printed SSA (names, types, primitives, literals, params, regions)."""
    lines = []
    _key_lines(fn, lines, set())
    return "\n".join(lines)


def _key_lines(fn, lines, seen):
    lines.append(f"def {fn.name}({_operands(fn.invars)})")
    for eqn in fn.eqns:
        for region in eqn.regions():
            if id(region) not in seen:
                seen.add(id(region))
                _key_lines(region, lines, seen)
        params = ",".join(f"{k}={_param(v)}" for k, v in eqn.params.items())
        lines.append(f"{_operands(eqn.outvars)}={eqn.prim.name}({_operands(eqn.invars)};{params})")
    lines.append(f"return {_operands(fn.outvars)}")


def _operands(xs):
    return ",".join(f"{getattr(x, 'name', None) or repr(x.value)}:{x.aval.str_short()}"
                    f"{'~' if x.aval.weak_type else ''}" for x in xs)


def _param(value):
    if type(value) in (tuple, list):
        return "(" + ",".join(map(_param, value)) + ")"
    return f"@{value.name}" if isinstance(value, Function) else repr(value)


def native_code(fn):
    """The Native code of SSA function `fn`: loaded before, from the disk cache, or compiled
    now (see the module docstring)."""
    key = cache_key(fn)
    native = _LOADED.get(key)
    if native is None:
        with _COMPILING:
            native = _LOADED.get(key)
            if native is None:
                native = _from_disk(fn, key) or _compile(fn, key)
                _LOADED[key] = native
    return native


def _from_disk(fn, key):
    entry = disk_cache.load(key)
    if entry is None or len(entry) < _ENTRY_HEADER.size:
        return None
    workspace, length = _ENTRY_HEADER.unpack_from(entry)
    start = _ENTRY_HEADER.size
    name = entry[start:start + length].decode()
    loaded = target.load_object(name, entry[start + length:])
    externs.bind_externs(loaded.global_address, name)
    return Native(fn, loaded, workspace)


def _compile(fn, key):
    module, plan = _codegen().build(fn)
    name = module.name
    unoptimized = str(module)
    with target.LOCK:
        optimized = target.optimize(unoptimized, name)
        target.namespace_entry(optimized)
        data = target.object_code(optimized)
    disk_cache.store(key, _ENTRY_HEADER.pack(plan.workspace, len(name.encode()))
                     + name.encode() + data)
    loaded = target.load_object(name, data)
    externs.bind_externs(loaded.global_address, name)
    return Native(fn, loaded, plan.workspace, unoptimized, optimized)


def _codegen():
    """The code generator, imported on the first compilation (a disk cache hit needs none)."""
    from . import codegen
    return codegen
