"""`kiln.numpy.linalg`'s functions built on the decomposition primitives (`kiln.lax.linalg`):
factorisations (cholesky, qr, eigh, svd), solvers (solve, inv, lstsq, pinv, tensorsolve,
tensorinv), determinants (det, slogdet), and what singular values give (svdvals, cond,
matrix_rank), with matrix_power and multi_dot. JAX's signatures; every function broadcasts
over leading axes. Singular input gives inf/NaN (solve, inv, det through LU), never an error.
`kiln.numpy.linalg`'s docstring lists what is not here.
"""
import collections
import functools
import operator

import numpy as np

from ..array import to_array
from ..compiler.ir import dtypes
from ..lax import linalg as lax_linalg
from ._core import check_arraylike, promote_dtypes_inexact
from . import _creation, _linalg, _reductions, _shape, _ufuncs

__all__ = ["cholesky", "qr", "eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals", "solve", "inv", "det",
           "slogdet", "pinv", "lstsq", "matrix_rank", "cond", "matrix_power", "multi_dot",
           "tensorsolve", "tensorinv"]

EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])


def _matrix(fun_name, a, rank=2):
    check_arraylike(fun_name, a)
    a, = promote_dtypes_inexact(to_array(a, fun_name))
    if a.ndim < rank:
        raise ValueError(f"{fun_name} requires an array of rank at least {rank}, got shape "
                         f"{a.shape}")
    return a


def _square(fun_name, a):
    a = _matrix(fun_name, a)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fun_name} requires square matrices in the last two axes, got shape "
                         f"{a.shape}")
    return a


def _h(x):
    x = _shape.swapaxes(x, -1, -2)
    return _ufuncs.conj(x) if dtypes.is_complex(x.dtype) else x


def cholesky(a, *, upper=False, symmetrize_input=True):
    L = lax_linalg.cholesky(_square("jnp.linalg.cholesky", a),
                            symmetrize_input=symmetrize_input)
    return _h(L) if upper else L


def qr(a, mode="reduced"):
    a = _matrix("jnp.linalg.qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    if mode == "raw":   # geqrf's reflectors, transposed (as NumPy and JAX), and their scalars
        from ..lax._linalg_more import geqrf   # (kiln.lax imports kiln.numpy: at call time)
        h, taus = geqrf(a)
        return QRResult(_shape.swapaxes(h, -1, -2), taus)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def eig(a):
    w, v = lax_linalg.eig(_square("jnp.linalg.eig", a), compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    return lax_linalg.eig(_square("jnp.linalg.eigvals", a), compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def eigh(a, UPLO=None, symmetrize_input=True):  # noqa: N803
    a = _square("jnp.linalg.eigh", a)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):  # noqa: N803
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    a = _matrix("jnp.linalg.svd", a)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x, /):
    return svd(x, compute_uv=False)


def _lu_solve(lu, permutation, b):
    """x with a x = b for a = P^T L U (lu, permutation of lax.linalg.lu), b (..., m, k)."""
    y = _shape.take_along_axis(b, _shape.expand_dims(permutation, -1), axis=-2,
                               mode="promise_in_bounds")   # rows of b in permutation's order
    y = lax_linalg.triangular_solve(lu, y, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)


def _broadcast_batch(a, b, b_core):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:b.ndim - b_core])
    return (_shape.broadcast_to(a, batch + a.shape[-2:]),
            _shape.broadcast_to(b, batch + b.shape[b.ndim - b_core:]))


def solve(a, b):
    """x with a @ x = b; b is a vector (..., m) only when it has rank 1 (NumPy 2's rule, as
    JAX's)."""
    a = _square("jnp.linalg.solve", a)
    check_arraylike("jnp.linalg.solve", b)
    a, b = promote_dtypes_inexact(a, to_array(b, "jnp.linalg.solve"))
    vector = b.ndim == 1
    if vector:
        b = _shape.expand_dims(b, -1)
    a, b = _broadcast_batch(a, b, 2)
    lu, _, permutation = lax_linalg.lu(a)
    x = _lu_solve(lu, permutation, b)
    return x[..., 0] if vector else x


def inv(a):
    a = _square("jnp.linalg.inv", a)
    eye = _shape.broadcast_to(_creation.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return solve(a, eye)


def _lu_parity(pivots):
    k = pivots.shape[-1]
    swaps = _ufuncs.not_equal(pivots, _creation.arange(k, dtype=pivots.dtype))
    return _ufuncs.remainder(_reductions.sum(swaps.astype(np.int32), axis=-1), 2)


def slogdet(a, *, method=None):
    a = _square("jnp.linalg.slogdet", a)
    if a.shape[-1] == 0:
        real = np.finfo(a.dtype).dtype
        return SlogdetResult(_creation.ones(a.shape[:-2], a.dtype),
                             _creation.zeros(a.shape[:-2], real))
    lu, pivots, _ = lax_linalg.lu(a)
    diag = _shape.diagonal(lu, axis1=-2, axis2=-1)
    parity = _lu_parity(pivots)
    sign = _ufuncs.where(parity == 1, -1, 1).astype(a.dtype)
    absdiag = _ufuncs.abs(diag)
    if dtypes.is_complex(a.dtype):
        sign = sign * _reductions.prod(diag / absdiag.astype(a.dtype), axis=-1)
    else:
        sign = sign * _reductions.prod(_ufuncs.sign(diag), axis=-1)
    logabsdet = _reductions.sum(_ufuncs.log(absdiag), axis=-1)
    zero = _reductions.any(absdiag == 0, axis=-1)
    return SlogdetResult(_ufuncs.where(zero, 0, sign).astype(a.dtype),
                         _ufuncs.where(zero, -np.inf, logabsdet))


def det(a):
    a = _square("jnp.linalg.det", a)
    if a.shape[-1] == 0:
        return _creation.ones(a.shape[:-2], a.dtype)
    lu, pivots, _ = lax_linalg.lu(a)
    diag = _shape.diagonal(lu, axis1=-2, axis2=-1)
    sign = _ufuncs.where(_lu_parity(pivots) == 1, -1, 1).astype(a.dtype)
    return sign * _reductions.prod(diag, axis=-1)


def _default_rtol(a, s):
    return max(a.shape[-2:], default=1) * np.finfo(s.dtype).eps


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    a = _matrix("jnp.linalg.pinv", a)
    u, s, vh = svd(a, full_matrices=False)
    rtol = rcond if rtol is None else rtol
    rtol = 10 * _default_rtol(a, s) if rtol is None else rtol
    if s.shape[-1] == 0:
        return _shape.swapaxes(_creation.zeros(a.shape, a.dtype), -1, -2)
    cutoff = _ufuncs.multiply(rtol, _reductions.max(s, axis=-1, keepdims=True))
    s_inv = _ufuncs.where(s > cutoff, 1 / s, 0).astype(a.dtype)
    return _linalg.matmul(_h(vh) * _shape.expand_dims(s_inv, -2), _h(u))


def matrix_rank(M, rtol=None, *, tol=None):  # noqa: N803
    M = _matrix("jnp.linalg.matrix_rank", M)
    s = svdvals(M)
    if tol is None:
        rtol = _default_rtol(M, s) if rtol is None else rtol
        tol = _ufuncs.multiply(rtol, _reductions.max(s, axis=-1, keepdims=True, initial=0))
    return _reductions.sum(s > tol, axis=-1)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """(x, residuals, rank, s) of the least-squares problem a x = b, through the SVD."""
    a = _matrix("jnp.linalg.lstsq", a)
    a, b = promote_dtypes_inexact(a, to_array(b, "jnp.linalg.lstsq"))
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise TypeError(f"jnp.linalg.lstsq requires a 2-D a and a 1-D or 2-D b, got shapes "
                        f"{a.shape} and {b.shape}")
    vector = b.ndim == 1
    b2 = _shape.expand_dims(b, -1) if vector else b
    u, s, vh = svd(a, full_matrices=False)
    rcond = _default_rtol(a, s) if rcond is None else rcond
    cutoff = _ufuncs.multiply(rcond, _reductions.max(s, initial=0))
    mask = s > cutoff
    s_inv = _ufuncs.where(mask, 1 / _ufuncs.where(mask, s, 1), 0).astype(a.dtype)
    x = _linalg.matmul(_h(vh), _shape.expand_dims(s_inv, -1) * _linalg.matmul(_h(u), b2))
    rank = _reductions.sum(mask, dtype=np.int32)
    residual = b2 - _linalg.matmul(a, x)
    resid = _reductions.sum(_ufuncs.abs(residual) ** 2, axis=0)
    if numpy_resid and not (a.shape[0] > a.shape[1]):
        resid = _creation.zeros((0,), resid.dtype)
    return x[..., 0] if vector else x, resid, rank, s


def cond(x, p=None):
    from ._linalg_namespace import norm
    x = _matrix("jnp.linalg.cond", x)
    if p is None or p == 2:
        s = svdvals(x)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svdvals(x)
        return s[..., -1] / s[..., 0]
    return norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))


def matrix_power(a, n):
    a = _square("jnp.linalg.matrix_power", to_array(a, "jnp.linalg.matrix_power"))
    n = operator.index(n)
    if n == 0:
        return _shape.broadcast_to(_creation.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else _linalg.matmul(result, a)
        n >>= 1
        if n:
            a = _linalg.matmul(a, a)
    return result


def multi_dot(arrays, *, precision=None):
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays, got {len(arrays)}")
    return functools.reduce(lambda x, y: _linalg.matmul(x, y, precision=precision), arrays)


def tensorsolve(a, b, axes=None):
    a = _matrix("jnp.linalg.tensorsolve", a, 1)
    b = to_array(b, "jnp.linalg.tensorsolve")
    if axes is not None:
        all_axes = list(range(a.ndim))
        for k in axes:
            all_axes.remove(k % a.ndim)
            all_axes.append(k % a.ndim)
        a = _shape.transpose(a, all_axes)
    out_shape = a.shape[b.ndim:]
    size = int(np.prod(out_shape, dtype=np.int64))
    x = solve(_shape.reshape(a, (-1, size)), _shape.reshape(b, (-1,)))
    return _shape.reshape(x, out_shape)


def tensorinv(a, ind=2):
    a = _matrix("jnp.linalg.tensorinv", a, 1)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer, got {ind}.")
    head, tail = a.shape[:ind], a.shape[ind:]
    rows = int(np.prod(head, dtype=np.int64))
    return _shape.reshape(inv(_shape.reshape(a, (rows, -1))), tail + head)
