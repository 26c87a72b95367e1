"""`kiln.experimental.ode.odeint`: JAX's adaptive ODE solver, with its signature and
semantics.

`odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=inf, hmax=inf)` integrates
dy/dt = func(y, t, *args) from `y0` at `t[0]` and returns the solution at each time of `t`
(an increasing 1-D array), a pytree shaped like `y0` with a leading axis of `len(t)`.

The method is the Dormand-Prince 5(4) Runge-Kutta pair with adaptive steps: a step is
accepted when the root mean square of its error estimate, each component scaled by
`atol + rtol * max(|y_old|, |y_new|)`, is at most 1; the next step is the current one times
`0.9 * ratio**(-1/5)`, kept within [0.2, 10] (never more than 1 after a rejected step) and at
most `hmax`. The first step follows Hairer, Norsett and Wanner's estimate. Between the times of
`t` the solution is read from the quartic through the step's ends, their derivatives and the
method's mid-point value (Shampine's dense output). At most `mxstep` steps are taken towards
each time of `t`; past that the value is the interpolant's at the last step, as in JAX.

Derivatives are JAX's adjoint method: reverse mode integrates the state, its adjoint and the
parameters' cotangents backwards between consecutive times of `t` (`custom_vjp`), so memory
does not grow with the number of steps; the cotangent of `t` is the derivative's projection at
each time. Values `func` closes over are passed to that rule as arguments, so derivatives with
respect to them are right too (JAX's `closure_convert`). Forward mode (`jvp`) is refused, as in
JAX.
"""
import math

import numpy as np

__all__ = ["odeint"]

# Dormand-Prince 5(4): nodes, stage coefficients, the 5th-order weights (the 7th stage is the
# new point, so its derivative starts the next step) and the error weights (5th minus 4th).
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_A = ((),
      (1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656))
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (35 / 384 - 5179 / 57600, 0.0, 500 / 1113 - 7571 / 16695, 125 / 192 - 393 / 640,
      -2187 / 6784 + 92097 / 339200, 11 / 84 - 187 / 2100, -1 / 40)
# Shampine's weights for the solution at the step's mid-point.
_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
        -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
        -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _combine(weights, ks):
    """sum_j weights[j] * ks[j], skipping zero weights."""
    total = None
    for w, k in zip(weights, ks):
        if w != 0.0:
            total = w * k if total is None else total + w * k
    return total


def _rms(x):
    from .. import numpy as jnp
    return jnp.sqrt(jnp.mean(x * x))


def _step(f, y0, f0, t0, dt):
    """One Dormand-Prince step: (y1, f1 = f(y1, t0 + dt), error estimate, stage slopes)."""
    ks = [f0]
    for c, row in zip(_C[1:], _A[1:]):
        ks.append(f(y0 + dt * _combine(row, ks), t0 + c * dt))
    y1 = y0 + dt * _combine(_B, ks)
    f1 = f(y1, t0 + dt)
    ks.append(f1)
    return y1, f1, dt * _combine(_E, ks), ks


def _quartic(y0, y1, ks, dt):
    """The coefficients (highest power first) of p(s), s in [0, 1], with p(0) = y0,
    p(1) = y1, p'(0) = dt f0, p'(1) = dt f1 and p(1/2) the mid-point value."""
    from .. import numpy as jnp
    d = dt * ks[0]
    ymid = y0 + dt * _combine(_MID, ks)
    a_ = y1 - y0 - d
    b_ = dt * ks[-1] - d
    c_ = ymid - y0 - d / 2
    return jnp.stack([16 * c_ - 8 * a_ + 2 * b_, -32 * c_ + 14 * a_ - 3 * b_,
                      16 * c_ - 5 * a_ + b_, d, y0])


def _first_step(f, t0, y0, f0, rtol, atol):
    from .. import numpy as jnp
    scale = atol + jnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / jnp.where(d1 == 0, 1, d1))
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    big = jnp.maximum(d1, d2)
    h1 = jnp.where(big <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.where(big <= 1e-15, 1, big)) ** (1 / 5))
    return jnp.minimum(100 * h0, h1)


def _next_step(dt, ratio, hmax):
    from .. import numpy as jnp
    safe = jnp.where(ratio > 0, ratio, 1)
    factor = jnp.clip(0.9 * safe ** (-1 / 5), 0.2, 10.0)
    factor = jnp.where(ratio == 0, 10.0, factor)
    factor = jnp.where(ratio <= 1, factor, jnp.minimum(factor, 1.0))
    return jnp.minimum(dt * factor, hmax)


def _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    """The solution of dy/dt = func(y, t, *args) (flat y) at the times `ts`, stacked."""
    from .. import numpy as jnp
    from ..lax import scan, while_loop

    def f(y, t):
        return func(y, t, *args)

    def advance(carry, target):
        def running(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def step(state):
            i, y, f0, t, dt, last_t, coeffs = state
            y1, f1, err, ks = _step(f, y, f0, t, dt)
            tol = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1))
            ratio = _rms(err / tol)
            ok = ratio <= 1
            return (i + 1, jnp.where(ok, y1, y), jnp.where(ok, f1, f0), jnp.where(ok, t + dt, t),
                    _next_step(dt, ratio, hmax), jnp.where(ok, t, last_t),
                    jnp.where(ok, _quartic(y, y1, ks, dt), coeffs))

        _, *state = while_loop(running, step, (0,) + tuple(carry))
        y, f0, t, dt, last_t, coeffs = state
        s = (target - last_t) / jnp.where(t == last_t, 1, t - last_t)
        return tuple(state), jnp.polyval(coeffs, s)

    f0 = f(y0, ts[0])
    dt = jnp.minimum(_first_step(f, ts[0], y0, f0, rtol, atol), hmax)
    coeffs = jnp.zeros((5,) + tuple(y0.shape), y0.dtype)
    start = (y0, f0, ts[0], dt.astype(ts.dtype), ts[0], coeffs)
    _, ys = scan(advance, start, ts[1:])
    return jnp.concatenate([y0[None], ys])


class _Flat:
    """`func` on flat states: f(y, t, *args, *consts) -> the raveled derivative, with the
    traced values `func` closes over (`outer`) standing for the `consts` given, in the region
    it is specialised in (`custom_derivatives.alias_closed_over`)."""

    def __init__(self, func, unravel, outer):
        self.func, self.unravel, self.outer = func, unravel, outer

    def __call__(self, y, t, *rest):
        from ..custom_derivatives import alias_closed_over
        from ..flatten_util import ravel_pytree
        n = len(self.outer)
        args, consts = rest[:len(rest) - n], rest[len(rest) - n:]
        alias_closed_over(self.outer, consts)
        return ravel_pytree(self.func(self.unravel(y), t, *args))[0]


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=math.inf, hmax=math.inf):
    """The solution of dy/dt = func(y, t, *args) at the times `t` (module docstring)."""
    from .. import numpy as jnp
    from ..custom_derivatives import closed_over_tracers
    from ..flatten_util import ravel_pytree
    from ..tree_util import tree_leaves
    from ..vmap import vmap
    for arg in tree_leaves(args):
        if not (hasattr(arg, "shape") or isinstance(arg, (int, float, complex, bool,
                                                            np.generic))):
            raise TypeError(f"The contents of odeint *args must be arrays or scalars, but got "
                            f"{arg}.")
    flat, unravel = ravel_pytree(y0)
    outer = closed_over_tracers([func])   # (JAX's closure_convert constants)
    f = _Flat(func, unravel, outer)
    ys = _odeint(f, rtol, atol, mxstep, hmax, flat, jnp.asarray(t), *args, *outer)
    return vmap(unravel)(ys)


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, residuals, g):
    """The adjoint method: between consecutive times, backwards, the state, its adjoint and
    the parameters' cotangents integrated together; the cotangent of each time is the
    derivative's projection on the output's cotangent (t[0]'s: minus the adjoint's)."""
    from .. import numpy as jnp
    from ..ad import vjp
    from ..lax import scan
    from ..tree_util import tree_map
    ys, ts, args = residuals

    def reversed_dynamics(state, s, *args):
        y, adjoint, _ = state
        y_dot, pullback = vjp(lambda y_, *a: func(y_, -s, *a), y, *args)
        cotangents = pullback(adjoint)
        return -y_dot, cotangents[0], tuple(cotangents[1:])

    def interval(carry, i):
        adjoint, args_bar = carry
        t_bar = jnp.vdot(func(ys[i], ts[i], *args), g[i])
        state = odeint(reversed_dynamics, (ys[i], adjoint, args_bar),
                       jnp.stack([-ts[i], -ts[i - 1]]), *args, rtol=rtol, atol=atol,
                       mxstep=mxstep, hmax=hmax)
        _, adjoint, args_bar = tree_map(lambda x: x[-1], state)
        return (adjoint + g[i - 1], args_bar), t_bar

    zeros = tuple(jnp.zeros_like(a) for a in args)
    (adjoint, args_bar), t_bars = scan(interval, (g[-1], zeros),
                                       jnp.arange(len(ts) - 1, 0, -1))
    t0_bar = -jnp.vdot(func(ys[0], ts[0], *args), adjoint - g[0])
    return (adjoint, jnp.concatenate([t0_bar[None], t_bars[::-1]]), *args_bar)


def _make_odeint():
    from ..custom_derivatives import custom_vjp
    solver = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))
    solver.defvjp(_odeint_fwd, _odeint_bwd)
    return solver


_odeint = _make_odeint()
