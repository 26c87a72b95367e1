"""JAX's configuration context managers and process-wide helpers at the top level:
`kiln.enable_x64(True)`, `kiln.debug_nans(True)`, ... are `with` blocks (or read `.value`)
over `kiln.config`'s options (compiler/config.py says what each one does in kiln; the
options are process-wide, not per thread as JAX's contexts are). Two options exist only as
contexts, accepting just the value kiln implements: `threefry_partitionable` (kiln's PRNG is
always JAX's partitionable threefry), `default_prng_impl` ("threefry2x32"),
`numpy_dtype_promotion` ("standard"; JAX's "strict" is not implemented),
`enable_custom_prng` and `softmax_custom_jvp` (False: kiln has no custom PRNGs, and
differentiates `nn.softmax` through its source, as JAX's default does). `debug_key_reuse`
switches on kiln.random's key-reuse checker (runtime/_key_reuse.py).
`no_tracing`, `no_execution`, `thread_guard` and `array_garbage_collection_guard` are checked
where runtime/execution_guards.py says; `allow_f16_reductions` (on by default) is read by
`kiln.lax.reduce_sum`; `jax2tf_associative_scan_reductions` chooses between two lowerings of
JAX's TensorFlow exporter, which kiln does not have: it is accepted and has no effect.
`make_user_context` is runtime/user_context.py; `memory.Space` is JAX's enum of memory spaces
(kiln keeps one memory per device: `new_ref` accepts a space and records it).
`effects_barrier()` returns at once: compiled calls run their effects before they return.
`live_arrays()` lists the kiln arrays alive in the process.

`clear_caches()` empties every specialisation cache (jit, grad, vmap, pmap, shard_map);
`print_environment_info()` prints the versions and devices kiln runs with."""
import contextlib
import enum
import platform
import sys
import types

import numpy as np

from .compiler.config import config
from . import execution_guards  # noqa: F401  (installs the options' listener)
from .user_context import make_user_context  # noqa: F401


class Option:
    """`kiln.<name>`: `with kiln.<name>(value): ...` sets the option inside the block."""

    def __init__(self, name, fixed=None):
        self.name = name
        self._fixed = fixed   # the only value kiln accepts, for an option kept nowhere else

    @property
    def value(self):
        return self._fixed if self._fixed is not None else config.read(self.name)

    @contextlib.contextmanager
    def __call__(self, new_val=True):
        if self._fixed is not None:
            if new_val != self._fixed:
                raise ValueError(f"kiln.{self.name}({new_val!r}): kiln implements only "
                                 f"{self._fixed!r}")
            yield
            return
        old = config.read(self.name)
        config.update(self.name, new_val)
        try:
            yield
        finally:
            config.update(self.name, old)

    def __repr__(self):
        return f"<kiln option {self.name}={self.value!r}>"


enable_x64 = Option("enable_x64")
debug_nans = Option("debug_nans")
debug_infs = Option("debug_infs")
log_compiles = Option("log_compiles")
explain_cache_misses = Option("explain_cache_misses")
check_tracer_leaks = Option("check_tracer_leaks")
enable_checks = Option("enable_checks")
default_matmul_precision = Option("default_matmul_precision")
threefry_partitionable = Option("threefry_partitionable", fixed=True)
default_prng_impl = Option("default_prng_impl", fixed="threefry2x32")
(no_tracing, no_execution, thread_guard, allow_f16_reductions, jax2tf_associative_scan_reductions,
 array_garbage_collection_guard, debug_key_reuse) = (Option(name) for name in (
     "no_tracing", "no_execution", "thread_guard", "allow_f16_reductions",
     "jax2tf_associative_scan_reductions", "array_garbage_collection_guard",
     "debug_key_reuse"))
# options with a set of values (compiler/config.py's `_choices`)
(numpy_rank_promotion, legacy_prng_key, transfer_guard, transfer_guard_host_to_device,
 transfer_guard_device_to_host, transfer_guard_device_to_device) = (
    Option(name) for name in (
        "numpy_rank_promotion", "legacy_prng_key", "transfer_guard",
        "transfer_guard_host_to_device", "transfer_guard_device_to_host",
        "transfer_guard_device_to_device"))
# options of which kiln implements one value
numpy_dtype_promotion, enable_custom_prng, softmax_custom_jvp = (
    Option(name, fixed=value) for name, value in (
        ("numpy_dtype_promotion", "standard"), ("enable_custom_prng", False),
        ("softmax_custom_jvp", False)))


class MemorySpace(enum.Enum):
    """JAX's memory spaces (`kiln.memory.Space`)."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self):
        return f"MemorySpace.{self.name}"


memory = types.SimpleNamespace(Space=MemorySpace)


def effects_barrier():
    """Wait until every effect (prints, callbacks) of calls made so far has run: kiln runs
    them before a call returns, so there is nothing to wait for."""
    return None


def live_arrays(platform=None):
    """The kiln arrays alive in this process (found through the garbage collector's list of
    objects, so it costs nothing until called), optionally those of one platform."""
    import gc
    from .array import Array
    found = [a for a in gc.get_objects() if type(a) is Array]
    if platform is not None:
        found = [a for a in found if a.devices() and
                 next(iter(a.devices())).platform == platform]
    return found


def checking_leaks():
    """`with kiln.checking_leaks(): ...`: `check_tracer_leaks(True)`."""
    return check_tracer_leaks(True)


def clear_caches():
    """Drop every specialisation kiln holds in memory (the next call specialises and compiles
    again); the on-disk object-code cache is kept."""
    from . import staging, ad, dispatch
    for cache in list(staging.ALL_CACHES):
        cache.clear()
    ad._CACHE.clear()
    dispatch._aval_cache.clear()
    dispatch._binary_cache.clear()


def print_environment_info(return_string=False):
    """Print (or return) kiln's, Python's, NumPy's and the platform's versions and the
    devices kiln sees."""
    from . import __version__, devices
    lines = [f"kiln:    {__version__}", f"numpy:   {np.__version__}",
             f"python:  {sys.version.splitlines()[0]}",
             f"platform: {platform.platform()}",
             f"devices: {', '.join(str(d) for d in devices())}"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None
