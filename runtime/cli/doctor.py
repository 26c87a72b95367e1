"""`kiln doctor`: what kiln finds on this machine, for bug reports and for setting up backends.

`report()` returns the text `kiln doctor` prints: one section per topic (`SECTIONS`: kiln and
its backends, Python versions, LLVM and the host CPU it targets, BLAS, threads, the disk cache,
MPI for several processes, CUDA, the PJRT plug-ins found with their API versions and devices,
TPU chips), one row per probe. It reports only what this build has. A probe is a function
returning the row's value; it raises `Unavailable(reason)` for something absent here (printed
`no: reason`), and any other exception it raises is printed as `error: ...` on its row, so a
broken installation never stops the report.

It is part of the command line (`kiln.cli`), which may import both the runtime and the
compiler; llvmlite is imported only inside the probes that need it.
"""
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
import textwrap

LABEL_WIDTH = 18
_WRAP = 100


class Unavailable(Exception):
    """A probe found that something is not usable here; the message says why."""


def _require(module, install):
    """Import `module`; Unavailable("<module> not installed (<install>)") when it is absent."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        if getattr(e, "name", None) in (top, module):
            raise Unavailable(f"{top} not installed ({install})") from None
        raise Unavailable(f"importing {module} failed: {e}") from None


def _need(module, install, display):
    """`_require`, for the probes after the one that reports `module` itself: their reason is
    short ("needs llvmlite, which is not installed"), the first row says how to install it."""
    try:
        return _require(module, install)
    except Unavailable as e:
        raise Unavailable(f"needs {display}, which is not installed" if "not installed" in
                          str(e) else f"needs {display} ({e})") from None


def format_bytes(n):
    """`1234567` -> `1.2 MiB (1234567 bytes)`; `10` -> `10 bytes`."""
    size, unit = float(n), "bytes"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit} ({n} bytes)"


# ------------------------------------------------------------------------------ kiln, Python

def _kiln_version():
    from .. import __version__, __file__ as kiln_file
    return f"{__version__} ({os.path.dirname(kiln_file)})"


def _backends():
    """The backends `jit(backend=...)` accepts (staging's table): what this build has."""
    from ..staging import BACKENDS
    return ", ".join(sorted(BACKENDS))


def _python():
    return (f"{platform.python_version()} ({platform.python_implementation()}, "
            f"{sys.executable}) on {platform.platform()}")


def _numpy():
    import numpy
    return numpy.__version__


def _scipy():
    return _require("scipy", "pip install scipy").__version__


# ------------------------------------------------------------------------------------- LLVM

_LLVMLITE_INSTALL = "pip install llvmlite; the LLVM backend needs it"


def _binding():
    """llvmlite.binding with the native target initialised (kiln's own initialisation)."""
    _need("llvmlite.binding", _LLVMLITE_INSTALL, "llvmlite")
    from ..compiler.backends.llvm import target
    target.triple()
    return target


def _llvmlite():
    return _require("llvmlite", _LLVMLITE_INSTALL).__version__


def _llvm():
    _binding()
    import llvmlite.binding as llvm
    return ".".join(map(str, llvm.llvm_version_info))


def _triple():
    return _binding().triple()


def _host_cpu():
    return _binding().host_cpu()[0]


def _cpu_features():
    features = _binding().host_cpu()[1].split(",")
    enabled = sorted(f[1:] for f in features if f.startswith("+"))
    return f"{len(enabled)} enabled: " + " ".join(enabled)


# ------------------------------------------------------------------------------------- BLAS

def _kiln_blas():
    _binding()
    from ..compiler.backends.llvm import blas
    library = blas.library()
    found = {name: bool(library.lookup(name)) for name in ("sgemm", "dgemm")}
    routines = ", ".join(f"{name} {'found' if ok else 'MISSING'}" for name, ok in found.items())
    return f"{library.name} ({library.int_bits}-bit integers): {routines}"


def _build_blas(module):
    config = module.show_config(mode="dicts")
    blas = config.get("Build Dependencies", {}).get("blas", {})
    if not blas.get("found", True) or not blas.get("name"):
        raise Unavailable(f"{module.__name__} reports no BLAS")
    detail = blas.get("openblas configuration") or blas.get("version") or ""
    return f"{blas['name']} {blas.get('version', '')}".strip() + (f" ({detail})" if detail else "")


def _numpy_blas():
    import numpy
    return _build_blas(numpy)


def _scipy_blas():
    return _build_blas(_require("scipy", "pip install scipy"))


# ---------------------------------------------------------------------------------- threads

def _threads():
    _binding()
    from ..compiler.backends.llvm import parallel
    count = parallel.num_threads()
    if os.environ.get("KILN_NUM_THREADS", "").strip():
        return f"{count} (KILN_NUM_THREADS)"
    return f"{count} (the cores this process may use; KILN_NUM_THREADS overrides)"


def _blas_threads():
    return ("1 per call (compiled code splits large products into panels that the compiled-loop "
            "threads compute)")


# ---------------------------------------------------------------------------------- devices

def _devices():
    from ..devices import cpu_count_setting, local_device_count
    count, source = local_device_count(), cpu_count_setting()[1]
    return f"{count} CPU device{'s' if count != 1 else ''} ({source}), for pmap and shard_map"


def _processes():
    from ..devices import process_index, process_count
    return f"process {process_index()} of {process_count()}"


# ------------------------------------------------------------------------------- disk cache

def _cache_info():
    _binding()
    from ..compiler.backends.llvm import disk_cache
    return disk_cache.info()


def _cache_path():
    info = _cache_info()
    if not info["enabled"]:
        raise Unavailable(f"disabled (KILN_CACHE_DIR={os.environ.get('KILN_CACHE_DIR')!r})")
    return info["path"]


def _cache_size():
    info = _cache_info()
    if not info["enabled"]:
        raise Unavailable("disabled")
    return f"{info['entries']} entries, {format_bytes(info['bytes'])}"


# ------------------------------------------------------------------------------------- MPI

_MPI_INSTALL = "pip install 'kiln[mpi]'"


def _mpi4py():
    mpi4py = _require("mpi4py", _MPI_INSTALL)
    return f"{mpi4py.__version__} ({os.path.dirname(mpi4py.__file__)})"


def _mpi_library():
    """The MPI library mpi4py loads, asked without starting MPI (MPI_Get_library_version may
    be called before MPI_Init)."""
    mpi4py = _need("mpi4py", _MPI_INSTALL, "mpi4py")
    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.initialize = mpi4py.rc.finalize = False
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as e:
        raise Unavailable(f"mpi4py cannot load an MPI library ({e}); {_MPI_INSTALL} brings Open "
                          f"MPI") from None
    version = MPI.Get_library_version().strip().splitlines()[0].split(",")[0]
    return f"{version} (MPI {'.'.join(map(str, MPI.Get_version()))})"


def _mpirun():
    import shutil
    found = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")
    if found is None:
        raise Unavailable(f"no mpirun beside this Python or on PATH ({_MPI_INSTALL})")
    return found


# ------------------------------------------------------------------------------------ CUDA

def _nvrtc():
    from ..compiler.backends.cuda import nvrtc
    found, what = nvrtc.available()
    if not found:
        raise Unavailable(what)
    return f"{what} (compiles the CUDA backend's kernels: kiln show --stage ptx; docs/cuda.md)"


def _gpu():
    from ..compiler.backends.cuda import launch
    found, what = launch.available()
    if not found:
        raise Unavailable(what)
    return what


# ------------------------------------------------------------------------------------ PJRT

def _pjrt_plugins():
    from ..compiler.backends.pjrt import plugins
    found = plugins.discover()
    if not found:
        raise Unavailable("no plug-in found (pip install 'kiln[pjrt]' for XLA's CPU plug-in, "
                          "or set KILN_PJRT_PLUGIN=/path/to/plugin.so)")
    from ..pjrt import describe
    return "; ".join(describe(f) for f in found)


def _tpu():
    from ..compiler.backends.pjrt import plugins
    chips, path = plugins.tpu_chips(), plugins.libtpu_path()
    if not chips:
        raise Unavailable("no TPU chip on this machine's PCI bus" +
                          (f" (libtpu at {path})" if path else ""))
    return f"{chips} TPU chip{'s' if chips != 1 else ''}; " + \
        (f"libtpu at {path}" if path else "libtpu not installed (pip install libtpu)")


# ---------------------------------------------------------------------------------- report

SECTIONS = [
    ("kiln", [("version", _kiln_version), ("backends", _backends)]),
    ("Python", [("python", _python), ("numpy", _numpy), ("scipy", _scipy)]),
    ("LLVM", [("llvmlite", _llvmlite), ("LLVM", _llvm), ("target triple", _triple),
              ("host CPU", _host_cpu), ("CPU features", _cpu_features)]),
    ("BLAS", [("kiln calls", _kiln_blas), ("numpy built with", _numpy_blas),
              ("scipy built with", _scipy_blas)]),
    ("threads", [("compiled loops", _threads), ("BLAS", _blas_threads)]),
    ("devices", [("devices", _devices), ("processes", _processes)]),
    ("disk cache", [("path", _cache_path), ("size", _cache_size)]),
    ("MPI", [("mpi4py", _mpi4py), ("MPI library", _mpi_library), ("mpirun", _mpirun)]),
    ("CUDA", [("NVRTC", _nvrtc), ("GPU", _gpu)]),
    ("PJRT", [("plug-ins", _pjrt_plugins), ("TPU", _tpu)]),
]


def probe(run):
    """The value `run()` reports, `no: <reason>`, or `error: <exception>`; never raises."""
    try:
        return str(run())
    except Unavailable as e:
        return f"no: {e}"
    except Exception as e:
        return f"error: {type(e).__name__}: {e}"


def _row(label, value):
    lines = textwrap.wrap(value, _WRAP - LABEL_WIDTH - 2, break_on_hyphens=False) or [""]
    pad = " " * (LABEL_WIDTH + 2)
    return f"  {label:<{LABEL_WIDTH}}" + ("\n" + pad).join(lines)


def report(sections=SECTIONS):
    """The text `kiln doctor` prints."""
    blocks = []
    for title, probes in sections:
        blocks.append("\n".join([title] + [_row(label, probe(run)) for label, run in probes]))
    return "\n\n".join(blocks) + "\n"
