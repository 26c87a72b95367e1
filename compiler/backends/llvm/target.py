"""The machine the LLVM backend compiles for, the optimiser, and the process-wide JIT.

- `jit_cpu()`: the (CPU name, feature string) the JIT compiles for, chosen by `KILN_CPU`
  (read at each compilation): `native` (the default: the host CPU's name and every feature it
  reports), `generic` (LLVM's baseline x86-64: SSE2), `x86-64-v2`/`-v3`/`-v4` (the portable
  micro-architecture levels), or any CPU name LLVM knows (`znver1`, `skylake-avx512`, ...); a
  name LLVM does not know raises `UnknownCPUError`. It is part of every cache key (executable.py,
  rtlib.py), so code compiled for one setting is never loaded for another.
- `host_machine()`: an llvmlite `TargetMachine` for `jit_cpu()`, optimisation level 3, the
  JIT's code model and static relocations (MCJIT's linker mishandles the GOT-relative
  relocations of position-independent code in the large code model once several objects are
  loaded: constants are read from the wrong object).
  `generic_machine(level)` targets a portable x86-64 micro-architecture level ("x86-64-v2",
  "x86-64-v3", ...) with position-independent code, for ahead-of-time artifacts (shared
  libraries) that must run on other machines; `host_pic_machine()` is the host CPU with
  position-independent code, for shared libraries that run on this machine.
- `optimize(text, name, machine, level)`: parse LLVM IR text, verify it, and run the new pass
  manager's O3 pipeline tuned for `machine` (loop and SLP vectorisation and interleaving
  on; the LoopUnroll passes off: they took a third of the pipeline's time for no measured
  gain on kiln's loops, which the vectoriser already interleaves), or the O0 pipeline for
  `level=QUICK` (tiny programs, where compile time is all that counts; their internal
  functions are marked `alwaysinline`, which O0 honours). With `host_machine(0)`'s FastISel
  that compiles them 3-6x faster.
- `object_code(module, machine)`: object bytes of an optimised module whose entry point was
  renamed by `namespace_entry` (to `<name>.kiln_main`, so that the entry points of several
  compiled functions coexist in the engine; module names are unique per function: codegen
  names them after a hash of the SSA text); `assembly(module, machine)`: its native text.
- `compile_objects(modules, level, threads)`: object code of several modules of one function
  (codegen.build_parts), each parsed into its own LLVM context, optimised and compiled by
  its own target machine, on up to `threads` threads at once. llvmlite guards every call into
  LLVM with one process-wide lock, which would run them one after the other: the long calls
  (parsing, the pass pipeline, instruction selection) go to llvmlite's C functions directly,
  which LLVM allows for separate contexts and target machines (ctypes releases the GIL).
- `load_object(name, data)`: add object code (just made, or read from the disk cache) to the
  one MCJIT `ExecutionEngine` of the process and return a `Loaded` handle (addresses of its
  entry point and globals); `load_objects` adds the objects of one function's modules, which
  call each other, before resolving their symbols. First it checks that every symbol they
  call resolves (object_symbols.py: among them, the objects loaded before, among which the
  runtime library's compiler-rt builtins, or the process's libraries), raising
  `UnresolvedSymbolError` where MCJIT would abort the process.
- `LOCK`: llvmlite objects are not thread-safe; every use of them holds it.

llvmlite is imported here and in every module of this package; `import kiln` never imports
this package (the runtime imports it on the first LLVM compilation), so startup stays fast.
"""
import concurrent.futures
import ctypes
import functools
import os
import tempfile
import threading

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from ...errors import CompileError
from .object_symbols import check_resolvable

ENTRY = "kiln_main"
OPT_LEVEL = 3
QUICK = 0   # the optimisation level of modules whose code runs too briefly to repay O3
# Intel tunes AVX-512 machines to prefer 256-bit vectors; kiln's loops are long and
# bandwidth-bound, where full-width vectors win: ask for 512-bit vectors where available.
_WIDE_VECTORS = "-prefer-256-bit"
CPU_VARIABLE = "KILN_CPU"
# KILN_CPU's own names -> the LLVM CPU name (None: the host's name and features)
_CPU_ALIASES = {"native": None, "generic": "generic"}

LOCK = threading.RLock()   # llvmlite objects are not thread-safe; one compilation at a time


@functools.lru_cache(maxsize=None)
def _initialized():
    with LOCK:   # threads compiling their first functions at once initialise LLVM once
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
    return True


@functools.lru_cache(maxsize=None)
def host_cpu():
    """(cpu name, feature string) of the machine this process runs on."""
    _initialized()
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features:
        features += "," + _WIDE_VECTORS
    return llvm.get_host_cpu_name(), features


class UnknownCPUError(CompileError, ValueError):
    """`KILN_CPU` names a CPU LLVM does not know."""


def jit_cpu():
    """(cpu name, feature string) the JIT compiles for: `KILN_CPU`'s choice (the module
    docstring), read now."""
    return _resolve_cpu(os.environ.get(CPU_VARIABLE, "").strip() or "native")


@functools.lru_cache(maxsize=None)
def _resolve_cpu(setting):
    if setting in _CPU_ALIASES and _CPU_ALIASES[setting] is None:
        return host_cpu()
    name = _CPU_ALIASES.get(setting, setting)
    if not _known_cpu(name):
        raise UnknownCPUError(
            f"{CPU_VARIABLE}={setting!r} is not a CPU LLVM {_llvm_version()} knows",
            hint=f"Set {CPU_VARIABLE} to native (the default: this machine's CPU), generic, "
                 f"x86-64-v2, x86-64-v3, x86-64-v4, or an LLVM CPU name such as znver1 or "
                 f"skylake-avx512 (`llc -mcpu=help` lists them), or unset it.")
    return name, _WIDE_VECTORS   # (a no-op on CPUs without 512-bit vectors)


def _llvm_version():
    return ".".join(map(str, llvm.llvm_version_info))


def _known_cpu(name):
    """Whether LLVM knows CPU `name` for this process's triple: LLVM says so only by printing
    "is not a recognized processor" on stderr when it makes a target machine, so the check
    makes one with stderr (the file descriptor) captured."""
    _initialized()
    with LOCK, tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            llvm.Target.from_triple(triple()).create_target_machine(cpu=name)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return b"not a recognized processor" not in captured.read()


@functools.lru_cache(maxsize=None)
def triple():
    _initialized()
    return llvm.get_process_triple()


def host_machine(opt=OPT_LEVEL):
    """The TargetMachine for the JIT's CPU (`jit_cpu()`) generating code at level `opt`
    (shared). Level 0 selects instructions with FastISel, several times quicker than the
    optimising selector: `QUICK` modules use it."""
    cpu, features = jit_cpu()
    return _shared_machine(cpu, features, opt)


@functools.lru_cache(maxsize=None)
def _shared_machine(cpu, features, opt):
    return _machine(cpu, features, opt=opt)


@functools.lru_cache(maxsize=None)
def host_pic_machine():
    """The host CPU's TargetMachine with position-independent code and the default code model,
    for shared libraries built to run on this machine (`kiln compile --cpu native`)."""
    cpu, features = host_cpu()
    return _machine(cpu, features, reloc="pic", codemodel="default")


@functools.lru_cache(maxsize=None)
def generic_machine(level="x86-64-v3"):
    """A TargetMachine for a portable CPU level, for artifacts run on other machines."""
    return _machine(level, "", reloc="pic", codemodel="default")


def _machine(cpu, features, reloc="static", codemodel="jitdefault", opt=OPT_LEVEL):
    _initialized()
    target = llvm.Target.from_triple(triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=opt,
                                        reloc=reloc, codemodel=codemodel,
                                        jit=codemodel == "jitdefault")


def parse(text, name=None, context=None):
    """LLVM IR text -> a verified ModuleRef (called `name`: the parser does not keep the
    module's name, and `load` namespaces symbols by it), in `context` (llvmlite's global
    context by default)."""
    _initialized()
    with LOCK:
        return _parsed(text, name, context or llvm.get_global_context(), context is not None)


def _parsed(text, name, context, own=False):
    module = _parse(text, context, own)
    module.verify()
    if name is not None:
        module.name = name
    return module


def optimize(text, name, machine=None, level=OPT_LEVEL):
    """Parse, verify and optimise `text` (module `name`) for `machine` (the host by default):
    at O3 with loop and SLP vectorisation and interleaving, or at `level` 0
    (`QUICK`: only `alwaysinline` functions are inlined)."""
    machine = machine or host_machine()
    with LOCK:
        module = parse(text, name)
        _run_pipeline(module, machine, level)
    return module


def _run_pipeline(module, machine, level, own=False):
    """Run the pipeline of `level` over `module`, without llvmlite's lock if the module has
    a context of its `own` (see `_native`)."""
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    options = llvm.PipelineTuningOptions(speed_level=level)
    loops = level >= OPT_LEVEL
    options.loop_vectorization = loops
    options.slp_vectorization = loops
    options.loop_unrolling = False   # a third of O3's time; the vectoriser interleaves
    options.loop_interleaving = loops
    builder = llvm.create_pass_builder(machine, options)
    _native("LLVMPY_RunNewModulePassManager", own)(builder.getModulePassManager(), module,
                                                   builder)


# --------------------------------------------------- object code on several threads at once

def _native(name, unlocked=True):
    """llvmlite's C function `name`, called without llvmlite's process-wide lock if
    `unlocked`: the lock would serialise the compilations of `compile_objects`' threads, each
    of which works on an LLVM context and target machine of its own (which LLVM allows; the
    lock protects llvmlite's global context). The locked function where llvmlite does not
    expose the raw one."""
    function = getattr(ffi.lib, name)
    return getattr(function, "_cfn", function) if unlocked else function


def _parse(text, context, own):
    with ffi.OutputString() as error:
        module = llvm.ModuleRef(_native("LLVMPY_ParseAssembly", own)(
            context, ctypes.c_char_p(text.encode()), error), context)
        if error:
            module.close()
            raise RuntimeError(f"LLVM IR parsing error\n{error}")
    return module


def _emit(machine, module, use_object=True):
    with ffi.OutputString() as error:
        buffer = _native("LLVMPY_TargetMachineEmitToMemory")(machine, module, int(use_object),
                                                             error)
        if not buffer:
            raise RuntimeError(str(error))
    try:
        return ctypes.string_at(_native("LLVMPY_GetBufferStart")(buffer),
                                _native("LLVMPY_GetBufferSize")(buffer))
    finally:
        _native("LLVMPY_DisposeMemoryBuffer")(buffer)


_THREAD = threading.local()   # each thread's own target machines, by optimisation level
_POOL = {}   # process id -> (threads, the pool of compile_objects); a forked child makes its own


def _own_machine(opt):
    machines = _THREAD.__dict__.setdefault("machines", {})
    cpu, features = jit_cpu()
    if (cpu, features, opt) not in machines:
        machines[cpu, features, opt] = _machine(cpu, features, opt=opt)
    return machines[cpu, features, opt]


def _object(text, name, level):
    """Object code of the module `name` from its IR text, in a fresh LLVM context; its entry
    point, if it has one, renamed by `namespace_entry`."""
    module = _parsed(text, name, llvm.create_context(), True)   # no LOCK: the caller has it
    _run_pipeline(module, _own_machine(OPT_LEVEL), level, True)
    if any(f.name == ENTRY for f in module.functions):
        namespace_entry(module)
    return _emit(_own_machine(0 if level == QUICK else OPT_LEVEL), module)


def idle_cores():
    """How many of the cores this process may use, besides the calling thread's, no thread
    runs on right now, by the count of runnable threads in /proc/loadavg (the calling thread
    is one of them); all of them where that is unknown."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return usable - 1
    return max(0, min(usable - 1, (os.cpu_count() or usable) - running))


def compile_objects(modules, level, threads=1):
    """Object code of each of one function's llvmlite.ir `modules`, optimised at `level` (see
    `optimize`) and compiled for the host, on up to `threads` threads at once (a pool, and the
    calling thread, which prints the modules' IR as the others compile): llvmlite's calls that
    take long (parsing, the pass pipeline, instruction selection) run without its lock and
    without the GIL."""
    _initialized()
    workers = min(threads, len(modules)) - 1
    if workers <= 0:
        return [_object(str(m), m.name, level) for m in modules]
    size, pool = _POOL.get(os.getpid(), (0, None))
    if size < workers:
        if pool is not None:
            pool.shutdown(wait=False)
        pool = concurrent.futures.ThreadPoolExecutor(workers, "kiln-llvm")
        _POOL[os.getpid()] = (workers, pool)
    futures = [pool.submit(_object, str(m), m.name, level) for m in modules[1:]]
    first = modules[0]
    return [_object(str(first), first.name, level)] + [future.result() for future in futures]


def assembly(module, machine=None):
    with LOCK:
        return (machine or host_machine()).emit_assembly(module)


def object_code(module, machine=None):
    with LOCK:
        return (machine or host_machine()).emit_object(module)


# ------------------------------------------------------------------------------ the JIT

_ENGINE = []
_DEFINED = set()   # the global symbols of every object loaded into the engine


def _engine():
    if not _ENGINE:
        cpu, features = host_cpu()
        machine = _machine(cpu, features)       # owned by the engine from here on
        _ENGINE.append(llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine))
    return _ENGINE[0]


def entry_symbol(module_name):
    """The name the entry point of module `module_name` has inside the shared engine."""
    return f"{module_name}.{ENTRY}"


class Loaded:
    """A module living in the engine: addresses of its entry point and globals."""
    __slots__ = ("name", "entry")

    def __init__(self, name, entry=True):
        self.name = name
        with LOCK:
            self.entry = _engine().get_function_address(entry_symbol(name)) if entry else 0
        if entry and not self.entry:
            raise RuntimeError(f"kiln: the JIT did not define {entry_symbol(name)}")

    def global_address(self, symbol):
        """Address of an exported global of this module (0 when it has none)."""
        with LOCK:
            return _engine().get_global_value_address(symbol)

    def function_address(self, symbol):
        """Address of an exported function of this module (0 when it has none)."""
        with LOCK:
            return _engine().get_function_address(symbol)


def load_object(name, data, entry=True):
    """Add object code (made by `object_code` from a module prepared with `namespace_entry`,
    or without an entry point for `entry=False`) to the engine; its `Loaded` handle."""
    return load_objects(name, [data], entry)


def load_objects(name, objects, entry=True, what=None):
    """`load_object` for the objects of one function's modules (`compile_objects`), which call
    each other: every one is added before the engine resolves their symbols. Nothing is added
    when one of the symbols they call resolves nowhere: `UnresolvedSymbolError`, naming the
    symbol and `what` is loaded (the module `name` by default)."""
    with LOCK:
        engine = _engine()   # (first: making it makes the process's symbols visible)
        defined = check_resolvable(objects, _DEFINED, what or f"module {name}")
        for data in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        _DEFINED.update(defined)
        return Loaded(name, entry)


def namespace_entry(module):
    """Rename the entry point to `entry_symbol(module.name)` (for object code meant for
    `load_object`)."""
    module.get_function(ENTRY).name = entry_symbol(module.name)
    return module
