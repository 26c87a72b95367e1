"""JAX's smaller differentiation helpers, built on `custom_vjp` and `vjp`:

* `custom_gradient(f)`: `f(*args)` returns `(value, vjp_fn)`; reverse mode uses `vjp_fn`
  (a `custom_vjp` whose backward pass calls `f` again for its `vjp_fn`: the forward values
  it closes over are recomputed, which simplification shares with the forward sweep where it
  can, instead of being stored).
* `linear_transpose(f, *primals)`: the transpose of a linear `f`, which is its pullback at
  any point (kiln takes it at zero).
* `closure_convert(f, *args)`: `(converted, consts)`, JAX's closure conversion. `f` is
  specialised for `args` in a region of the function being specialised, and the traced
  values of float or complex type that it captures there (values of an enclosing `jit`,
  `grad`, `jvp`, `vmap`: through closures, globals, objects) are `consts`, in the order it
  first reads them; `converted(*args, *consts)` is `f(*args)`, and `converted(*args, *values)`
  inside a region (a `custom_vjp` given `values` as arguments, JAX's pattern) computes `f`
  with `values` standing for those constants (`custom_derivatives.alias_closed_over`, as
  odeint's dynamics), so that derivatives reach them through the rule's cotangents. Called
  outside any transformation, nothing is traced and `consts` is empty, as are integer and
  boolean values (JAX hoists only values that may carry a derivative).

`fwd_and_bwd(fun, argnums, has_aux=False, jitted=True)` gives JAX's pair of functions: `fwd`
returns `fun`'s result and residuals, `bwd(residuals, cotangent)` the cotangents of the
`argnums` arguments. kiln's residuals are the primal arguments themselves (a tuple), and
`bwd` runs the forward pass again inside its own compiled function, as `checkpoint` does;
each of the two compiles once.
"""
from .ad import vjp
from .custom_derivatives import custom_vjp, alias_closed_over
from .introspection import _stand_in
from .tree_util import tree_flatten, tree_map, tree_unflatten


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
    """(`converted`, `consts`): the traced values `fun` reads, called on arguments like
    `example_args`, hoisted out as `converted`'s last arguments (module docstring)."""
    from . import staging
    from .compiler.ir.builder import current
    leaves, in_tree = tree_flatten((example_args, {}))
    consts = []
    if current() is not None:
        avals = [staging.leaf_aval(x, f"closure_convert: example argument {i}")[0]
                 for i, x in enumerate(leaves)]
        staged = staging.stage(fun, avals, lambda tracers: tree_unflatten(in_tree, tracers),
                               staging.function_name(fun), api="converted by closure_convert")
        consts = [t for t in staged.extra
                  if t.aval.dtype.kind in "fc" and not t.builder.is_constant(t)]

    def converted(*args_and_consts):
        count = len(args_and_consts) - len(consts)
        args = args_and_consts[:count]
        tree = tree_flatten((args, {}))[1]
        if tree != in_tree:
            raise TypeError(f"The inputs to the closure produced by closure_convert must have "
                            f"the same pytree structure as the example arguments passed when "
                            f"closure_convert was called. Expected {in_tree}, but got {tree}")
        alias_closed_over(consts, args_and_consts[count:])
        return fun(*args)
    converted.__name__ = getattr(fun, "__name__", "closure_converted")
    return converted, consts


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

