"""`kiln.api_util`, as far as kiln has JAX's `jax.api_util`: `shaped_abstractify` (the
abstract value of a value) and `safe_map` (a `map` over sequences of one length). JAX's
other helpers there work on its traced function wrappers, which kiln does not have."""
from .compiler.ir.abstract import ShapedArray

__all__ = ["shaped_abstractify", "safe_map"]


def shaped_abstractify(x):
    """The ShapedArray of `x` (an array, a scalar, a traced value or a ShapeDtypeStruct)."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__array__"):
        return ShapedArray(x.shape, x.dtype, getattr(x, "weak_type", False))
    from .custom_derivatives import value_aval
    return value_aval(x)


def safe_map(f, *args):
    """`list(map(f, *args))`, with a ValueError when the sequences differ in length."""
    args = [list(a) for a in args]
    n = len(args[0])
    for i, a in enumerate(args[1:], 2):
        if len(a) != n:
            raise ValueError(f"safe_map() argument {i} is "
                             f"{'shorter' if len(a) < n else 'longer'} than argument 1")
    return list(map(f, *args))


def __dir__():
    return sorted(__all__)
