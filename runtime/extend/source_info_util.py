"""`kiln.extend.source_info_util`, as far as kiln has JAX's `jax.extend.source_info_util`:
`register_exclusion(path)`, which leaves the frames of files under `path` out of the
tracebacks of user errors, as JAX's does (flax registers its own files). JAX's name stacks and
source-info records annotate jaxpr equations, which kiln does not have."""
from .._traceback import register_exclusion

__all__ = ["register_exclusion"]


def __dir__():
    return sorted(__all__)
