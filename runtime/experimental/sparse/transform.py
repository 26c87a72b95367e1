"""`sparsify(f)`: run a function written for dense arrays on sparse (`BCOO`) inputs, and the
sparse-aware `grad` / `value_and_grad`.

`sparsify(f)(*args)` stages `f` for the dense shapes and dtypes of its arguments (a `BCOO`
stands for a dense array of its shape), which gives kiln's SSA form of `f`, and then runs that
SSA one primitive at a time: a primitive with only dense operands binds as usual (eagerly, or
into the enclosing `kiln.jit`), one with a sparse operand runs its sparse rule, which keeps the
result sparse where JAX's does. A primitive without a sparse rule is a `NotImplementedError`
naming it, as in JAX. Rules: `neg`, `convert_element_type`, `copy`, `real`, `imag` and the
elementwise functions that map 0 to 0 (`sin`, `tanh`, `abs`, `sqrt`, `expm1`, `log1p`, ...)
act on the stored values; `mul` and `div` by a dense array or scalar; `mul` of two sparse
arrays; `add` / `sub` of sparse arrays of one shape and layout (the stored elements
concatenate); `add` of a sparse and a dense array (dense result); `dot_general` with one dense
operand (dense result); `reduce_sum`, `transpose`, `reshape`, `broadcast_in_dim`,
`integer_pow` with a positive exponent.
"""
from ... import numpy as jnp
from ...dispatch import bind as _bind
from ...introspection import ShapeDtypeStruct, stage_abstractly
from ...compiler.ir.ssa import Literal
from ...tree_util import tree_flatten, tree_unflatten
from . import bcoo as _bcoo
from .bcoo import BCOO

__all__ = ["sparsify", "grad", "value_and_grad"]

# Elementwise functions with f(0) == 0: applied to the stored values. The linear ones can act
# on duplicate indices as they are; the others need each index once (sum_duplicates first).
_LINEAR_UNARY = frozenset(["neg", "copy", "real", "imag", "convert_element_type"])
_ZERO_PRESERVING_UNARY = frozenset([
    "sin", "tan", "tanh", "abs", "sign", "sqrt", "cbrt", "expm1", "log1p", "asin", "atan",
    "sinh", "asinh", "atanh", "erf", "erf_inv", "round", "floor", "ceil"])
# Elementwise functions with f(0) != 0: their result is dense, which sparsify refuses.
_DENSE_OUTPUT_UNARY = frozenset([
    "cos", "cosh", "acos", "acosh", "exp", "exp2", "log", "logistic", "erfc", "rsqrt",
    "is_finite", "not", "lgamma", "digamma"])


def _is_sparse(x):
    return isinstance(x, BCOO)


def _unary(name, mat, params, prim):
    if name not in _LINEAR_UNARY and not mat.unique_indices:
        mat = mat.sum_duplicates(nse=mat.nse, remove_zeros=False)
    return _bcoo._with_data(mat, _bind(prim, mat.data, **params))


def _mul(a, b):
    if _is_sparse(a) and _is_sparse(b):
        return _bcoo.bcoo_multiply_sparse(a, b)
    mat, other = (a, b) if _is_sparse(a) else (b, a)
    return _bcoo._with_data(mat, _bcoo.bcoo_multiply_dense(mat, other))


def _add(a, b, sign, same_indices):
    if _is_sparse(a):
        return _bcoo._add(a, b, sign, same_indices)
    if sign < 0:
        raise NotImplementedError("Subtraction between sparse and dense array.")
    return _bcoo._add(b, a, 1)


def _div(a, b):
    if _is_sparse(b):
        raise NotImplementedError("sparse rule for div with a sparse divisor is not "
                                  "implemented: it would divide by the implicit zeros.")
    return _bcoo._with_data(a, _bcoo.bcoo_multiply_dense(a, 1 / b))


def _reduce_sum(mat, axes):
    out = _bcoo.bcoo_reduce_sum(mat, axes=axes)
    return out.todense() if out.ndim == 0 else out   # a sum to a scalar is dense (as JAX)


def _integer_pow(mat, y):
    return mat ** y


_RULES = {
    "mul": lambda a, b: _mul(a, b),
    "div": lambda a, b: _div(a, b),
    "integer_pow": lambda a, y: _integer_pow(a, y),
    "dot_general": lambda a, b, dimension_numbers, precision=None,
    preferred_element_type=None, **_: _bcoo.bcoo_dot_general(
        a, b, dimension_numbers=dimension_numbers,
        preferred_element_type=preferred_element_type),
    "reduce_sum": lambda a, axes, **_: _reduce_sum(a, axes),
    "transpose": lambda a, permutation: _bcoo.bcoo_transpose(a, permutation=permutation),
    "reshape": lambda a, new_sizes, dimensions=None, **_: _bcoo.bcoo_reshape(
        a, new_sizes=new_sizes, dimensions=dimensions),
    "broadcast_in_dim": lambda a, shape, broadcast_dimensions, **_:
    _bcoo.bcoo_broadcast_in_dim(a, shape=shape, broadcast_dimensions=broadcast_dimensions),
}


_ADDS = {"add": 1, "add_any": 1, "sub": -1}


def _apply(eqn, vals, refs):
    """The outputs of one equation; `refs` name the indices each sparse operand holds
    (sparse operands with one name share their indices, so their sum keeps them)."""
    name = eqn.prim.name
    if not any(_is_sparse(v) for v in vals):
        out = _bind(eqn.prim, *vals, **eqn.params)
        return list(out) if eqn.prim.multiple_results else [out]
    if name in _ADDS:
        same = _is_sparse(vals[0]) and _is_sparse(vals[1]) and refs[0] == refs[1]
        return [_add(vals[0], vals[1], _ADDS[name], same)]
    if len(vals) == 1 and (name in _LINEAR_UNARY or name in _ZERO_PRESERVING_UNARY):
        return [_unary(name, vals[0], eqn.params, eqn.prim)]
    if len(vals) == 1 and name in _DENSE_OUTPUT_UNARY:
        raise NotImplementedError(
            f"sparse rule for {name} is not implemented because it would result in dense "
            f"output. If this is your intent, use sparse.todense() to convert your arguments "
            f"to dense matrices.")
    rule = _RULES.get(name)
    if rule is None:
        raise NotImplementedError(f"sparse rule for {name} is not implemented.")
    if name == "integer_pow":
        return [rule(vals[0], eqn.params["y"])]
    return [rule(*vals, **eqn.params)]


def _literal(lit):
    return jnp.asarray(lit.value, dtype=lit.aval.dtype)


def _run(fn, inputs):
    """Run the SSA `fn` on `inputs` (arrays and BCOO arrays), primitive by primitive."""
    env, refs = {}, {}
    for var, val in zip(fn.invars, inputs):
        env[var.name] = val
        refs[var.name] = var.name            # each input's indices are its own
    read = lambda v: _literal(v) if isinstance(v, Literal) else env[v.name]  # noqa: E731
    for eqn in fn.eqns:
        vals = [read(v) for v in eqn.invars]
        ins = [(refs[v.name], x) for v, x in zip(eqn.invars, vals) if _is_sparse(x)]
        outs = _apply(eqn, vals, [refs.get(getattr(v, "name", None)) for v in eqn.invars])
        for var, val in zip(eqn.outvars, outs):
            env[var.name] = val
            # a result holding an operand's indices array shares that operand's name
            refs[var.name] = next((r for r, x in ins if _is_sparse(val) and
                                   val.indices is x.indices), var.name)
    return [read(v) for v in fn.outvars]


def sparsify(f, use_tracer=False):
    """`f` made to accept `BCOO` arrays wherever it accepts dense ones (see the module
    docstring for the primitives with sparse rules). `use_tracer` is accepted for JAX's
    signature; kiln has one implementation."""
    def sparsified(*args, **kwargs):
        leaves, tree = tree_flatten((args, kwargs), is_leaf=_is_sparse)
        stand = [ShapeDtypeStruct(x.shape, x.dtype) if _is_sparse(x) else x for x in leaves]
        s_args, s_kwargs = tree_unflatten(tree, stand)
        staged = stage_abstractly(f, s_args, s_kwargs)
        inputs = [x if _is_sparse(x) else jnp.asarray(x) for x in leaves]
        inputs += [jnp.asarray(c) for c in staged.extra]
        if len(inputs) != len(staged.fn.invars):
            raise TypeError(
                f"sparsify({getattr(f, '__name__', f)}): the arguments must be arrays, sparse "
                f"arrays or pytrees of them (got {len(leaves)} leaves for "
                f"{len(staged.fn.invars) - len(staged.extra)} staged inputs); pass static "
                f"values through functools.partial")
        return tree_unflatten(staged.out_tree, _run(staged.fn, inputs))
    sparsified.__name__ = f"sparsify({getattr(f, '__name__', 'f')})"
    sparsified.__wrapped__ = f
    return sparsified


def _sparse_diff(transform, with_value, fun, argnums, has_aux, **kwargs):
    """`transform` (kiln.grad, or kiln.value_and_grad when `with_value`) differentiating
    sparse arguments with respect to their stored values: their gradients are BCOO arrays with
    the same indices."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def wrapped(*args):
        def on_data(*xs):
            args2 = list(args)
            for i, x in zip(nums, xs):
                args2[i] = _bcoo._with_data(args[i], x) if _is_sparse(args[i]) else x
            return fun(*args2)
        primals = [args[i].data if _is_sparse(args[i]) else args[i] for i in nums]
        out = transform(on_data, argnums=tuple(range(len(nums))), has_aux=has_aux,
                        **kwargs)(*primals)
        if with_value:
            value, grads = out
        elif has_aux:
            grads, aux = out
        else:
            grads = out
        grads = tuple(_bcoo._with_data(args[i], g) if _is_sparse(args[i]) else g
                      for i, g in zip(nums, grads))
        grads = grads[0] if isinstance(argnums, int) else grads
        if with_value:
            return value, grads
        return (grads, aux) if has_aux else grads
    return wrapped


def grad(fun, argnums=0, has_aux=False, **kwargs):
    """`kiln.grad` where a `BCOO` argument is differentiated with respect to its stored
    values: its gradient is a `BCOO` with the argument's indices (JAX's `sparse.grad`)."""
    from ... import grad as dense_grad
    return _sparse_diff(dense_grad, False, fun, argnums, has_aux, **kwargs)


def value_and_grad(fun, argnums=0, has_aux=False, **kwargs):
    """`kiln.value_and_grad` with `BCOO` arguments differentiated as in `grad`."""
    from ... import value_and_grad as dense_value_and_grad
    return _sparse_diff(dense_value_and_grad, True, fun, argnums, has_aux, **kwargs)

