"""Native code for an ahead-of-time library: object files from fused SSA, the runtime library,
the target description and the BLAS the code was compiled against.

The LLVM backend's code generator builds each function's module exactly as for the JIT
(`executable.build_module`, the same storage plan and workspace size); here it is optimised at
O3 for `Machine` (`--cpu native`: the host CPU with every feature it reports, position-independent;
`--cpu generic`: the portable x86-64-v2 level) and emitted as object code, with its entry point
renamed to `<module>.kiln_main` (`target.namespace_entry`). So that several modules link into
one shared library without clashes and export nothing but the glue's functions, every
definition is made hidden, and any definition outside the module's namespace (`<module>.`)
internal. The extern globals (`<module>.kiln_sgemm`, ...: externs.py) stay defined in the
object and are bound by the C glue (glue.py).

`runtime_object(machine)` is the runtime library's thread pool (pool.py: `kiln_run_tasks`,
`kiln_barrier_wait`, `kiln_parallel_for`), the packed matrix-product kernels (gemm_packed.py:
`kiln_gemm_float32`, `kiln_gemm_float64`), the FFT kernels (fft_kernel.py:
`kiln_fft_complex64`, `kiln_fft_complex128`) and the
compiler-rt builtins the functions' code may call (builtins.py: float16 conversions), emitted
into a module of its own and compiled with the same machine; the builtins stay hidden
definitions, so the library resolves its own calls to them and exports none. Its object code
(and `mpi_object`'s) is kept in the LLVM backend's disk cache, keyed by the IR and the machine.

llvmlite is imported here: only the compile side of ahead-of-time compilation uses this module.
"""
import ctypes
import os
import platform
from typing import NamedTuple

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..backends.llvm import (blas, blas_lookup, builtins, disk_cache, externs, fft_kernel,
                             gemm_packed, pool, rtlib, target)
from ..backends.llvm.executable import build_module

CPU_MODES = ("native", "generic")
GENERIC_LEVEL = "x86-64-v2"

# LLVM's names of the x86 features that matter to generated code -> their /proc/cpuinfo flag.
_CPUINFO_FLAGS = {
    "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1",
    "sse4.2": "sse4_2", "popcnt": "popcnt", "cx16": "cx16", "avx": "avx", "avx2": "avx2",
    "fma": "fma", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2", "lzcnt": "abm",
    "movbe": "movbe", "adx": "adx", "aes": "aes", "pclmul": "pclmulqdq", "sha": "sha_ni",
    "gfni": "gfni", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "avxvnni": "avx_vnni",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512cd": "avx512cd",
    "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
}
# The features the x86-64-v2 level implies, as /proc/cpuinfo spells them.
_GENERIC_FLAGS = ["sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16"]
RUNTIME_SYMBOLS = frozenset(rtlib.FUNCTIONS.values())   # defined by kiln_runtime.o


class Machine(NamedTuple):
    mode: str       # "native" or "generic"
    machine: object  # llvmlite TargetMachine
    cpu: str
    features: list  # /proc/cpuinfo flags the code requires
    llvm_features: str


def machine(mode):
    """The Machine of `--cpu mode` ("native" or "generic")."""
    if mode == "native":
        cpu, features = target.host_cpu()
        enabled = [f[1:] for f in features.split(",") if f.startswith("+")]
        flags = sorted({_CPUINFO_FLAGS[f] for f in enabled if f in _CPUINFO_FLAGS})
        return Machine(mode, target.host_pic_machine(), cpu, flags, features)
    level = GENERIC_LEVEL if _is_x86_64() else "generic"
    flags = _GENERIC_FLAGS if _is_x86_64() else []
    return Machine(mode, target.generic_machine(level), level, list(flags), "")


def _is_x86_64():
    return target.triple().split("-")[0] in ("x86_64", "amd64")


class NativeFunction(NamedTuple):
    module: str       # the LLVM module's name (the namespace of its symbols)
    entry: str        # the entry point's symbol
    workspace: int    # bytes
    externs: list     # names (externs.EXTERNS) of the extern globals the module defines
    ll: str           # optimised LLVM IR
    asm: str
    obj: bytes


def compile_function(fn, mach):
    """NativeFunction of the fused SSA Function `fn` for Machine `mach`."""
    module, plan = build_module(fn)
    name = module.name
    with target.LOCK:
        optimized = target.optimize(str(module), name, machine=mach.machine)
        target.namespace_entry(optimized)
        _localise(optimized, name)
        defined = _defined_externs(optimized, name)
        return NativeFunction(name, target.entry_symbol(name), plan.workspace, defined,
                              str(optimized), target.assembly(optimized, mach.machine),
                              target.object_code(optimized, mach.machine))


def runtime_object(mach):
    """(module name, extern names, object code) of the runtime library for `mach`, read from
    the disk cache when an earlier build for the same machine left it there (its LLVM O3
    compile is most of a small library's build time)."""
    module = ir.Module(name=rtlib.NAME)
    module.triple = target.triple()
    pool.emit(module, module.triple)
    gemm_packed.emit(module)
    fft_kernel.emit(module)
    builtins.emit(module)

    def compile_():
        optimized = target.optimize(str(module), rtlib.NAME, machine=mach.machine)
        _localise(optimized, rtlib.NAME, keep={*rtlib.FUNCTIONS.values(), *builtins.NAMES})
        return _defined_externs(optimized, rtlib.NAME), target.object_code(optimized,
                                                                           mach.machine)
    return (rtlib.NAME, *_cached(rtlib.NAME, str(module), mach, compile_))


def mpi_object(mach, handle_size):
    """Object code of the MPI engine's library (kiln.mpi: mpi_engine.py) for `mach` and MPI
    handles of `handle_size` bytes, its LIBRARY_SYMBOLS hidden: the library's functions
    that call collectives across processes reach it through their kiln_mpi_* externs, and
    the glue's `<NAME>_mpi_setup` fills its state. Cached on disk as `runtime_object`."""
    from ..backends import mpi_engine
    name = f"kiln.mpi{handle_size}"
    source = mpi_engine.library_ir(name, handle_size)

    def compile_():
        optimized = target.optimize(source, name, machine=mach.machine)
        _localise(optimized, name, keep=set(mpi_engine.LIBRARY_SYMBOLS))
        return [], target.object_code(optimized, mach.machine)
    return _cached(name, source, mach, compile_)[1]


def _cached(name, source, mach, compile_):
    """(extern names, object code) of the LLVM IR `source` on `mach`: `compile_()`'s, or the
    LLVM backend's disk cache's (disk_cache.py: `KILN_CACHE_DIR`). The key covers the IR, the
    machine and this module's own source (the hiding above), as the backend's modules are in
    the cache's fingerprint; an entry that is not an object file is dropped and rebuilt."""
    status = os.stat(__file__)
    key = disk_cache.key(f"aot {name}", source, target.triple(), mach.mode, mach.cpu,
                         mach.llvm_features, f"{status.st_size} {status.st_mtime_ns}")

    def payload():
        with target.LOCK:
            names, code = compile_()
        return "\n".join(names).encode() + b"\0" + code
    names, _, code = rtlib.cached_object(key, payload,
                                         lambda data: data.partition(b"\0")[2]).partition(b"\0")
    return (names.decode().split("\n") if names else []), code


def _localise(module, namespace, keep=frozenset()):
    """Hide every definition of `module`; make those outside `namespace.` (and not in
    `keep`) internal."""
    prefix = namespace + "."
    for value in (*module.functions, *module.global_variables):
        if value.is_declaration or value.linkage in (llvm.Linkage.internal,
                                                     llvm.Linkage.private):
            continue
        if value.name.startswith(prefix) or value.name in keep:
            value.visibility = "hidden"
        else:
            value.linkage = "internal"


def _defined_externs(module, namespace):
    names = {g.name for g in module.global_variables if not g.is_declaration}
    return [name for name in externs.EXTERNS if externs.symbol(namespace, name) in names]


def blas_info():
    """The BLAS generated code is compiled against: name, the shared library's path, its
    integer width and each routine's symbol there (and OpenBLAS's thread setter's, which the
    glue calls to run it on one thread) (path None when the routines are not
    exported symbols of a shared library, e.g. SciPy's cython_blas capsules)."""
    library = blas.library()
    path, symbols = None, {}
    for routine in (*blas_lookup.ROUTINES, blas_lookup.THREAD_SETTER):
        found = library.lookup(routine)
        where = _dladdr(found) if found else None
        if where is None or where[1] is None:
            continue
        path = path or where[0]
        if where[0] == path:
            symbols[routine] = where[1]
    return {"name": library.name, "path": path, "int_bits": library.int_bits,
            "symbols": symbols}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _dladdr(address):
    """(shared library path, exported symbol name or None) holding `address`, or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        return None
    info = _DlInfo()
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    symbol = info.dli_sname.decode() if info.dli_sname and info.dli_saddr == address else None
    return os.path.realpath(info.dli_fname.decode()), symbol


def versions():
    """LLVM's version (the one llvmlite links) and the host triple and architecture."""
    return {"llvm": ".".join(map(str, llvm.llvm_version_info)), "triple": target.triple(),
            "machine": platform.machine()}
