"""`kiln.version`: the version kiln reports where code reads `jax.version.__version__`
(`kiln.__version__`; `_version` is the same string, as JAX's module has both), and
`__version_info__`, the version of JAX whose API kiln mirrors, as a tuple: libraries choose
their code paths for a JAX version by comparing it (flax's `jax.__version_info__ <= (0, 4, 33)`),
and kiln answers what JAX 0.10.2 would."""
from .compiler import __version__

_version = __version__
__version_info__ = (0, 10, 2)

__all__ = []
