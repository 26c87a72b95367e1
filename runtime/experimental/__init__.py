"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md), and `io_callback`, a
host callback with effects (docs/differences.md), and `compilation_cache` (its
`set_cache_dir` records JAX's cache directory option), `serialize_executable`
(serializing and loading PJRT executables, docs/pjrt.md) and `hijax` (`VJPHiPrimitive`,
class-based custom derivatives, docs/autodiff.md)."""
from . import compilation_cache, hijax, multihost_utils, serialize_executable
from ..callbacks import io_callback

__all__ = ["compilation_cache", "hijax", "multihost_utils", "serialize_executable",
           "io_callback"]
