"""`kiln.version`: the version kiln reports where code reads `jax.version.__version__`
(`kiln.__version__`; `_version` is the same string, as JAX's module has both), and
`__version_info__`, the JAX release whose API kiln follows, (0, 10, 2): libraries written for
JAX compare `jax.__version_info__` with a release to choose between JAX's older and newer
APIs (equinox, flax), and under `KILN_AS_JAX=1` must choose JAX 0.10.2's."""
from .compiler import __version__

_version = __version__
__version_info__ = (0, 10, 2)

__all__ = []
