"""`kiln.experimental.pjit`: JAX's deprecated `pjit`, which is `kiln.jit` with the same
arguments (in_shardings, out_shardings, static and donated arguments, ...); reading the name
warns as JAX 0.10.2's module does."""
from ._deprecated import deprecated_names

__all__ = []


def _jit():
    from ..jit import jit
    return jit


__getattr__ = deprecated_names(__name__, {"pjit": (
    "jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` instead.", _jit)})
