"""`kiln.default_device`: JAX's option naming the device that uncommitted data and computations
use.

`kiln.config.update("jax_default_device", d)` sets it for the process; `with
kiln.default_device(d):` for the block, in this thread only (JAX's configuration context
managers are thread-local too); `kiln.default_device.value` reads the setting in force. `d` is a
Device, a platform name ("cpu", "gpu"/"cuda": that platform's first device) or None (the
default backend's first device), else JAX's ValueError.

What it changes in kiln (docs/pmap.md, "Devices"):
- `device_put(x)` without a device and `jnp.array`/`jnp.asarray` put their result on it: onto
  the GPU for a GPU device; a CPU device is what the array then reports (`.devices()`).
- A host array that was never placed reports it as its device (else CPU device 0).
- With a GPU as the default device, eager operations run on the GPU (their host operands are
  copied there, as beside a GPU array) and `jit` without `backend=` runs there, as it does when
  an argument is on the GPU. With a PJRT device as the default device, `jit` without
  `backend=` runs with backend="pjrt" on that device (`jit_backend`).
pmap, shard_map and sharded jit place their results themselves, as in JAX.
"""
import threading
from contextlib import contextmanager

from .compiler.config import config
from .devices import Device, devices

_LOCAL = threading.local()   # .stack: this thread's `with default_device(...)` values, innermost last
IN_FORCE = [False]          # True once any default device was set: the fast path's one check


def _check(value):
    if value is not None and not isinstance(value, (Device, str)):
        raise ValueError(f"jax.default_device must be passed either a Device object (e.g. "
                         f"`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or "
                         f"'gpu', got: {value!r}")
    if isinstance(value, str):
        devices(value)   # an unknown or unavailable platform is devices()'s RuntimeError
    if value is not None:
        IN_FORCE[0] = True


config.guard("default_device", _check)


class _DefaultDevice:
    """`kiln.default_device`: call it with a device (or platform name) for a context manager."""

    @property
    def value(self):
        stack = getattr(_LOCAL, "stack", None)
        return stack[-1] if stack else config.read("default_device")

    @contextmanager
    def __call__(self, device):
        _check(device)
        stack = _LOCAL.__dict__.setdefault("stack", [])
        stack.append(device)
        try:
            yield
        finally:
            stack.pop()

    def __repr__(self):
        return f"kiln.default_device (now {self.value!r})"


default_device = _DefaultDevice()


def current():
    """The Device the setting in force names, or None when nothing is set."""
    if not IN_FORCE[0]:
        return None
    value = default_device.value
    return devices(value)[0] if isinstance(value, str) else value


def jit_backend():
    """The backend `jit` without `backend=` runs with under the default device in force: "cuda"
    for a GPU, "pjrt" for a PJRT device (its layer's `backend`), else None (cheap when none
    was ever set)."""
    if not IN_FORCE[0]:
        return None
    device = current()
    if device is None:
        return None
    return "cuda" if device.platform == "gpu" else getattr(device.layer, "backend", None)


def on_gpu():
    """Whether the default device in force is a GPU (cheap when none was ever set)."""
    if not IN_FORCE[0]:
        return False
    device = current()
    return device is not None and device.platform == "gpu"
