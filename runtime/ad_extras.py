"""JAX's smaller differentiation helpers, built on `custom_vjp` and `vjp`:

* `custom_gradient(f)`: `f(*args)` returns `(value, vjp_fn)`; reverse mode uses `vjp_fn`
  (a `custom_vjp` whose backward pass calls `f` again for its `vjp_fn`: the forward values
  it closes over are recomputed, which simplification shares with the forward sweep where it
  can, instead of being stored).
* `linear_transpose(f, *primals)`: the transpose of a linear `f`, which is its pullback at
  any point (kiln takes it at zero).
* `closure_convert(f, *args)`: JAX hoists the traced values `f` closes over into explicit
  arguments so that `custom_vjp` can see them; kiln's `custom_vjp` already captures values a
  function closes over (it specialises source), so there is nothing to hoist: the converted
  function takes no extra constants and the list of constants is empty.

`fwd_and_bwd(fun, argnums, has_aux=False, jitted=True)` gives JAX's pair of functions: `fwd`
returns `fun`'s result and residuals, `bwd(residuals, cotangent)` the cotangents of the
`argnums` arguments. kiln's residuals are the primal arguments themselves (a tuple), and
`bwd` runs the forward pass again inside its own compiled function, as `checkpoint` does;
each of the two compiles once.
"""
from .ad import vjp
from .custom_derivatives import custom_vjp
from .introspection import _stand_in
from .tree_util import tree_flatten, tree_map


def custom_gradient(fun):
    """`fun(*args) -> (value, vjp_fn)`, with `vjp_fn(cotangent)` returning the arguments'
    cotangents (a tuple, or one value for a single argument)."""
    def primal(*args):
        return fun(*args)[0]

    def fwd(*args):
        return fun(*args)[0], args

    def bwd(args, g):
        cts = fun(*args)[1](g)
        return cts if isinstance(cts, tuple) else (cts,)

    wrapped = custom_vjp(primal)
    wrapped.defvjp(fwd, bwd)
    wrapped.__name__ = getattr(fun, "__name__", "custom_gradient")
    return wrapped


def _zeros_like(x):
    from . import numpy as jnp
    return jnp.zeros(x.shape, x.dtype)


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function `fun` at primals shaped like `primals` (arrays or
    `ShapeDtypeStruct`s): `t(cotangent)` is the tuple of the inputs' cotangents."""
    points = tree_map(lambda x: _zeros_like(_stand_in(x)), primals)
    leaves, _ = tree_flatten(points)
    for x in leaves:
        if x.dtype.kind not in "fc":
            raise TypeError(f"linear_transpose only supports [float or complex] -> [float or "
                            f"complex], and integer -> integer functions, but got "
                            f"{x.dtype} input")

    def transposed(out_cotangent):
        _, pullback = vjp(fun, *points)
        return pullback(out_cotangent)
    return transposed


def closure_convert(fun, *example_args):
    """(`converted`, `consts`) with `converted(*args, *consts) == fun(*args)`; for kiln
    `consts` is always empty (see the module docstring)."""
    def converted(*args):
        return fun(*args)
    converted.__name__ = getattr(fun, "__name__", "closure_converted")
    return converted, []


def _with_args(args, argnums, dyn):
    full = list(args)
    for i, x in zip(argnums, dyn):
        full[i] = x
    return full


def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """(fwd, bwd): `fwd(*args)` is `(fun(*args), residuals)` (with `aux` third when
    `has_aux`), `bwd(residuals, cotangent)` the vector-Jacobian product for `argnums`."""
    from .jit import jit
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def fwd(*args):
        out = fun(*args)
        if has_aux:
            return out[0], args, out[1]
        return out, args

    def bwd(residuals, cotangent):
        def differentiated(*dyn):
            out = fun(*_with_args(residuals, nums, dyn))
            return out[0] if has_aux else out
        _, pullback = vjp(differentiated, *[residuals[i] for i in nums])
        grads = pullback(cotangent)
        return grads[0] if isinstance(argnums, int) else grads

    if jitted:
        return jit(fwd), jit(bwd)
    return fwd, bwd

