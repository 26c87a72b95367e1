"""kiln.test_util — derivatives checked against finite differences (JAX's `jax.test_util`).

`check_grads(f, args, order)` compares kiln's forward mode (`kiln.jvp`) and reverse mode
(`kiln.vjp`) of `f` at `args` with central finite differences, up to `order`; `check_jvp` and
`check_vjp` check one given JVP or VJP function. Semantics, defaults and random directions are
those of JAX 0.10.2, so a check that passes in JAX passes here for the same function:

* Forward mode: draw a random tangent `t` (standard normal, NumPy `RandomState(0)`, one per
  argument leaf, same shape and dtype), and compare the tangent output of `jvp(f, args, t)` with
  `(f(args + eps*t) - f(args - eps*t)) / (2*eps)`; the primal output must equal `f(*args)`.
* Reverse mode: with a random tangent `t` and a random output cotangent `c`, the VJP must satisfy
  the dot-product identity `<t, vjp(c)> == <J t, c>`, where `J t` is the finite difference above.
  One direction checks the whole Jacobian in a random projection, at the cost of two calls of `f`.
* Higher orders: the JVP function `(primals, tangents) -> jvp(f, primals, tangents)` and the
  function `x -> vjp(f, x)[1](f(x))` are checked again, recursively, in every mode, so order 2
  with both modes covers fwd-of-fwd, rev-of-fwd, fwd-of-rev and rev-of-rev.

Tolerances (`atol`, `rtol`: a number, or a dict from dtype to number merged into the defaults)
are per dtype: 1e-5 for float64/complex128, 2e-3 for float32, 1e-3 for complex64, 1e-2 for
float16, exact for integers; each is multiplied by the size of the compared array, as in JAX.
A failed check raises `AssertionError` naming the function, the mode chain and order, the output
leaf, and the largest error beside the tolerance; when several argument leaves take part, the
message also names the ones whose derivative disagrees.
"""
import functools

import numpy as np

from .compiler.config import config
from .compiler.ir import dtypes as _dtypes
from .tree_util import (keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten)

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                         float: np.dtype(np.float64), complex: np.dtype(np.complex128)}

# Tolerances for values (primal outputs) and for derivatives, by canonical dtype.
_VALUE_TOLERANCE = {**{np.dtype(t): 0 for t in ("bool", "int8", "int16", "int32", "int64",
                                                "uint8", "uint16", "uint32", "uint64")},
                    np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
                    np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6,
                    np.dtype(np.complex128): 1e-15}
_GRADIENT_TOLERANCE = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
                       np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3,
                       np.dtype(np.complex128): 1e-5}

# np.testing.assert_allclose's default relative tolerance, used where a tolerance comes out 0.
_NUMPY_RTOL = 1e-7


# ------------------------------------------------------------------------- dtypes, tolerances

def _is_python_scalar(x):
    return type(x) in _PYTHON_SCALAR_DTYPES


def _dtype(x):
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return _PYTHON_SCALAR_DTYPES.get(type(x)) or np.asarray(x).dtype


def _is_float0(dtype):
    return dtype.kind == "V"  # JAX's float0 (tangents of integer values) is a void dtype


def _canonical(dtype):
    return dtype if _is_float0(dtype) else _dtypes.canonicalize(dtype)


def _merge_tolerance(tol):
    if tol is None:
        return _GRADIENT_TOLERANCE
    if not isinstance(tol, dict):
        return tol
    return {**_GRADIENT_TOLERANCE, **{np.dtype(k): v for k, v in tol.items()}}


def _tolerance(dtype, tol):
    if not isinstance(tol, dict):
        return tol
    dtype = _canonical(dtype)
    if _is_float0(dtype):
        return 0
    return tol.get(dtype, _VALUE_TOLERANCE[dtype])


# ------------------------------------------------------------------------------ comparisons

def _leaves_with_paths(tree):
    pairs, treedef = tree_flatten_with_path(tree)
    return [(keystr(path), leaf) for path, leaf in pairs], treedef


def _same_structure(got, want, what):
    got_leaves, got_def = _leaves_with_paths(got)
    want_leaves, want_def = _leaves_with_paths(want)
    if got_def != want_def:
        raise AssertionError(f"{what}: the result has structure {got_def}, expected {want_def}")
    return [(path, a, b) for (path, a), (_, b) in zip(got_leaves, want_leaves)]


def _check_dtypes_match(got, want, what):
    x64 = config.read("enable_x64")
    for path, a, b in _same_structure(got, want, what):
        da, db = _dtype(a), _dtype(b)
        if not x64:
            da, db = _canonical(da), _canonical(db)
        if da != db:
            raise AssertionError(f"{what}{path}: dtype {da}, expected {db}")


def _as_numeric(x):
    x = np.asarray(x)
    return x.astype(np.int8) if x.dtype == np.bool_ else x


def _assert_leaf_close(a, b, atol, rtol, what):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shape {a.shape}, expected {b.shape}")
    if _is_float0(a.dtype) and _is_float0(b.dtype):
        return
    atol = max(_tolerance(a.dtype, atol), _tolerance(b.dtype, atol)) * a.size
    rtol = (max(_tolerance(a.dtype, rtol), _tolerance(b.dtype, rtol)) * b.size) or _NUMPY_RTOL
    a, b = _as_numeric(a), _as_numeric(b)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            return
        error = np.where(close, 0, np.abs(a - b))
        error = np.where(np.isnan(error), np.inf, error)  # a NaN on one side only
        worst = np.unravel_index(np.argmax(error), a.shape)
    allowed = atol + rtol * np.abs(b[worst])
    where = f" at index {tuple(int(i) for i in worst)}" if a.ndim else ""
    raise AssertionError(
        f"{what}: {int((~close).sum())} of {a.size} elements differ; max error "
        f"{np.abs(a[worst] - b[worst]):.3g} > tolerance {allowed:.3g} (atol={atol:.3g}, "
        f"rtol={rtol:.3g}); got {a[worst]}, expected {b[worst]}{where}")


def _check_close(got, want, atol, rtol, what):
    for path, a, b in _same_structure(got, want, what):
        _assert_leaf_close(a, b, atol, rtol, f"{what}{path}")


def _is_close(got, want, atol, rtol):
    try:
        _check_close(got, want, atol, rtol, "")
    except AssertionError:
        return False
    return True


# ------------------------------------------------------------------- finite-difference algebra

def _keep_type(x, result, dtype):
    result = np.asarray(result, dtype=dtype)
    return result.item() if _is_python_scalar(x) else result


def _add_scaled(x, t, scale):
    """x + scale*t in x's dtype (a Python scalar stays one)."""
    dtype = _dtype(x)
    step = np.multiply(np.asarray(t), np.array(scale, dtype=dtype), dtype=dtype)
    return _keep_type(x, np.add(np.asarray(x), step, dtype=dtype), dtype)


def _central_difference(x_pos, x_neg, eps):
    """(x_pos - x_neg) / (2 eps), with inf - inf taken as 0."""
    dtype = _dtype(x_pos)
    a, b = np.asarray(x_pos), np.asarray(x_neg)
    with np.errstate(invalid="ignore"):
        diff = np.where(np.equal(a, b), np.array(0, dtype), np.subtract(a, b, dtype=dtype))
    return np.multiply(diff, np.array(0.5 / eps, dtype=dtype), dtype=dtype)


def _numerical_jvp(f, primals, tangents, eps):
    f_pos = f(*tree_map(lambda x, t: _add_scaled(x, t, eps), primals, tangents))
    f_neg = f(*tree_map(lambda x, t: _add_scaled(x, t, -eps), primals, tangents))
    return tree_map(lambda p, n: _central_difference(p, n, eps), f_pos, f_neg)


def _rand_like(rng, x):
    shape, dtype = np.shape(x), _dtype(x)
    out = np.asarray(rng.randn(*shape), dtype=dtype)
    if dtype.kind == "c":
        out = out + dtype.type(1j) * np.asarray(rng.randn(*shape), dtype=dtype)
    return out.item() if _is_python_scalar(x) else out


def _conj(tree):
    return tree_map(lambda x: _keep_type(x, np.conj(x), _dtype(x)), tree)


def _inner_product(xs, ys):
    terms = [np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
             for _, x, y in _same_structure(xs, ys, "inner product")]
    return functools.reduce(np.add, terms) if terms else np.float64(0)


def _one_leaf_directions(tangent):
    """(path, tangent with every leaf but one zeroed) for each leaf, when there are several."""
    pairs, treedef = tree_flatten_with_path(tangent)
    leaves = [leaf for _, leaf in pairs]
    if len(leaves) < 2:
        return []
    zeros = [_keep_type(x, np.zeros_like(np.asarray(x)), _dtype(x)) for x in leaves]
    return [(keystr(path), tree_unflatten(treedef, zeros[:i] + [leaves[i]] + zeros[i + 1:]))
            for i, (path, _) in enumerate(pairs)]


def _blame(tangent, agrees):
    """A sentence naming the argument leaves along which `agrees(direction)` is False."""
    bad = [f"args{path}" for path, direction in _one_leaf_directions(tangent)
           if not agrees(direction)]
    return f"; the derivative disagrees along {', '.join(bad)}" if bad else ""


def _label(err_msg, part):
    return f"{err_msg} {part}" if err_msg else part


# ------------------------------------------------------------------------------ public checks

def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=None, err_msg=""):
    """Check a JVP function against finite differences in one random direction.

    Args:
      f: the function, checked at ``f(*args)``.
      f_jvp: ``(primals, tangents) -> (primal_out, tangent_out)``, usually
        ``functools.partial(kiln.jvp, f)``.
      args: tuple of arguments (pytrees of float or complex arrays or Python scalars).
      atol, rtol: absolute and relative tolerance: a number, or a dict from dtype to number.
      eps: finite-difference step (default 1e-4).
      err_msg: text prefixed to the failure message.

    Raises:
      AssertionError: if the primal or tangent output disagrees.
    """
    atol, rtol, eps = _merge_tolerance(atol), _merge_tolerance(rtol), eps or EPS
    args = tuple(args)
    tangent = tree_map(functools.partial(_rand_like, np.random.RandomState(0)), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out, _label(err_msg, "tangent output"))
    v_expected = f(*args)
    _check_dtypes_match(v_out, v_expected, _label(err_msg, "primal output"))
    _check_close(v_out, v_expected, atol, rtol, _label(err_msg, "primal output"))
    t_expected = _numerical_jvp(f, args, tangent, eps)
    try:
        _check_close(t_out, t_expected, atol, rtol, _label(err_msg, "tangent output"))
    except AssertionError as e:
        raise AssertionError(str(e) + _blame(tangent, lambda t: _is_close(
            f_jvp(args, t)[1], _numerical_jvp(f, args, t, eps), atol, rtol))) from None


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=None, err_msg=""):
    """Check a VJP function against finite differences through the dot-product identity.

    With a random tangent ``t`` and a random output cotangent ``c``, ``<t, vjp(c)>`` must equal
    ``<(f(x + eps t) - f(x - eps t)) / 2 eps, c>``.

    Args:
      f: the function, checked at ``f(*args)``.
      f_vjp: ``*primals -> (primal_out, vjp_fun)``, usually ``functools.partial(kiln.vjp, f)``.
      args: tuple of arguments (pytrees of float or complex arrays or Python scalars).
      atol, rtol: absolute and relative tolerance: a number, or a dict from dtype to number.
      eps: finite-difference step (default 1e-4).
      err_msg: text prefixed to the failure message.

    Raises:
      AssertionError: if the primal output or the cotangent projection disagrees.
    """
    atol, rtol, eps = _merge_tolerance(atol), _merge_tolerance(rtol), eps or EPS
    args = tuple(args)
    rand_like = functools.partial(_rand_like, np.random.RandomState(0))
    v_out, vjp_fun = f_vjp(*args)
    _check_close(v_out, f(*args), atol, rtol, _label(err_msg, "primal output"))
    tangent = tree_map(rand_like, args)
    cotangent = tree_map(rand_like, v_out)
    cotangent_in = _conj(vjp_fun(_conj(cotangent)))

    def projections(direction):
        return (_inner_product(direction, cotangent_in),
                _inner_product(_numerical_jvp(f, args, direction, eps), cotangent))

    got, want = projections(tangent)
    try:
        _check_close(got, want, atol, rtol, _label(err_msg, "cotangent projection <t, vjp(c)>"))
    except AssertionError as e:
        raise AssertionError(str(e) + _blame(tangent, lambda t: _is_close(
            *projections(t), atol, rtol))) from None


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check forward- and reverse-mode derivatives of ``f`` up to ``order`` against finite
    differences, in one random direction per check (see the module docstring).

    Args:
      f: the function, checked at ``f(*args)``.
      args: tuple of arguments (pytrees of float or complex arrays or Python scalars).
      order: derivatives up to this order are checked; mixed modes are checked from order 2.
      modes: any of "fwd" (``kiln.jvp``), "rev" (``kiln.vjp``) and "lin" (``kiln.linearize``).
      atol, rtol: absolute and relative tolerance: a number, or a dict from dtype to number.
      eps: finite-difference step (default 1e-4).

    Raises:
      AssertionError: if a derivative disagrees; the message names the function, the mode
        chain (e.g. "JVP of VJP"), the order and the output.
      ValueError: for a mode other than "fwd", "rev" and "lin".
    """
    from . import jvp, vjp  # kiln's autodiff API, loaded with kiln

    unknown = set(modes) - {"fwd", "rev", "lin"}
    if unknown:
        raise ValueError(f"check_grads: unknown modes {sorted(unknown)}; use 'fwd', 'rev' "
                         "or 'lin'")
    name = getattr(f, "__name__", repr(f))
    args = tuple(args)
    eps = eps or EPS

    def jvp_from_linearize(fun, primals, tangents):
        from . import linearize
        primal_out, fun_lin = linearize(fun, *primals)
        return primal_out, fun_lin(*tangents)

    def vjp_of_output(fun):
        def pulled_back_output(*primals):
            out, vjp_fun = vjp(fun, *primals)
            return vjp_fun(out)
        return pulled_back_output

    def check(fun, fun_args, k, chain):
        for mode, word in (("fwd", "JVP"), ("rev", "VJP"), ("lin", "LIN")):
            if mode not in modes:
                continue
            msg = f"{word} of {chain}" if chain else word
            label = f"check_grads({name}): {msg} (order {order - k + 1})"
            if mode == "rev":
                check_vjp(fun, functools.partial(vjp, fun), fun_args, atol, rtol, eps, label)
                if k > 1:
                    check(vjp_of_output(fun), fun_args, k - 1, msg)
                continue
            fun_jvp = functools.partial(jvp if mode == "fwd" else jvp_from_linearize, fun)
            check_jvp(fun, fun_jvp, fun_args, atol, rtol, eps, label)
            if k > 1:
                check(fun_jvp, (fun_args, fun_args), k - 1, msg)

    check(f, args, order, "")
