"""Matrix decompositions: cholesky and triangular_solve, JAX's `lax.linalg` primitives.

Both act on the trailing two axes and batch over the leading ones (the operands of
triangular_solve share their batch shape, as in JAX).

- `cholesky(a)`: the lower factor L of a Hermitian positive-definite `a`, reading only its
  lower triangle (JAX's primitive; `lax.linalg.cholesky` symmetrises its input first). The
  strict upper triangle of the result is zero. A matrix that is not positive definite gives a
  result full of NaN, as JAX's, never an error.
- `triangular_solve(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal)`: X with
  op(a) X = b (left_side) or X op(a) = b, op transposing and/or conjugating as asked; only the
  triangle `lower` names is read (its diagonal taken as ones with `unit_diagonal`). A zero on
  the diagonal gives inf/NaN.

The NumPy definitions are written with NumPy only (np.linalg, matmul), so that the CUDA
backend's per-primitive path runs them on CuPy arrays unchanged (cuSOLVER underneath). On
NumPy arrays of LAPACK's types, triangular_solve calls BLAS's trsm through SciPy instead, one
call per matrix (`on_lapack`: not for large batches of small matrices), as the LLVM backend
does: a loop of row substitutions in Python cost 20x JAX's eager solve of an 8x8 system.

Derivatives are JAX's: cholesky's JVP is L Phi(L^-1 dA L^-H) (Phi: the lower triangle with a
halved diagonal), not symmetrised, so its VJP is L^-H Phi(L^H Lbar) L^-1, which is not
symmetric either: only its lower triangle matters for the primitive, and
`lax.linalg.cholesky`'s symmetrisation (on by default) spreads it over both. triangular_solve is
linear in b; its derivative in `a` is masked to the triangle the primitive reads.
"""
import functools

import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, JVP, VJP, BATCH, check_dtype_kinds
from .rule_forms import tangent_rule, cotangent_rule

_INEXACT = "fc"


def check_inexact(op, a, position=0):
    """JAX's error for an integer or boolean matrix."""
    check_dtype_kinds(op, a, _INEXACT, "subtypes of floating, complexfloating", position)


# --------------------------------------------------------------------------- cholesky

def _cholesky_eval(a):
    check_inexact("cholesky", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError("The input to cholesky must have shape [..., n, n], got shape "
                         f"{tuple(a.shape)}.")
    return ShapedArray(a.shape, a.dtype)


def _cholesky(a):
    xp = array_module(a)
    lower = xp.tril(a)
    full = lower + xp.conj(xp.swapaxes(xp.tril(a, -1), -1, -2))
    n = a.shape[-1]
    if a.size == 0:
        return xp.zeros_like(a)
    with np.errstate(all="ignore"):
        try:
            return xp.tril(xp.linalg.cholesky(full)).astype(a.dtype)
        except np.linalg.LinAlgError:   # a batch with one bad matrix: one at a time
            pass
        flat = full.reshape(-1, n, n)
        out = xp.empty_like(flat)
        for i in range(flat.shape[0]):
            try:
                out[i] = xp.linalg.cholesky(flat[i])
            except np.linalg.LinAlgError:
                out[i] = np.nan
        return xp.tril(out.reshape(a.shape)).astype(a.dtype)


def array_module(x):
    """NumPy, or CuPy for CuPy arrays (the CUDA backend's per-primitive path)."""
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        import cupy
        return cupy
    return np


_LAPACK_DTYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))


# A batch of more than LOOP_BATCH matrices of order below LOOP_ORDER runs the definition's
# loop, vectorised over the batch, rather than a LAPACK call per matrix (10,000 8x8 matrices:
# about 10 ms against 40 ms).
LOOP_BATCH, LOOP_ORDER = 32, 16


def on_lapack(*arrays):
    """Whether a NumPy definition takes SciPy's LAPACK or BLAS routine, one call per matrix of
    the batch, as the LLVM backend and JAX's CPU kernels do: NumPy arrays of a type LAPACK has
    (float32/64, complex64/128), none empty, and not a large batch of small matrices (the
    first array's). CuPy arrays and other types (float16, bfloat16) take the definition
    written with array operations only."""
    if not all(type(x) is np.ndarray and x.dtype in _LAPACK_DTYPES and x.size for x in arrays):
        return False
    first = arrays[0]
    return (first.size // (first.shape[-1] * first.shape[-2]) <= LOOP_BATCH
            or min(first.shape[-2:]) >= LOOP_ORDER)


@functools.lru_cache(maxsize=None)
def lapack_routine(name, dtype):
    """SciPy's wrapper of the LAPACK or BLAS routine `name` ("getrf", "trsm") for `dtype`."""
    from scipy.linalg import blas, lapack
    if hasattr(lapack, "s" + name):
        return lapack.get_lapack_funcs(name, dtype=dtype)
    return blas.get_blas_funcs(name, dtype=dtype)


cholesky = register("cholesky", _cholesky_eval, _cholesky)


def h(x):
    """The conjugate transpose of the trailing two axes."""
    nd = E.aval(x).ndim
    t = E.transpose(x, permutation=tuple(range(nd - 2)) + (nd - 1, nd - 2))
    return E.conj(t) if E.aval(x).dtype.kind == "c" else t


def t(x):
    nd = E.aval(x).ndim
    return E.transpose(x, permutation=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def matmul(x, y):
    nd = E.aval(x).ndim
    batch = tuple(range(nd - 2))
    return E.dot_general(x, y, dimension_numbers=(((nd - 1,), (nd - 2,)), (batch, batch)),
                         precision=None, preferred_element_type=None)


def masked(x, mask):
    """`x` times a constant mask of the trailing two axes, broadcast over the batch."""
    a = E.aval(x)
    full = np.broadcast_to(mask.astype(a.dtype), a.shape).copy()
    return E.mul(x, full)


def triangle(n, lower, diagonal=1.0):
    ones = np.ones((n, n))
    mask = np.tril(ones, -1) if lower else np.triu(ones, 1)
    return mask + diagonal * np.eye(n)


def solve(a, b, **params):
    return E.triangular_solve(a, b, **{**_SOLVE_DEFAULTS, **params})


_SOLVE_DEFAULTS = dict(left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                       unit_diagonal=False)


def _cholesky_jvp(primals, tangents, out):
    (da,) = tangents
    L = out
    n = E.aval(L).shape[-1]
    tmp = solve(L, da, left_side=False, transpose_a=True, conjugate_a=True, lower=True)
    inner = solve(L, tmp, left_side=True, lower=True)
    return matmul(L, masked(inner, triangle(n, True, 0.5)))


def _cholesky_vjp(ct, primals, out):
    """The transpose of the JVP (JAX's convention, no conjugation):
    L^-T phi(L^T ct) conj(L)^-1."""
    L = out
    n = E.aval(L).shape[-1]
    phi = masked(matmul(t(L), ct), triangle(n, True, 0.5))
    # X conj(L) = phi is conj(X) L = conj(phi): a solve from the right with L, conjugated
    right = _conj(solve(L, _conj(phi), left_side=False, lower=True))
    return [solve(L, right, left_side=True, lower=True, transpose_a=True)]


def _conj(x):
    return E.conj(x) if E.aval(x).dtype.kind == "c" else x


def matrix_batch_rule(prim):
    """The batching rule of a one-operand decomposition: the batch axis becomes the first
    leading axis of the operand and of every result."""
    def batch(args, dims, **params):
        (x,), (d,) = args, dims
        out = E.bind(prim.name, B.moveaxis(x, d, 0), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    return batch


JVP[cholesky] = tangent_rule(_cholesky_jvp)
VJP[cholesky] = cotangent_rule(_cholesky_vjp)
BATCH[cholesky] = matrix_batch_rule(cholesky)


# --------------------------------------------------------------------- triangular_solve

def _triangular_solve_eval(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    check_inexact("triangular_solve", a, 0)
    if a.dtype != b.dtype:
        raise TypeError("triangular_solve requires arguments to have the same dtypes, got "
                        f"{a.dtype}, {b.dtype}.")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise TypeError("triangular_solve requires the last two dimensions of a to be equal in "
                        f"size, got a.shape of {tuple(a.shape)}.")
    if b.ndim != a.ndim:
        raise TypeError("triangular_solve requires a and b to have the same number of "
                        f"dimensions, got {a.ndim} and {b.ndim}.")
    if a.shape[:-2] != b.shape[:-2]:
        raise TypeError("triangular_solve requires both arguments to have the same number of "
                        f"dimensions and equal batch dimensions, got {tuple(a.shape)} and "
                        f"{tuple(b.shape)}.")
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != common:
        raise ValueError("Incompatible shapes for arguments to triangular_solve: "
                        f"{tuple(a.shape)} and {tuple(b.shape)}.")
    return ShapedArray(b.shape, b.dtype)


def _triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    if on_lapack(a, b) and not (conjugate_a and not transpose_a and a.dtype.kind == "c"):
        return _trsm(a, b, left_side, lower, (2 if conjugate_a else 1) if transpose_a else 0,
                     unit_diagonal)
    xp = array_module(a)
    t = xp.tril(a) if lower else xp.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t * (1 - xp.eye(n, dtype=a.dtype)) + xp.eye(n, dtype=a.dtype)
    if transpose_a:
        t = xp.swapaxes(t, -1, -2)
    if conjugate_a:
        t = xp.conj(t)
    if not left_side:   # X op(a) = b  <=>  op(a)^T X^T = b^T
        t, b = xp.swapaxes(t, -1, -2), xp.swapaxes(b, -1, -2)
    if b.size == 0:
        out = xp.zeros(b.shape, b.dtype)
    else:
        out = _substitute(xp, t, b, lower != bool(transpose_a) if left_side
                          else lower == bool(transpose_a))
    if not left_side:
        out = xp.swapaxes(out, -1, -2)
    return xp.ascontiguousarray(out.astype(b.dtype))


def _trsm(a, b, left_side, lower, trans, unit_diagonal):
    """triangular_solve by BLAS's trsm per matrix (`trans`: trsm's 0, 1 or 2 for op(a) = a,
    a^T or a^H; conjugating without transposing has no trsm form)."""
    trsm = lapack_routine("trsm", a.dtype)
    n = a.shape[-1]
    matrices = a.reshape(-1, n, n)
    rhs = b.reshape((-1,) + b.shape[-2:])
    out = np.empty(rhs.shape, b.dtype)
    with np.errstate(all="ignore"):
        for i in range(rhs.shape[0]):
            out[i] = trsm(1.0, matrices[i], rhs[i], side=0 if left_side else 1,
                          lower=int(lower), trans_a=trans, diag=int(unit_diagonal))
    return out.reshape(b.shape)


def _substitute(xp, t, b, lower):
    """Forward (lower) or back substitution, row by row: inf/NaN for a zero pivot (no error,
    as LAPACK's trsm), batched over leading axes."""
    n = t.shape[-1]
    x = xp.zeros(b.shape, b.dtype)
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            acc = b[..., i, :] - xp.einsum("...j,...jk->...k", t[..., i, :], x)
            x[..., i, :] = acc / t[..., i, i][..., None]
    return x


triangular_solve = register("triangular_solve", _triangular_solve_eval, _triangular_solve)


def _op(x, transpose_a, conjugate_a):
    x = t(x) if transpose_a else x
    return E.conj(x) if conjugate_a and E.aval(x).dtype.kind == "c" else x


def _a_mask(a, lower, unit_diagonal):
    return triangle(E.aval(a).shape[-1], lower, 0.0 if unit_diagonal else 1.0)


def _triangular_solve_jvp(primals, tangents, out, **params):
    (a, _), (da, db) = primals, tangents
    terms = []
    if db is not None:
        terms.append(solve(a, db, **params))
    if da is not None:
        dop = _op(masked(da, _a_mask(a, params["lower"], params["unit_diagonal"])),
                  params["transpose_a"], params["conjugate_a"])
        rhs = matmul(dop, out) if params["left_side"] else matmul(out, dop)
        terms.append(E.neg(solve(a, rhs, **params)))
    return terms[0] if len(terms) == 1 else E.add(*terms)


def _triangular_solve_vjp(ct, primals, out, **params):
    a, b = primals
    y = solve(a, ct, **{**params, "transpose_a": not params["transpose_a"]})
    g = E.neg(matmul(y, t(out)) if params["left_side"] else matmul(t(out), y))
    g = _op(g, params["transpose_a"], params["conjugate_a"])
    return [masked(g, _a_mask(a, params["lower"], params["unit_diagonal"])), y]


def _triangular_solve_batch(args, dims, **params):
    a, b = B.bdim_at_front(args, dims)
    return E.triangular_solve(a, b, **params), 0


JVP[triangular_solve] = tangent_rule(_triangular_solve_jvp)
VJP[triangular_solve] = cotangent_rule(_triangular_solve_vjp)
BATCH[triangular_solve] = _triangular_solve_batch
