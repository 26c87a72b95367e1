"""Finding and loading PJRT plug-ins.

`discover()` lists the plug-ins installed here, in this order: the one `KILN_PJRT_PLUGIN`
names (a path to a shared library), the `xla-cpu-pjrt` wheel (xla_plugins/xla_cpu_pjrt/
xla_cpu_pjrt.so), JAX's CUDA plug-ins (the jax-cuda12-pjrt / jax-cuda13-pjrt wheels:
jax_plugins/xla_cuda*/xla_cuda_plugin.so), and libtpu (`TPU_LIBRARY_PATH`, else the `libtpu`
wheel's libtpu/libtpu.so). Each is a `Found(name, path)`; nothing is loaded to list them.

`load(path)` loads a plug-in once per process (by its real path; a plug-in is never unloaded):
it checks that the file exists, opens it, calls its `GetPjrtApi()`, checks the version
(api.check_version) and calls `PJRT_Plugin_Initialize`. A missing file, a library that cannot
be opened, or one without `GetPjrtApi` (not a PJRT plug-in) is a PjrtError before any call
into it.

`tpu_chips()` counts the TPU chips on the PCI bus (Google's vendor id 0x1ae0 under
/sys/bus/pci/devices), as JAX does before it loads libtpu. `prepare_libtpu()` sets
`TPU_SKIP_MDS_QUERY=1` where there is no chip, so that libtpu does not wait on the Cloud TPU
metadata server; `kiln.devices("tpu")` refuses before loading libtpu when there is no chip.

`prepare_xla_flags()` adds `--xla_cpu_enable_fast_min_max=false` to `XLA_FLAGS` (unless the
user's flags name that option) before a plug-in is opened: the xla-cpu-pjrt plug-in's XLA
otherwise lets fused `maximum`/`minimum` drop NaN (so `clip(nan)` inside a fusion became a
bound), where JAX's and the reference's propagate it. XLA reads `XLA_FLAGS` when it first
compiles, so a plug-in that has compiled already keeps its flags.
"""
import ctypes
import glob
import importlib.util
import os
import threading
from typing import NamedTuple

from . import api

PLUGIN_VARIABLE = "KILN_PJRT_PLUGIN"
_GOOGLE_PCI_VENDOR = "0x1ae0"


class Found(NamedTuple):
    name: str   # "xla-cpu-pjrt", "jax-cuda12-pjrt", "libtpu", or "KILN_PJRT_PLUGIN"
    path: str


def _package_dir(module):
    """The directory of an installed package, without importing it; None when absent."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _in_package(module, pattern):
    where = _package_dir(module)
    return sorted(glob.glob(os.path.join(where, pattern))) if where else []


def _cuda_plugins():
    out = []
    for where in _in_package("jax_plugins", "xla_cuda*"):
        for path in sorted(glob.glob(os.path.join(where, "xla_cuda_plugin.so"))):
            out.append(Found("jax-" + os.path.basename(where).replace("xla_", "") + "-pjrt", path))
    return out


def libtpu_path():
    """libtpu's path: `TPU_LIBRARY_PATH` when it names a file, else the libtpu wheel's."""
    named = os.environ.get("TPU_LIBRARY_PATH")
    if named and os.path.isfile(named):
        return named
    found = _in_package("libtpu", "libtpu.so")
    return found[0] if found else None


def discover():
    """The plug-ins installed here (see the module docstring), in order of preference."""
    found = []
    named = os.environ.get(PLUGIN_VARIABLE, "").strip()
    if named:
        found.append(Found(PLUGIN_VARIABLE, named))
    found += [Found("xla-cpu-pjrt", p) for p in _in_package("xla_plugins.xla_cpu_pjrt",
                                                            "xla_cpu_pjrt.so")]
    found += _cuda_plugins()
    tpu = libtpu_path()
    if tpu:
        found.append(Found("libtpu", tpu))
    return found


def tpu_chips():
    """The number of TPU chips on this machine's PCI bus."""
    count = 0
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor) as f:
                count += f.read().strip() == _GOOGLE_PCI_VENDOR
        except OSError:
            continue
    return count


def prepare_libtpu():
    """The environment libtpu reads before it starts: without a chip, skip the metadata
    server query (what JAX sets too); a value the user set is kept."""
    if tpu_chips() == 0:
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")


_FAST_MIN_MAX = "--xla_cpu_enable_fast_min_max"


def prepare_xla_flags():
    """XLA_FLAGS with NaN-propagating min/max (module docstring); the user's choice is kept."""
    flags = os.environ.get("XLA_FLAGS", "")
    if _FAST_MIN_MAX not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_FAST_MIN_MAX}=false".strip()


_LOADED = {}
_LOCK = threading.Lock()


def load(path):
    """The initialised `api.Api` of the plug-in at `path` (loaded once per process)."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise api.PjrtError(f"no PJRT plug-in at {path!r}: the file does not exist",
                            "NOT_FOUND", hint=f"set {PLUGIN_VARIABLE} to the path of a plug-in "
                            f"(a .so with GetPjrtApi), or pip install 'kiln[pjrt]' for the "
                            f"XLA CPU plug-in")
    real = os.path.realpath(path)
    with _LOCK:
        loaded = _LOADED.get(real)
        if loaded is None:
            loaded = _LOADED[real] = _open(real)
    return loaded


def _open(path):
    prepare_xla_flags()
    if os.path.basename(path).startswith("libtpu"):
        prepare_libtpu()
    try:
        library = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError as e:
        raise api.PjrtError(f"cannot load {path}: {e}", "INVALID_ARGUMENT") from None
    try:
        get_api = library.GetPjrtApi
    except AttributeError:
        raise api.PjrtError(f"{path} is not a PJRT plug-in: it has no GetPjrtApi function",
                            "INVALID_ARGUMENT", hint="point KILN_PJRT_PLUGIN at a PJRT C API "
                            "plug-in (xla_cpu_pjrt.so, xla_cuda_plugin.so, libtpu.so)") from None
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = []
    pointer = get_api()
    if not pointer:
        raise api.PjrtError(f"{path}: GetPjrtApi() returned NULL", "INTERNAL")
    table = api.Api(pointer, path, library)
    table.call("Plugin_Initialize", api.args(api.PluginInitialize))
    return table
