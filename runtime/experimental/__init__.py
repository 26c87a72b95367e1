"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md), and `io_callback`, a
host callback with effects (docs/differences.md), and `compilation_cache` (its
`set_cache_dir` records JAX's cache directory option)."""
from . import compilation_cache, multihost_utils
from ..callbacks import io_callback

__all__ = ["compilation_cache", "multihost_utils", "io_callback"]
