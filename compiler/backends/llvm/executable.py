"""A compiled function: native code for one specialised SSA function, callable on NumPy arrays.

`compile_function(fn)` returns an `Executable` with the reference backend's interface:
`__call__(*ndarrays) -> list of ndarrays`, `as_text(level)`. Its native code comes from, in
order:
1. this process's table of loaded code (`_LOADED`, keyed by the disk cache key): compiling the
   same SSA function again reuses the code already in the JIT;
2. the on-disk object cache (disk_cache.py; `KILN_CACHE_DIR` moves or disables it), keyed by
   the SSA text, the target triple, the JIT CPU's name and features (`KILN_CPU`), and disk_cache's
   fingerprint (kiln, llvmlite and LLVM versions, the BLAS interface, the backend's sources). A
   hit loads the object code into the JIT (`target.load_object`) without building any IR;
   the code generator is not even imported;
3. a compilation: codegen builds the modules, target.py optimises them for the JIT CPU and
   emits object code, which is stored in the cache and loaded. Functions doing only a few
   hundred element operations (`opt_level`) are compiled quickly (target.QUICK: one module,
   the O0 pipeline with every internal function inlined, instructions selected by FastISel),
   3-6x faster than at O3 and running about as fast at that size; everything else gets O3,
   its kernels spread over up to `_compile_threads()` modules compiled at once on as many
   threads (codegen.build_parts, target.compile_objects).
Either way the extern globals (BLAS routines, the runtime library's parallel_for, host
callbacks) of every module are bound after the load. A cache entry is the object code of each
module behind a small header (the workspace size, the modules' names, the objects' lengths);
a corrupt entry is a miss (disk_cache.py checks its checksum and its key), and so is one whose
payload does not parse into well-formed object files (object_symbols.py) or does not define the entry
point: it is discarded and recompiled. The texts
`as_text` returns are built on first request, by compiling the function again (whether its code
came from the disk or not): no LLVM module outlives its compilation.

Calls (`__call__`) are the dispatch fast path. Everything that does not depend on the
arguments is prepared once per executable: the entry point as a ctypes function, the
descriptor of its inputs for the runtime library's `kiln_dispatch` (pycall.py, rtlib.py), an
allocator per output (plain `np.empty` for small ones, memory.py's pool for large ones) and
for the workspace. A call allocates the outputs and the workspace and hands the tuple
(inputs, outputs, workspace, numpy.ndarray, descriptor) to kiln_dispatch, which checks every
input natively, reads the buffer addresses itself and calls `kiln_main`: about a microsecond
for a small function. When an input is not exactly a C-contiguous aligned ndarray of the
expected dtype and shape, nothing has run: the inputs go through `np.require` (C order,
aligned), their addresses into a ctypes pointer array, and `kiln_main` is called (a NumPy
argument that is a view; kiln Arrays arrive contiguous: a broadcast one is made contiguous
once, by `Array._dense` in the runtime, not here on every call). `call_exact` is the first half alone (None on a mismatch), for `kiln.jit`'s fast
path. ctypes releases the GIL during either call, so several Python threads run compiled
code at once; each call has its own outputs, workspace and pointer array.

Donation (`compile_function(fn, donated)`, jit's `donate_argnums`): the storage plan may
compute an output in a donated input's buffer (`Executable.held`: {output: input}); such an
output is not allocated, the call hands that input's array to the code, which overwrites it,
and returns it as the output (a copy first when it is not a writable C-contiguous array of
the expected type). Donation is part of the cache key and of the module's name.
"""
import ctypes
import math
import struct
import threading

import numpy as np

from . import target, memory, externs, disk_cache, object_symbols, parallel, pycall, rtlib
from .ssa_key import key_text
from . import replica_context, host_callbacks
from ...primitives.collectives import holds_collectives
from ...primitives.processes import crosses_processes

LEVELS = ("llvm", "llvm-unoptimized", "asm")
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_FAST_TYPE = _ENTRY_TYPE   # kiln_dispatch(ptr pack): the pack tuple's address
_RUN_REPLICAS = ctypes.CFUNCTYPE(None, _ENTRY_TYPE, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
# A cache entry: workspace bytes, length of the module names, number of objects; the module
# names (newline-separated, the entry's first), each object's length, the objects.
_ENTRY_HEADER = struct.Struct("<QII")
_LENGTH = struct.Struct("<Q")
_SMALL = memory.THRESHOLD_BYTES
QUICK_WORK = 256   # element operations (operand and result sizes summed over the equations)
MAX_PARTS = 4      # modules an optimised function's kernels are spread over, at most


def empty(shape, dtype):
    """Memory for an output or the workspace: the caching allocator (memory.py) reuses the
    pages of freed large buffers, so repeated calls do not page-fault."""
    return memory.empty(shape, dtype)


POOL_ENTRIES = frozenset({"kiln_run_tasks", "kiln_parallel_for"})


class Native:
    """Native code of one SSA function in the JIT. Its texts are built on first request (by
    compiling the function again: keeping LLVM modules around would cost far more memory)."""

    def __init__(self, fn, loaded, workspace, parts=1, donated=(), held=None, bound=(),
                 code_bytes=0):
        self.function = fn
        self.loaded = loaded
        self.workspace = workspace
        self.code_bytes = code_bytes   # the size of the object code loaded
        self.parts = parts   # the modules its code came from
        self.donated = donated
        self.held = held or {}   # {output: donated input whose buffer becomes it}
        # whether its code hands work to the thread pool (parallel loops, product panels)
        self.uses_pool = bool(POOL_ENTRIES.intersection(bound))
        self._texts = {}

    def text(self, level):
        with target.LOCK:
            if level not in self._texts:
                self._texts[level] = self._make(level)
            return self._texts[level]

    def _make(self, level):
        modules = _build_parts(self.function, self.parts, self.donated)[0]
        if level == "llvm-unoptimized":
            return "\n".join(map(str, modules))
        opt = opt_level(self.function)
        optimized = [target.optimize(str(m), m.name, level=opt) for m in modules]
        return "\n".join(str(m) if level == "llvm" else
                         target.assembly(m, _codegen_machine(opt)) for m in optimized)


class Executable:
    def __init__(self, fn, donated=()):
        self.function = fn
        self.native = native_code(fn, tuple(sorted(donated)))
        self.held = self.native.held
        # its parallel loops and product panels spread one call over several cores
        self.uses_pool = self.native.uses_pool and parallel.num_threads() > 1
        loaded = self.native.loaded
        self.name = loaded.name
        self._entry = _ENTRY_TYPE(loaded.entry)
        self._fast = _FAST_TYPE(rtlib.address("dispatch")) if pycall.layout_ok() else None
        self._descriptor = pycall.descriptor(loaded.entry, [v.aval for v in fn.invars],
                                             len(fn.outvars), self.native.workspace)
        self._inputs = [(np.dtype(v.aval.dtype), tuple(v.aval.shape)) for v in fn.invars]
        self._outs = [_allocator(tuple(v.aval.shape), np.dtype(v.aval.dtype))
                      if j not in self.held else _none for j, v in enumerate(fn.outvars)]
        workspace = self.native.workspace
        self._workspace = _allocator((workspace,), np.dtype(np.uint8)) if workspace else _none
        self._slots = ctypes.c_void_p * (len(fn.invars) + len(fn.outvars) + 1)
        self._mismatch = range(pycall.MISMATCH - len(fn.invars), pycall.MISMATCH + 1)
        self._replicated = holds_collectives(fn)
        self._across = crosses_processes(fn)   # lower_processes.py: checked around calls

    def __call__(self, *args):
        if self._replicated:   # a pmap replica: its collectives read the thread's record
            replica_context.enter()
        if self._across:
            self._check_processes(before=True)
        outs = [make() for make in self._outs]
        if self.held:
            args = self._hand_over(args, outs)
        workspace = self._workspace()
        status = self._call_fast(args, outs, workspace) if self._fast is not None else None
        if status is None:
            status = self._call_converted(args, outs, workspace)
        if status:
            raise self._failure(status)
        if host_callbacks.PENDING:
            host_callbacks.raise_pending()
        if self._across:
            self._check_processes(before=False)
        return outs

    def call_exact(self, args):
        """The outputs for `args` (a tuple) when every input already is a C-contiguous
        ndarray of the expected dtype and shape; None (nothing ran) when one is not. The
        dispatch fast path of `kiln.jit` (runtime/fastcall.py)."""
        if self._fast is None or self._across:
            return None
        outs = [make() for make in self._outs]
        status = self._call_fast(args, outs, self._workspace())
        if status:
            raise self._failure(status)
        if host_callbacks.PENDING:
            host_callbacks.raise_pending()
        return None if status is None else outs

    def _check_processes(self, before):
        """Around a call of a function holding collectives across processes
        (lower_processes.py): kiln.distributed must be set up and its communicator usable
        before; after, a wait of this call that timed out is the engine's timeout error."""
        from .. import mpi_engine
        if not mpi_engine.is_set_up():
            status = mpi_engine.NOT_SET_UP
        elif mpi_engine.is_broken():
            status = mpi_engine.BROKEN if before else mpi_engine.TIMEOUT
        else:
            return
        raise mpi_engine.error(status, f"compiled code for {self.function.name}")

    def _hand_over(self, args, outs):
        """`args` with each input in `held` as the buffer the code overwrites and returns as
        its output: the input itself when it already is a writable C-contiguous array of the
        expected type, else a copy (the caller must own the inputs it donates: kiln.jit
        passes a copy of any it cannot prove nothing else uses)."""
        args = list(args)
        for j, i in self.held.items():
            dtype, shape = self._inputs[i]
            a = args[i]
            if not (type(a) is np.ndarray and a.dtype == dtype and a.shape == shape
                    and a.flags.c_contiguous and a.flags.aligned and a.flags.writeable):
                a = _allocator(shape, dtype)()
                np.copyto(a, args[i], casting="unsafe")
            args[i] = outs[j] = a
        return tuple(args)

    def _call_fast(self, args, outs, workspace):
        """kiln_dispatch's status, or None when an input is not in the exact expected form."""
        pack = (args, outs, workspace, np.ndarray, self._descriptor)
        status = self._fast(id(pack))
        return None if status and status in self._mismatch else status

    def _failure(self, status):
        from .lower_tapes import OUT_OF_MEMORY   # (the code generator, on failure only)
        if status == OUT_OF_MEMORY:
            return memory.OutOfMemoryError(
                f"Out of memory: compiled code for {self.function.name} could not allocate the "
                f"tape of a loop it differentiates (status {status})")
        from .. import mpi_engine
        if mpi_engine.is_status(status):   # a collective across processes (kiln_mpi_*)
            return mpi_engine.error(status, f"compiled code for {self.function.name}")
        return RuntimeError(f"kiln: compiled code for {self.function.name} failed "
                            f"(status {status})")

    def _call_converted(self, args, outs, workspace):
        """The call for inputs that are not exactly C-contiguous arrays of the right dtype
        (and the call where the fast entry cannot be used)."""
        inputs = self._inputs
        if len(args) != len(inputs):
            raise TypeError(f"{self.function.name} takes {len(inputs)} arrays, "
                            f"got {len(args)}")
        buffers = [_contiguous(a, dt, shape) for a, (dt, shape) in zip(args, inputs)] + outs
        if workspace is not None:
            buffers.append(workspace)
        return self._entry(self._slots(*[b.__array_interface__["data"][0] for b in buffers]))

    def run_replicas(self, per_replica, group):
        """Each replica's outputs: the code run once per argument list of `per_replica`, all
        at once on the runtime library's threads (kiln_run_replicas, pool.py), replica i with
        the record of replica i of `group` (a ReplicaGroup: replica_context.py) for its
        collectives; one call into native code, no Python per replica while they run."""
        n = len(per_replica)
        native = replica_context.native_group(group)
        outs, keep, sets = [], [], np.empty(n, np.uint64)
        for i, args in enumerate(per_replica):
            if len(args) != len(self._inputs):
                raise TypeError(f"{self.function.name} takes {len(self._inputs)} arrays, "
                                f"got {len(args)}")
            replica_outs = [make() for make in self._outs]
            buffers = [_contiguous(a, dt, shape) for a, (dt, shape) in zip(args, self._inputs)]
            buffers += replica_outs
            workspace = self._workspace()
            if workspace is not None:
                buffers.append(workspace)
            slots = self._slots(*[x.__array_interface__["data"][0] for x in buffers])
            keep += [buffers, slots]
            sets[i] = ctypes.addressof(slots)
            outs.append(replica_outs)
        statuses = np.zeros(n, np.int32)
        _RUN_REPLICAS(rtlib.address("run_replicas"))(
            self._entry, sets.ctypes.data, native.records.ctypes.data, statuses.ctypes.data, n,
            replica_context.replica_key())
        for status in statuses:
            if status:
                raise self._failure(int(status))
        crossed = native.status()
        if crossed:
            from .. import mpi_engine
            raise mpi_engine.error(crossed)
        del keep
        return outs

    def as_text(self, level="llvm"):
        """The optimised LLVM IR ("llvm"), the IR before optimisation ("llvm-unoptimized"),
        or the host assembly ("asm")."""
        if level not in LEVELS:
            raise ValueError(f"unknown text level {level!r}; the LLVM backend has "
                             f"{', '.join(map(repr, LEVELS))}")
        return self.native.text(level)


def compile_function(fn, donated=()):
    """The Executable of SSA function `fn`; `donated`: indices of inputs whose buffers the code
    may overwrite and return as outputs of the same type (`Executable.held`)."""
    return Executable(fn, donated)


def _contiguous(a, dtype, shape):
    out = np.require(a, dtype=dtype, requirements="CA")   # C order, aligned
    if out.shape != shape:
        raise TypeError(f"kiln: a compiled function expected an array of shape {shape}, "
                        f"got {out.shape}")
    return out


def _none():
    return None


def _allocator(shape, dtype):
    """A zero-argument function returning a fresh uninitialised array of shape and dtype."""
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize < _SMALL:
        return lambda: np.empty(shape, dtype)
    return lambda: empty(shape, dtype)


# ------------------------------------------------------------------------ native code

_LOADED = {}   # cache key -> Native
_COMPILING = threading.Lock()


def cache_key(fn, donated=()):
    """The disk cache key of SSA function `fn` compiled for the JIT's CPU (`KILN_CPU`), with
    its inputs `donated`."""
    cpu, features = target.jit_cpu()
    return disk_cache.key(key_text(fn), target.triple(), cpu, features, str(opt_level(fn)),
                          str(donated))


def native_code(fn, donated=()):
    """The Native code of SSA function `fn` with its inputs `donated`: loaded before, from the
    disk cache, or compiled now (see the module docstring)."""
    key = cache_key(fn, donated)
    native = _LOADED.get(key)
    if native is None:
        with _COMPILING:
            native = _LOADED.get(key)
            if native is None:
                native = _from_disk(fn, key, donated) or _compile(fn, key, donated)
                _LOADED[key] = native
    return native


def donation(fn, donated):
    """{input: the outputs of its type} for the `donated` inputs of `fn`
    (buffers.plan_storage's `donated`)."""
    types = [(v.aval.shape, v.aval.dtype) for v in fn.outvars]
    return {i: {j for j, t in enumerate(types)
                if t == (fn.invars[i].aval.shape, fn.invars[i].aval.dtype)} for i in donated}


def _held(fn, donated):
    """The storage plan's `held` outputs (from the code generator's plan: a disk cache hit
    with donated inputs plans again)."""
    if not donated:
        return {}
    from . import codegen, lower_linalg
    # planned as codegen.build_parts plans it: with the transposes its products read joined
    return codegen.plan_function(lower_linalg.read_transposes(fn), donation(fn, donated)).held


def _from_disk(fn, key, donated):
    """The Native code stored under `key`, or None: a miss, or an entry whose payload does not
    parse into well-formed object files or does not load (it is discarded, and recompiled)."""
    entry = disk_cache.load(key)
    if entry is None:
        return None
    try:
        names, objects, workspace = _parse_entry(entry)
    except (ValueError, struct.error, UnicodeDecodeError) as error:
        disk_cache.discard(key, f"unusable payload: {error}")
        return None
    try:
        return _load(fn, names, objects, workspace, donated, _held(fn, donated))
    except RuntimeError as error:   # the objects did not define the entry point
        disk_cache.discard(key, str(error))
        return None


def _parse_entry(entry):
    """(module names, object files, workspace bytes) of a cache entry's payload; ValueError
    (object_symbols.BadObject) or struct.error for anything else."""
    workspace, length, count = _ENTRY_HEADER.unpack_from(entry)
    start = _ENTRY_HEADER.size + length
    names = entry[_ENTRY_HEADER.size:start].decode().split("\n")
    if len(names) != count or not all(n.isprintable() and n for n in names):
        raise ValueError(f"{count} objects, {len(names)} module names")
    lengths = [_LENGTH.unpack_from(entry, start + k * _LENGTH.size)[0] for k in range(count)]
    start += count * _LENGTH.size
    if start + sum(lengths) != len(entry):
        raise ValueError("object sizes do not add up to the entry's")
    objects = []
    for size in lengths:
        objects.append(entry[start:start + size])
        object_symbols.check_object(objects[-1])
        start += size
    return names, objects, workspace


def _compile(fn, key, donated):
    modules, plan = _build_parts(fn, None, donated)
    names = [m.name for m in modules]
    with target.LOCK:
        objects = target.compile_objects(modules, opt_level(fn), _compile_threads())
    joined = "\n".join(names).encode()
    disk_cache.store(key, b"".join([_ENTRY_HEADER.pack(plan.workspace, len(joined),
                                                       len(objects)), joined]
                                   + [_LENGTH.pack(len(data)) for data in objects] + objects))
    return _load(fn, names, objects, plan.workspace, donated, plan.held)


def _load(fn, names, objects, workspace, donated, held):
    rtlib.provide(objects)   # first: the builtins the objects may call
    loaded = target.load_objects(names[0], objects, what=f"{fn.name} ({names[0]})")
    bound = set()
    for name in names:
        bound.update(externs.bind_externs(loaded.global_address, name))
    return Native(fn, loaded, workspace, len(names), donated, held, bound,
                  sum(len(o) for o in objects))


def _compile_threads():
    """Threads that compile the parts of one function at once: the cores kiln may use
    (KILN_NUM_THREADS), at most MAX_PARTS, and no more than are idle right now (a second
    thread on a busy core, beside OpenBLAS's threads that still spin after a matrix product
    or another process, makes the compilation slower, not faster)."""
    from . import parallel
    return min(parallel.num_threads(), MAX_PARTS, 1 + target.idle_cores())


def _codegen_machine(level):
    """Quick modules get FastISel (target.host_machine(0)), the others the optimising
    instruction selector."""
    return target.host_machine(0 if level == target.QUICK else target.OPT_LEVEL)


def opt_level(fn):
    """target.QUICK for a function doing at most QUICK_WORK element operations (its code runs
    for well under a microsecond: O3 and vectorisation would not repay their compile time),
    else target.OPT_LEVEL. Loops (regions other than fused bodies) never count as quick."""
    work = 0
    for eqn in fn.eqns:
        if eqn.prim.name != "fusion" and eqn.regions():
            return target.OPT_LEVEL
        # A fused body counts with its own values: a broadcast reduced inside the group
        # iterates over the broadcast shape, whatever the group's operands and results.
        for e in eqn.params["body"].eqns if eqn.prim.name == "fusion" else [eqn]:
            size = sum(v.aval.size for v in e.outvars) + sum(x.aval.size for x in e.invars)
            if e.prim.name == "dot_general":
                size *= math.prod(e.invars[0].aval.shape[d]
                                  for d in e.params["dimension_numbers"][0][0])
            work += size
    return target.QUICK if work <= QUICK_WORK else target.OPT_LEVEL


def build_module(fn):
    """(module, storage plan) of `fn` in one module (for ahead-of-time compilation)."""
    modules, plan = _build_parts(fn, 1)
    return modules[0], plan


def _build_parts(fn, parts=None, donated=()):
    """([module], storage plan) of `fn` from the code generator, imported here, on the first
    compilation (a disk cache hit needs none): optimised functions have their kernels spread
    over up to `parts` modules (`_compile_threads()` by default), compiled at once on as
    many threads (codegen.build_parts, target.compile_objects)."""
    from . import codegen
    quick = opt_level(fn) == target.QUICK
    modules, plan = codegen.build_parts(fn, 1 if quick else parts or _compile_threads(),
                                        donation(fn, donated))
    if quick:   # the O0 pipeline inlines these only
        for function in modules[0].functions:
            if function.linkage == "internal" and "noinline" not in function.attributes:
                function.attributes.add("alwaysinline")
    return modules, plan
