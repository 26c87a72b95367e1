"""Devices: what `kiln.devices()` lists and where `device_put` places data.

On the CPU every array lives in host memory as a NumPy buffer. How many CPU devices
`kiln.devices()` reports (what `pmap` maps over on one machine) is, in order:
`kiln.config.update("jax_num_cpu_devices", n)` (JAX's option), `KILN_NUM_CPU_DEVICES`,
`JAX_NUM_CPU_DEVICES` (the environment variable JAX reads for its option), XLA's
`--xla_force_host_platform_device_count=N` in `XLA_FLAGS`; default 1, as JAX. The count is
fixed when devices are first listed: changing the option afterwards is JAX's RuntimeError.

PJRT plug-ins' devices (`devices("pjrt")`, `devices("tpu")`) are runtime/pjrt.py's; they are
never a default, only listed when asked for.

GPU devices (platform "gpu", `device_kind` the card's name) exist where the CUDA backend's
device layer does (compiler/backends/cuda/device.py: CuPy and a device, or the host emulation
under `KILN_CUDA_EMULATE=1`); there is one, the current CUDA device. Which platforms kiln uses
is JAX's `jax_platforms` option: `kiln.config.update("jax_platforms", "cpu")`, else
`KILN_PLATFORMS`, else `JAX_PLATFORMS` ("cpu", "gpu" or "cuda", or a comma-separated list in
order of priority; unset: the GPU when there is one, then the CPU). `default_backend()` is the
first available platform in that order and `devices()` lists its devices, as JAX's do; a
platform named but unavailable is a RuntimeError saying why. The CPU stays available for
`devices("cpu")` whatever the option says: host arrays, `pmap` and meshes use it (pmap over
GPUs does not exist yet).
"""
import os
import re

import numpy as np

from .compiler.config import config


_REPR = {"cpu": "CpuDevice", "gpu": "CudaDevice"}


class Device:
    __slots__ = ("id", "platform", "device_kind", "process_index", "layer")

    def __init__(self, id, platform="cpu", device_kind="cpu", process_index=0,  # noqa: A002
                 layer=None):
        self.id = id
        self.platform = platform
        self.device_kind = device_kind
        self.process_index = process_index
        self.layer = layer   # a GPU device's layer (cuda/device.py); None on the CPU

    def __repr__(self):
        return f"{_REPR[self.platform]}(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __eq__(self, other):
        return type(other) is Device and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


def _count_from(variable):
    """The device count an environment variable sets, None when it is unset or empty."""
    n = os.environ.get(variable, "").strip()
    if not n:
        return None
    if not n.isdigit() or int(n) < 1:
        raise ValueError(f"{variable}={n!r} must be a whole number of at least 1 (the number "
                         f"of CPU devices); set it to 1 or more, or unset it")
    return int(n)


DEFAULT_COUNT = "the default; KILN_NUM_CPU_DEVICES sets it"


def chosen_cpu_count():
    """The number of CPU devices a setting chose (fixed from then on, as listing the devices
    fixes it), or None when none is set (the default)."""
    if cpu_count_setting()[1] == DEFAULT_COUNT:
        return None
    return _local()


def cpu_count_setting():
    """(the number of CPU devices this process would list, the setting it comes from)."""
    chosen = config.read("num_cpu_devices")
    if chosen is not None:
        return chosen, "kiln.config jax_num_cpu_devices"
    for variable in ("KILN_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES"):
        n = _count_from(variable)
        if n is not None:
            return n, variable
    m = re.search(r"--xla_force_host_platform_device_count=(\S*)", os.environ.get("XLA_FLAGS", ""))
    if m is None:
        return 1, DEFAULT_COUNT
    if not m.group(1).isdigit() or int(m.group(1)) < 1:
        raise ValueError(f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}: "
                         f"--xla_force_host_platform_device_count must be a whole number of at "
                         f"least 1 (the number of CPU devices)")
    return int(m.group(1)), "XLA_FLAGS"


_DEVICES = []   # this process's CPU devices, filled on first use
_ALL = {}       # (process index, process count) -> every process's devices


def _local():
    if not _DEVICES:
        _DEVICES.append(cpu_count_setting()[0])
    return _DEVICES[0]


def _listed():
    """Every process's devices: process p's are ids p*n .. p*n + n - 1 (n devices each, as
    JAX numbers them; every process of a run has the same count)."""
    from .distributed import process_layout
    layout = process_layout()
    listed = _ALL.get(layout)
    if listed is None:
        n, (_, count) = _local(), layout
        listed = _ALL[layout] = [Device(p * n + j, process_index=p)
                                 for p in range(count) for j in range(n)]
    return listed


def _refuse_late_change(value):
    if _DEVICES and value != _DEVICES[0]:
        raise RuntimeError("jax_num_cpu_devices config should be updated before backends are "
                           "initialized i.e. before any JAX operation is executed. You should "
                           "initialize this config immediately after `import kiln` (kiln "
                           f"already lists {_DEVICES[0]} CPU devices).")


config.guard("num_cpu_devices", _refuse_late_change)


_PLATFORM_NAMES = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu", "pjrt": "pjrt", "tpu": "tpu"}


def _platform(name, where):
    key = _PLATFORM_NAMES.get(str(name).strip().lower())
    if key is None:
        raise RuntimeError(f"Unknown backend {name!r} in {where}; known: cpu, gpu, cuda, pjrt, tpu")
    return key


def _chosen_platforms():
    """The platforms the option names, in order, or None (all, the GPU first)."""
    text = config.read("platforms") or os.environ.get("KILN_PLATFORMS") or \
        os.environ.get("JAX_PLATFORMS") or ""
    names = [n for n in text.split(",") if n.strip()]
    return [_platform(n, "jax_platforms") for n in names] or None


def gpu_devices():
    """The GPU devices (at most one today), or ([], why not)."""
    from .compiler.backends.cuda import device as cuda
    try:
        layer = cuda.current()
    except cuda.DeviceUnavailableError as e:
        return [], e.bare_message
    return [gpu_device(layer)], None


def gpu_device(layer):
    """The GPU Device of a device layer (cuda/device.py)."""
    return Device(0, "gpu", layer.device_kind, process_index(), layer)


def _backends():
    """The platforms in use, in priority order (see the module docstring)."""
    chosen = _chosen_platforms()
    if chosen is None:
        return (["gpu"] if gpu_devices()[0] else []) + ["cpu"]
    return chosen


def devices(backend=None):
    """The devices of `backend` ("cpu", "gpu" or "cuda", "pjrt" or "tpu" (runtime/pjrt.py);
    default: `default_backend()`)."""
    name = default_backend() if backend is None else _platform(backend, "devices()")
    if name in ("pjrt", "tpu"):
        from . import pjrt
        return pjrt.devices(name)
    if name == "gpu":
        listed, why = gpu_devices()
        if not listed:
            raise RuntimeError(f"Unable to initialize backend 'gpu': {why}")
        return listed
    return list(_listed())


def local_devices(process_index=None, backend=None):
    """Process `process_index`'s devices (default: this process's)."""
    process_index = globals()["process_index"]() if process_index is None else process_index
    return [d for d in devices(backend) if d.process_index == process_index]


def device_count(backend=None):
    return len(devices(backend))


def local_device_count(backend=None):
    return len(local_devices(backend=backend))


def default_backend():
    return _backends()[0]


def process_index():
    from .distributed import process_layout
    return process_layout()[0]


def process_count():
    from .distributed import process_layout
    return process_layout()[1]


def process_indices(backend=None):
    return list(range(process_count()))


def _renamed(old, new):
    def alias(backend=None):
        import warnings
        warnings.warn(f"kiln.{old} has been renamed to kiln.{new.__name__}. This alias will "
                      f"eventually be removed; please update your code.", UserWarning,
                      stacklevel=2)
        return new(backend) if new is process_indices else new()
    alias.__name__ = old
    alias.__doc__ = f"JAX's older name of `{new.__name__}` (warns, as JAX does)."
    return alias


host_id = _renamed("host_id", process_index)
host_count = _renamed("host_count", process_count)
host_ids = _renamed("host_ids", process_indices)


def block_until_ready(x):
    """Wait for every array in a pytree (CPU execution is synchronous); returns `x`."""
    from .tree_util import tree_leaves
    for leaf in tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x
