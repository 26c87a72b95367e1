"""The strong-Wolfe line search of `kiln.scipy.optimize` (JAX's `line_search`, Algorithm 3.5
of Nocedal and Wright with the zoom of Algorithm 3.6), over `kiln.numpy` and
`lax.while_loop`, so that it compiles under `jit`.

The search doubles the step from a start value until the sufficient-decrease condition fails
or the slope turns; then it zooms into the bracket by cubic, quadratic or bisection steps.
Both zooms of one round are run, each switched off by its `pass_through` flag (the while
loop's condition), as JAX does; their results are chosen with `jnp.where`. The state is a
dict of arrays; `_choose` replaces some of its entries where a predicate holds."""
import numpy as np

from .. import lax
from .. import numpy as jnp
from ..ad import value_and_grad
from ..numpy._core import promote_dtypes_inexact


def _choose(pred, state, new):
    """`state` with each entry named in `new` replaced where `pred` holds."""
    return {**state, **{k: jnp.where(pred, v, state[k]) for k, v in new.items()}}


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimiser of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    rhs_b, rhs_c = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * rhs_b - db ** 2 * rhs_c) / denom
    B = (-dc ** 3 * rhs_b + db ** 3 * rhs_c) / denom
    return a + (-B + jnp.sqrt(B * B - 3. * A * fpa)) / (3. * A)


def _quadmin(a, fa, fpa, b, fb):
    """The minimiser of the parabola through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    B = (fb - fa - fpa * db) / (db ** 2)
    return a - fpa / (2. * B)


def _zoom(phi, wolfe_one, wolfe_two, lo, hi, g_0, pass_through):
    """Algorithm 3.6: shrink the bracket [lo, hi] ((step, value, slope) triples) until a step
    meets both Wolfe conditions; `failed` when the bracket collapses or after 30 steps."""
    a_lo, phi_lo, dphi_lo = lo
    a_hi, phi_hi, dphi_hi = hi
    f = jnp.result_type(a_lo, a_hi)
    state = dict(done=jnp.array(False), failed=jnp.array(False), j=jnp.array(0),
                 a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo,
                 a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi,
                 a_rec=(a_lo + a_hi) / 2., phi_rec=(phi_lo + phi_hi) / 2.,
                 a_star=jnp.array(1., f), phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_0,
                 nfev=jnp.array(0), ngev=jnp.array(0))
    threshold = 1e-5 if np.finfo(np.dtype(f)).bits < 64 else 1e-10

    def body(s):
        dalpha = s["a_hi"] - s["a_lo"]
        a = jnp.minimum(s["a_hi"], s["a_lo"])
        b = jnp.maximum(s["a_hi"], s["a_lo"])
        cchk, qchk = 0.2 * dalpha, 0.1 * dalpha
        s = {**s, "failed": s["failed"] | (dalpha <= threshold)}
        a_cubic = _cubicmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"],
                            s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (a_cubic > a + cchk) & (a_cubic < b - cchk)
        a_quad = _quadmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"])
        use_quad = (~use_cubic) & (a_quad > a + qchk) & (a_quad < b - qchk)
        a_j = jnp.where(use_cubic, a_cubic, s["a_rec"])
        a_j = jnp.where(use_quad, a_quad, a_j)
        a_j = jnp.where((~use_cubic) & (~use_quad), (s["a_lo"] + s["a_hi"]) / 2., a_j)
        phi_j, dphi_j, g_j = phi(a_j)
        phi_j = phi_j.astype(s["phi_lo"].dtype)
        dphi_j = dphi_j.astype(s["dphi_lo"].dtype)
        g_j = g_j.astype(s["g_star"].dtype)
        s = {**s, "nfev": s["nfev"] + 1, "ngev": s["ngev"] + 1}
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s["phi_lo"])
        star_to_j = wolfe_two(dphi_j) & (~hi_to_j)
        hi_to_lo = (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0.) & (~hi_to_j) & (~star_to_j)
        lo_to_j = (~hi_to_j) & (~star_to_j)
        s = _choose(hi_to_j, s, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j,
                                     a_rec=s["a_hi"], phi_rec=s["phi_hi"]))
        s = _choose(star_to_j, {**s, "done": star_to_j | s["done"]},
                    dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j))
        s = _choose(hi_to_lo, s, dict(a_hi=s["a_lo"], phi_hi=s["phi_lo"], dphi_hi=s["dphi_lo"],
                                      a_rec=s["a_hi"], phi_rec=s["phi_hi"]))
        s = _choose(lo_to_j & ~hi_to_lo, s, dict(a_rec=s["a_lo"], phi_rec=s["phi_lo"]))
        s = _choose(lo_to_j, s, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j))
        j = s["j"] + 1
        return {**s, "j": j, "failed": s["failed"] | (j >= 30)}

    return lax.while_loop(lambda s: (~s["done"]) & (~pass_through) & (~s["failed"]), body,
                          state)


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
    """A step along `pk` from `xk` meeting the strong Wolfe conditions; returns a dict with
    failed, nit, nfev, ngev, k, a_k, f_k, g_k and status (0 found, 1 zoom failed, 3 maxiter
    reached), as JAX's `_LineSearchResults`."""
    xk, pk = promote_dtypes_inexact(xk, pk)

    def phi(t):
        value, g = value_and_grad(f)(xk + jnp.asarray(t, pk.dtype) * pk)
        return value, jnp.real(jnp.dot(g, pk)), g

    evaluated = old_fval is None or gfk is None
    if evaluated:
        phi_0, dphi_0, gfk = phi(0)
    else:
        phi_0, dphi_0 = old_fval, jnp.real(jnp.dot(gfk, pk))
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        start = jnp.where(candidate > 1, 1.0, candidate)
    else:
        start = jnp.asarray(1.0, pk.dtype)

    def wolfe_one(a_i, phi_i):
        return phi_i > phi_0 + c1 * a_i * dphi_0

    def wolfe_two(dphi_i):
        return jnp.abs(dphi_i) <= -c2 * dphi_0

    f_dtype = jnp.result_type(start)
    state = dict(done=jnp.array(False), failed=jnp.array(False), i=jnp.array(1),
                 a_i1=jnp.array(0., f_dtype), phi_i1=phi_0, dphi_i1=dphi_0,
                 nfev=jnp.array(int(evaluated)), ngev=jnp.array(int(evaluated)),
                 a_star=jnp.array(0., f_dtype), phi_star=phi_0, dphi_star=dphi_0, g_star=gfk)
    stars = ("a_star", "phi_star", "dphi_star", "g_star")

    def body(s):
        a_i = jnp.where(s["i"] == 1, start, s["a_i1"] * 2.)
        phi_i, dphi_i, g_i = phi(a_i)
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s["phi_i1"]) & (s["i"] > 1))
        to_i = wolfe_two(dphi_i) & (~to_zoom1)
        to_zoom2 = (dphi_i >= 0.) & (~to_zoom1) & (~to_i)
        previous = (s["a_i1"], s["phi_i1"], s["dphi_i1"])
        current = (a_i, phi_i, dphi_i)
        zoom1 = _zoom(phi, wolfe_one, wolfe_two, previous, current, gfk, ~to_zoom1)
        zoom2 = _zoom(phi, wolfe_one, wolfe_two, current, previous, gfk, ~to_zoom2)
        s = {**s, "nfev": s["nfev"] + 1 + zoom1["nfev"] + zoom2["nfev"],
             "ngev": s["ngev"] + 1 + zoom1["ngev"] + zoom2["ngev"]}
        s = _choose(to_zoom1, {**s, "done": to_zoom1 | s["done"],
                               "failed": (to_zoom1 & zoom1["failed"]) | s["failed"]},
                    {k: zoom1[k] for k in stars})
        s = _choose(to_i, {**s, "done": to_i | s["done"]},
                    dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i))
        s = _choose(to_zoom2, {**s, "done": to_zoom2 | s["done"],
                               "failed": (to_zoom2 & zoom2["failed"]) | s["failed"]},
                    {k: zoom2[k] for k in stars})
        return {**s, "i": s["i"] + 1, "a_i1": a_i, "phi_i1": phi_i, "dphi_i1": dphi_i}

    s = lax.while_loop(lambda s: (~s["done"]) & (s["i"] <= maxiter) & (~s["failed"]), body,
                       state)
    status = jnp.where(s["failed"], 1, jnp.where(s["i"] > maxiter, 3, 0))
    alpha = s["a_star"]
    if np.finfo(np.dtype(alpha.dtype)).bits != 64:
        alpha = jnp.where(jnp.abs(alpha) < 1e-8, jnp.sign(alpha) * 1e-8, alpha)
    return dict(failed=s["failed"] | (~s["done"]), nit=s["i"] - 1, nfev=s["nfev"],
                ngev=s["ngev"], k=s["i"], a_k=alpha, f_k=s["phi_star"], g_k=s["g_star"],
                status=status)
