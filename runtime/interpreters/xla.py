"""`kiln.interpreters.xla`: `apply_primitive`, as JAX's `jax.interpreters.xla` has it."""
import functools

__all__ = ["apply_primitive"]


def _bind(prim, params, *args):
    return prim.bind(*args, **params)


def apply_primitive(prim, *args, **params):
    """`prim` applied to `args` compiled, as `jit` compiles it (JAX's implementation of a
    primitive defined by its lowering: `p.def_impl(partial(xla.apply_primitive, p))`)."""
    from ..jit import jit
    return jit(functools.partial(_bind, prim, params))(*args)


def __dir__():
    return sorted(__all__)
