"""`kiln.experimental.compilation_cache`: JAX's module of the persistent compilation cache,
for programs that set its directory the old way (`compilation_cache.set_cache_dir`)."""
from . import compilation_cache

__all__ = ["compilation_cache"]
