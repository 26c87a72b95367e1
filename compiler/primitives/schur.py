"""schur and hessenberg: JAX's `lax.linalg` reductions of a general square matrix.

- `schur(a, compute_schur_vectors)` of an (..., n, n) matrix gives T, the Schur form (upper
  triangular for complex matrices; quasi-triangular with 2x2 blocks for complex conjugate
  pairs for real ones), and, when asked for, the unitary Z with a = Z T Z^H; LAPACK's gees
  without sorting, as JAX on CPU (`sort_eig_vals` is refused by `lax.linalg.schur`, as JAX's
  lowering refuses it).
- `hessenberg(a)` gives LAPACK's gehrd result as JAX does: (h, taus), the upper Hessenberg
  matrix in h's upper triangle and first subdiagonal, the Householder reflectors below it, and
  their (n - 1) scalar factors in `taus`.

The NumPy definitions call SciPy's LAPACK wrappers (the host for CuPy arrays, the CUDA
backend's). A matrix gees fails to converge on gives NaN in its results, as JAX.

JAX defines no derivative for either: their JVP and VJP rules raise NotImplementedError, as
JAX's differentiation does.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from .core import register, JVP, VJP, BATCH
from .decompositions import array_module, check_inexact, matrix_batch_rule
from .autodiff import underivable


def _schur_eval(a, *, compute_schur_vectors):
    check_inexact("schur", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to schur must be a square matrix. Got shape "
                         f"{tuple(a.shape)[-2:]}.")
    out = ShapedArray(a.shape, a.dtype)
    return (out, out) if compute_schur_vectors else (out,)


def _on_host(impl):
    """impl over NumPy arrays; CuPy operands go through the host (LAPACK), as JAX on GPU."""
    def run(a, **params):
        xp = array_module(a)
        if xp is np:
            return impl(a, **params)
        return tuple(xp.asarray(x) for x in impl(xp.asnumpy(a), **params))
    return run


@_on_host
def _schur(a, *, compute_schur_vectors):
    import scipy.linalg
    t, z = np.zeros(a.shape, a.dtype), np.zeros(a.shape, a.dtype)
    output = "complex" if a.dtype.kind == "c" else "real"
    for i in np.ndindex(a.shape[:-2] if a.size else (0,)):
        try:
            t[i], z[i] = scipy.linalg.schur(a[i], output=output, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            t[i], z[i] = np.nan, np.nan
    return (t, z) if compute_schur_vectors else (t,)


schur = register("schur", _schur_eval, _schur, multiple_results=True)


def _hessenberg_eval(a):
    check_inexact("hessenberg", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError("Argument to Hessenberg reduction must have shape [..., n, n], got "
                         f"shape {tuple(a.shape)}")
    return (ShapedArray(a.shape, a.dtype),
            ShapedArray(a.shape[:-2] + (max(a.shape[-1] - 1, 0),), a.dtype))


@_on_host
def _hessenberg(a):
    import scipy.linalg.lapack as lapack
    n = a.shape[-1]
    h, taus = np.zeros(a.shape, a.dtype), np.zeros(a.shape[:-2] + (max(n - 1, 0),), a.dtype)
    gehrd, gehrd_lwork = lapack.get_lapack_funcs(("gehrd", "gehrd_lwork"), dtype=a.dtype)
    for i in np.ndindex(a.shape[:-2] if a.size else (0,)):
        lwork = int(np.real(gehrd_lwork(n, lo=0, hi=n - 1)[0]))
        h[i], tau, _ = gehrd(a[i], lo=0, hi=n - 1, lwork=max(lwork, n, 1))
        taus[i] = tau[:n - 1]
    return h, taus


hessenberg = register("hessenberg", _hessenberg_eval, _hessenberg, multiple_results=True)


def _no_derivative(name):
    def rule(*args, **params):
        underivable(name)
    return rule


for _prim in (schur, hessenberg):
    JVP[_prim] = _no_derivative(_prim.name)
    VJP[_prim] = _no_derivative(_prim.name)
    BATCH[_prim] = matrix_batch_rule(_prim)
