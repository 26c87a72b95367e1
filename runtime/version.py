"""`kiln.version`: the version kiln reports where code reads `jax.version.__version__`
(`kiln.__version__`; `_version` is the same string, as JAX's module has both)."""
from .compiler import __version__

_version = __version__

__all__ = []
