"""`kiln.experimental.jet`: JAX's Taylor-mode differentiation, `jet(fun, primals, series)`, on
kiln's jet transform (`kiln.compiler.transforms.jet`, rules in
`kiln.compiler.primitives.taylor`).

`primals` holds one array per positional argument of `fun`, `series` one list of K terms per
argument (K the same for all); the result is `(fun(*primals), series_out)`, `series_out` the
output's pytree with a list of K terms in place of each leaf. With `factorial_scaled` (the
default) term k is the k-th derivative along the input curve, JAX's convention: the terms are
divided by k! on the way in and multiplied by k! on the way out of the transform, which works
on plain Taylor coefficients (`jet2` passes those through unscaled). The user's function is
specialised on the primals; outside `jit` the Taylor function is compiled once per argument
signature and run on the reference backend, inside a specialisation (`jit(lambda x, s:
jet(f, (x,), (s,)))`) it is emitted inline, as `kiln.jvp` is.
"""
import functools
import math

from ..ad import cached_transformation, specialised_call
from ..tree_util import tree_flatten, tree_structure, tree_unflatten, treedef_is_leaf
from ..compiler.ir import dtypes
from ..compiler.primitives import emit as E
from ..compiler.transforms.jet import jet_emit

__all__ = ["jet", "jet2"]


def _check(primals, series):
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments") from None
    if len(primals) != len(series):
        raise TypeError(f"jet takes one list of terms per primal, got {len(primals)} primals "
                        f"and {len(series)} lists of terms")
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not treedef_is_leaf(tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not treedef_is_leaf(tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    return order


def _scaled(term, k, divide):
    """Term k (from 0) of a series divided or multiplied by (k + 1)!; integer terms become
    weak floats first (JAX multiplies by a weak float factorial)."""
    if E.aval(term).dtype.kind not in "fc":
        term = E.convert(term, dtypes.default_float(), True)
    factor = math.factorial(k + 1)
    if factor == 1:
        return term
    return E.div(term, factor) if divide else E.mul(term, factor)


def jet(fun, primals, series, factorial_scaled=True, **_):
    """Taylor-mode differentiation: `(fun(*primals), series_out)` (JAX's `jet`)."""
    order = _check(primals, series)
    n = len(primals)
    leaves = list(primals) + [t for terms in series for t in terms]

    def make_rule(leaves, treedef, dynamic):
        def rule(st, values):
            ins = []
            for i, v in enumerate(st.fn.invars[:n]):
                terms = values[n + i * order:n + (i + 1) * order]
                terms = [E.convert(t, v.aval.dtype, E.aval(t).weak_type) for t in terms]
                ins.append([_scaled(t, k, True) for k, t in enumerate(terms)]
                           if factorial_scaled else terms)
            outs, out_series = jet_emit(st.fn, values, (ins if order else [None] * n)
                                        + [None] * (len(values) - n))
            out_series = [[E.zeros(v.aval)] * order if s is None else s
                          for s, v in zip(out_series, st.fn.outvars)]
            if factorial_scaled:
                out_series = [[_scaled(t, k, False) for k, t in enumerate(s)]
                              for s in out_series]
            flat = [t for s in out_series for t in s]

            def post(results):
                m = len(outs)
                terms = [results[m + i * order:m + (i + 1) * order] for i in range(m)]
                return (tree_unflatten(st.out_tree, results[:m]),
                        tree_unflatten(st.out_tree, terms))
            return list(outs) + flat, post
        return rule

    def on_primals(*flat):
        return specialised_call(fun, list(flat[:n]))
    on_primals.__name__ = getattr(fun, "__name__", "fn")
    t = cached_transformation(("jet", n, order, bool(factorial_scaled)), fun, on_primals,
                              make_rule)
    return t(leaves, tree_structure((tuple(leaves), {})), [True] * len(leaves))


jet2 = functools.partial(jet, factorial_scaled=False)


def __dir__():
    return sorted(__all__)
