"""Taylor-mode rules: the `JET` table that `kiln.experimental.jet` runs (transforms/jet.py).

A value's truncated Taylor series is its primal `x0` and its coefficients `x1 .. xK` (the
coefficients of t^k in x(t), not scaled by factorials: the API scales). A rule emits its
equation and the coefficients of its results:

    JET[prim](eqn, primals, series) -> (outs, out_series)

`series[i]` lists operand i's coefficients, zeros where it has none; `out_series` holds a list
of K coefficients per result. Rules of single-result primitives are written in the form that
reads like the math, `f(primals, series, out, **params) -> coefficients`, adapted by
`series_rule`. Most are the recurrences of Taylor arithmetic over full lists
`u = [u0, u1, ..., uK]` (the primal first), with JAX's conventions:

    product     (u w)_k = sum_{j=0..k} u_j w_{k-j}                  `product`
    quotient    v_k = (u_k - sum_{j<k} v_j w_{k-j}) / w_0            `quotient`
    v' = c u'   v_k = sum_{j=1..k} j c_{k-j} u_j / k                 `step`, `integral`
                (exp: c = v; log, sin/cos, logistic, erf, atan2, erf_inv likewise)

Families come from small factories: `linear` (a primitive linear in some operands applies to
each coefficient), `bilinear` (mul, dot_general, conv), `composite` (a primitive whose series
is that of a formula, as JAX's `def_comp`), `cumulative` (cumprod, cummax, cummin: the series
of JAX's associative scan). Primitives marked `zero_derivative` (comparisons,
rounding, bit operations, argmax, ...) need no rule: their results have zero series. The
primitives without a rule here are those JAX's jet has none for (tan, cond, while_loop, sort,
...); the transform refuses them by name.
"""
import functools
import math

from ..ir.builder import current
from . import emit as E, regions
from .core import JET, PRIMITIVES
from .reductions import interleave, slice_axis
from .rule_forms import replay_eqn, name_result


def series_rule(f):
    """The JET rule `(eqn, primals, series) -> (outs, out_series)` of the math-form `f`: the
    equation is replayed, its coefficients named after the result (`y_t1`, `y_t2`, ...)."""
    def jet(eqn, primals, series):
        b = current()
        outs = replay_eqn(b, eqn, primals)
        start = len(b.eqns)
        coeffs = f(primals, series, outs[0], **eqn.params)
        for k, c in enumerate(coeffs, 1):
            name_result(b, start, c, f"{eqn.outvars[0].name}_t{k}")
        return outs, [list(coeffs)]
    jet.__name__ = getattr(f, "__name__", "jet")
    return jet


# ------------------------------------------------------------------ arithmetic on series
#
# Full lists: index 0 is the primal (which the recurrences below may not need).

def _sum(terms):
    return functools.reduce(E.add, terms)


def _times(x, n):
    """x * n for a Python number n (x itself for 1)."""
    return x if n == 1 else E.mul(x, n)


def _over(x, n):
    """x / n for a Python number n (x itself for 1)."""
    return x if n == 1 else E.div(x, n)


def _full(x0, coeffs):
    return [x0] + list(coeffs)


def product(u, w):
    """The series of u * w."""
    return [_sum([E.mul(u[j], w[k - j]) for j in range(k + 1)]) for k in range(len(u))]


def quotient(u, w, v0=None):
    """The series of u / w (with its primal `v0`, emitted if not given)."""
    v = [E.div(u[0], w[0]) if v0 is None else v0]
    for k in range(1, len(u)):
        v.append(E.div(E.sub(u[k], _sum([E.mul(v[j], w[k - j]) for j in range(k)])), w[0]))
    return v


def step(c, u, k):
    """Coefficient k of v where v' = c u': sum_{j=1..k} j c_{k-j} u_j / k."""
    return _over(_sum([E.mul(_times(c[k - j], j), u[j]) for j in range(1, k + 1)]), k)


def integral(c, u, v0):
    """The series of v with v' = c u' and v(0) = v0 (`c` needs its first len(u) - 1
    coefficients)."""
    return [v0] + [step(c, u, k) for k in range(1, len(u))]


def scaled(u, a):
    return [E.mul(x, a) for x in u]


def shifted(u, a):
    """The series of u + a, for a constant a."""
    return [E.add(u[0], a)] + u[1:]


def exp_series(u, v0):
    """The series of exp(u), whose primal is v0: v' = v u'."""
    v = [v0]
    for k in range(1, len(u)):
        v.append(step(v, u, k))
    return v


def log_series(u, v0):
    """The series of log(u): u v' = u'."""
    v = [v0]
    for k in range(1, len(u)):
        conv = [E.mul(_times(v[j], j), u[k - j]) for j in range(1, k)]
        v.append(E.div(E.sub(u[k], E.div(_sum(conv), k)) if conv else u[k], u[0]))
    return v


def power_series(u, r, v0):
    """The series of u ** r, r a series too (JAX's rule: exp(r log u))."""
    return exp_series(product(r, log_series(u, E.log(u[0]))), v0)


def const_power_series(u, r, v0):
    """The series of u ** r for a constant r."""
    return exp_series(scaled(log_series(u, E.log(u[0])), r), v0)


def sincos_series(u, s0, c0, sign):
    """The series of (sin u, cos u) (sign -1) or (sinh u, cosh u) (sign +1): s' = c u',
    c' = sign s u'."""
    s, c = [s0], [c0]
    for k in range(1, len(u)):
        s.append(step(c, u, k))
        c.append(E.mul(step(s, u, k), sign))
    return s, c


def logistic_series(u, v0):
    """The series of logistic(u): v' = e u' with e = v (1 - v)."""
    v, e = [v0], [E.mul(v0, E.sub(1, v0))]
    for k in range(1, len(u)):
        v.append(step(e, u, k))
        e.append(E.sub(E.mul(E.sub(1, v0), v[k]),
                       _sum([E.mul(v[j], v[k - j]) for j in range(1, k + 1)])))
    return v


def _square_exp(u):
    """The series of exp(-u^2)."""
    m = scaled(product(u, u), -1)
    return exp_series(m, E.exp(m[0]))


def erf_series(u, v0):
    """erf' = 2/sqrt(pi) exp(-u^2)."""
    return integral(scaled(_square_exp(u), 2 / math.sqrt(math.pi)), u, v0)


def erf_inv_series(u, v0):
    """erf_inv' = sqrt(pi)/2 exp(v^2): the derivative's series grows with v's (JAX's rule)."""
    K = len(u) - 1
    const = math.sqrt(math.pi) / 2
    v, sq = [v0], [E.mul(v0, v0)]
    ex = [E.exp(sq[0])]
    c = [E.mul(ex[0], const)]
    for k in range(1, K + 1):
        v.append(step(c, u, k))
        if k == K:
            break
        sq.append(_sum([E.mul(v[k - j], v[j]) for j in range(k + 1)]))
        ex.append(step(ex, sq, k))
        c.append(E.mul(ex[k], const))
    return v


def max_series(x, y, xs, ys, pick):
    """The series of max (pick = gt) or min (pick = lt) of x and y: the chosen operand's,
    their average where they tie (JAX's rule)."""
    chosen, tie = pick(x, y), E.eq(x, y)
    return [E.select(tie, E.div(E.add(a, b), 2), E.select(chosen, a, b))
            for a, b in zip(xs, ys)]


def integer_power_series(u, n):
    """The series of u ** n by squaring, as JAX's rule multiplies (n != 0)."""
    if n < 0:
        one = [E.scalar(1, E.aval(u[0]))] + [E.zeros_like(x) for x in u[1:]]
        return integer_power_series(quotient(one, u), -n)
    result = None
    while n > 0:
        if n % 2:
            result = u if result is None else product(result, u)
        n //= 2
        if n:
            u = product(u, u)
    return result


# ------------------------------------------------------------------------------ families

def linear(prim, fixed=(), fixed_from=None):
    """A primitive linear in its operands but those at the positions `fixed` (and from
    `fixed_from` on): indices, `which`. Each coefficient is the primitive applied to the
    operands' coefficients, the fixed operands as they are."""
    def rule(primals, series, out, **params):
        def operands(k):
            return [p if i in fixed or (fixed_from is not None and i >= fixed_from) else s[k]
                    for i, (p, s) in enumerate(zip(primals, series))]
        return [E.bind(prim.name, *operands(k), **params) for k in range(len(series[0]))]
    rule.__name__ = f"{prim.name}_linear"
    JET[prim] = series_rule(rule)


def bilinear(prim):
    """A primitive linear in each of its two operands: the product rule of series."""
    def rule(primals, series, out, **params):
        (x, y), (xs, ys) = primals, series
        u, w = _full(x, xs), _full(y, ys)
        return [_sum([E.bind(prim.name, u[j], w[k - j], **params) for j in range(k + 1)])
                for k in range(1, len(u))]
    rule.__name__ = f"{prim.name}_bilinear"
    JET[prim] = series_rule(rule)


def composite(prim, formula):
    """A primitive whose series is that of `formula(out, *full operand series)`, a full list
    whose primal (index 0) is dropped: the replayed equation's stands."""
    def rule(primals, series, out, **params):
        return formula(out, *[_full(p, s) for p, s in zip(primals, series)], **params)[1:]
    rule.__name__ = f"{prim.name}_series"
    JET[prim] = series_rule(rule)


P = PRIMITIVES

for _name in ("neg", "add", "sub", "real", "imag", "complex", "conj", "convert_element_type",
              "broadcast_in_dim", "concatenate", "pad", "reshape", "squeeze", "rev",
              "transpose", "slice", "reduce_sum", "reduce_window_sum", "fft", "copy",
              "cumsum"):
    linear(P[_name])
linear(P["select_n"], fixed=(0,))
linear(P["dynamic_slice"], fixed_from=1)
linear(P["dynamic_update_slice"], fixed_from=2)
linear(P["gather"], fixed=(1,))
linear(P["scatter_add"], fixed=(1,))

for _name in ("mul", "dot_general", "conv_general_dilated"):
    bilinear(P[_name])

composite(P["div"], lambda out, u, w: quotient(u, w, out))
composite(P["exp"], lambda out, u: exp_series(u, out))
composite(P["expm1"], lambda out, u: [out] + exp_series(u, E.exp(u[0]))[1:])
composite(P["log"], lambda out, u: log_series(u, out))
composite(P["log1p"], lambda out, u: log_series(shifted(u, 1), out))
composite(P["pow"], lambda out, u, r: power_series(u, r, out))
composite(P["sqrt"], lambda out, u: const_power_series(u, 0.5, out))
composite(P["rsqrt"], lambda out, u: const_power_series(u, -0.5, out))
composite(P["square"], lambda out, u: [out] + product(u, u)[1:])
composite(P["integer_pow"], lambda out, u, *, y: [out] + (
    integer_power_series(u, y)[1:] if y else [E.zeros_like(x) for x in u[1:]]))
composite(P["sin"], lambda out, u: sincos_series(u, out, E.cos(u[0]), -1)[0])
composite(P["cos"], lambda out, u: sincos_series(u, E.sin(u[0]), out, -1)[1])
composite(P["sinh"], lambda out, u: sincos_series(u, out, E.cosh(u[0]), 1)[0])
composite(P["cosh"], lambda out, u: sincos_series(u, E.sinh(u[0]), out, 1)[1])
composite(P["logistic"], lambda out, u: logistic_series(u, out))
# tanh(u) = 2 logistic(2u) - 1
composite(P["tanh"], lambda out, u: [out] + scaled(
    logistic_series(scaled(u, 2), E.div(E.add(out, 1), 2)), 2)[1:])
composite(P["erf"], lambda out, u: erf_series(u, out))
composite(P["erfc"], lambda out, u: [out] + scaled(erf_series(u, out)[1:], -1))
composite(P["erf_inv"], lambda out, u: erf_inv_series(u, out))
# asinh(u) = log(u + sqrt(u^2 + 1)), acosh(u) = log(u + sqrt(u^2 - 1)),
# atanh(u) = log((1 + u) / (1 - u)) / 2
composite(P["asinh"], lambda out, u: _log_of_root(out, u, 1))
composite(P["acosh"], lambda out, u: _log_of_root(out, u, -1))
composite(P["atanh"], lambda out, u: scaled(log_series(
    quotient(shifted(u, 1), shifted(scaled(u, -1), 1)), out), 0.5))
composite(P["atan2"], lambda out, x, y: _atan2_series(out, x, y))
# abs: the coefficients with the primal's sign (+ at 0)
composite(P["abs"], lambda out, u: [out] + [E.select(E.lt(u[0], 0), E.neg(t), t)
                                            for t in u[1:]])
composite(P["max"], lambda out, x, y: [out] + max_series(x[0], y[0], x[1:], y[1:], E.gt))
composite(P["min"], lambda out, x, y: [out] + max_series(x[0], y[0], x[1:], y[1:], E.lt))
# clamp(lo, x, hi) = min(max(lo, x), hi)
composite(P["clamp"], lambda out, lo, x, hi: [out] + max_series(
    E.max_(lo[0], x[0]), hi[0], max_series(lo[0], x[0], lo[1:], x[1:], E.gt), hi[1:], E.lt))
composite(P["rem"], lambda out, x, y: _rem_series(out, x, y))


def _log_of_root(out, u, sign):
    inner = shifted(product(u, u), sign)
    root = const_power_series(inner, 0.5, E.sqrt(inner[0]))
    return log_series([E.add(a, b) for a, b in zip(u, root)], out)


def _rem_series(out, x, y):
    """rem(x, y) = x - y trunc(x / y), the trunc's series zero (JAX's rule takes floor for
    trunc, which changes the value where x / y < 0)."""
    q = E.div(x[0], y[0])
    trunc = E.mul(E.sign(q), E.floor(E.abs_(q)))
    return [out] + [E.sub(a, E.mul(b, trunc)) for a, b in zip(x[1:], y[1:])]


def _atan2_series(out, x, y):
    """atan2(x, y) = atan(q), q = x / y: v' = q' / (1 + q^2)."""
    q = quotient(x, y)
    one = [E.scalar(1, E.aval(q[0]))] + [E.zeros_like(t) for t in q[1:]]
    return integral(quotient(one, shifted(product(q, q), 1)), q, out)


def _chooser(primals, series, out, *, axes):
    """reduce_max / reduce_min: the coefficients where the operand reaches the result,
    averaged over ties (JAX's rule)."""
    (x,), (xs,) = primals, series
    shape = E.aval(x).shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    at = E.cast_like(E.eq(x, E.broadcast_in_dim(out, shape=shape, broadcast_dimensions=kept)),
                     xs[0])
    count = E.reduce_sum(at, axes=axes)
    return [E.div(E.reduce_sum(E.mul(g, at), axes=axes), count) for g in xs]


JET[P["reduce_max"]] = series_rule(_chooser)
JET[P["reduce_min"]] = series_rule(_chooser)


def associative_scan(combine, elems, axis):
    """JAX's `lax.associative_scan` of the arrays `elems` (scanned together, as one pytree)
    along `axis`: `combine(a, b)` combines two lists of them elementwise."""
    n = E.aval(elems[0]).shape[axis]
    if n < 2:
        return elems
    odd = associative_scan(combine, combine([slice_axis(e, 0, n - 1, 2, axis) for e in elems],
                                            [slice_axis(e, 1, n, 2, axis) for e in elems]),
                           axis)
    even = [slice_axis(e, 0, 1, 1, axis) for e in elems]
    if n > 2:
        left = odd if n % 2 else [slice_axis(o, 0, n // 2 - 1, 1, axis) for o in odd]
        even = [E.concatenate(head, e, dimension=axis) for head, e in zip(
            even, combine(left, [slice_axis(e, 2, n, 2, axis) for e in elems]))]
    return [interleave(a, b, axis) for a, b in zip(even, odd)]


def _max_combine(pick, choose):
    return lambda a, b: [choose(a[0], b[0])] + max_series(a[0], b[0], a[1:], b[1:], pick)


def cumulative(prim, combine):
    """cumprod, cummax, cummin: the series of JAX's associative scan of the combine (JAX
    differentiates them through that scan too, which fixes how ties share the series)."""
    def rule(primals, series, out, *, axis, reverse=False):
        u = _full(primals[0], series[0])
        if reverse:
            u = [E.rev(x, dimensions=(axis,)) for x in u]
        v = associative_scan(combine, u, axis)[1:]
        return [E.rev(x, dimensions=(axis,)) for x in v] if reverse else v
    rule.__name__ = f"{prim.name}_scan"
    JET[prim] = series_rule(rule)


cumulative(P["cumprod"], product)
cumulative(P["cummax"], _max_combine(E.gt, E.max_))
cumulative(P["cummin"], _max_combine(E.lt, E.min_))


def _through_call(eqn, primals, series):
    """custom_jvp and custom_vjp functions: the series of the function itself, their rules
    unused, as JAX's jet does."""
    outs, out_series = regions.jet(eqn.params["call"], list(primals), list(series))
    return list(outs), list(out_series)


JET[P["custom_jvp_call"]] = _through_call
JET[P["custom_vjp_call"]] = _through_call
