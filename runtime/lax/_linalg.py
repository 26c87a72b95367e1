"""The implementation of `kiln.lax.linalg`: its public names (`__all__`, re-exported
there) and the helpers they use. `kiln.lax.linalg`'s docstring describes them.

The enums `EigImplementation`, `EighImplementation` and `SvdAlgorithm` have JAX's members and
values; `eig`, `eigh` and `svd` accept them as JAX's CPU backend does (the same choices run,
the same ones raise JAX's errors; docs/linalg.md says which LAPACK driver each runs).
"""
import enum
import warnings

from ..array import to_array
from ..dispatch import bind
from ..compiler.primitives import PRIMITIVES as P
from . import _ops

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "eig",
           "eigh", "hessenberg", "lu", "qr", "schur", "svd", "triangular_solve"]


class EigImplementation(enum.Enum):
    """Enum for eigendecomposition algorithm (JAX's; kiln runs LAPACK's geev)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """Implementation for symmetric/Hermitian eigendecomposition (JAX's; kiln runs QR's
    driver, LAPACK's syevd/heevd)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """Enum for SVD algorithm (JAX's; kiln runs LAPACK's gesdd for DEFAULT, QR and
    DIVIDE_AND_CONQUER)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


# The choices JAX's CPU backend refuses, with its exceptions and messages.
_REFUSED = {
    EigImplementation.CUSOLVER: ValueError("Only the lapack implementation is supported on "
                                           "CPU."),
    EigImplementation.MAGMA: ValueError("Only the lapack implementation is supported on CPU."),
    EighImplementation.JACOBI: NotImplementedError("Jacobi implementation is not supported on "
                                                   "CPU"),
    EighImplementation.QDWH: NotImplementedError("QDWH implementation is only supported on "
                                                 "TPU"),
    SvdAlgorithm.JACOBI: NotImplementedError("The SVD Jacobi and Polar algorithms are not "
                                             "implemented on CPU."),
    SvdAlgorithm.POLAR: NotImplementedError("The SVD Jacobi and Polar algorithms are not "
                                            "implemented on CPU."),
}


def _check_choice(choice):
    """Raise JAX's CPU error for an implementation or algorithm kiln (like JAX on CPU) does
    not run; every other choice computes LAPACK's factorisation."""
    error = _REFUSED.get(choice) if isinstance(choice, enum.Enum) else None
    if error is not None:
        raise type(error)(*error.args)


def _swap_last(x):
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return _ops.transpose(x, perm)


def _symmetrize(x):
    """(x + x^H) / 2 over the trailing two axes."""
    t = _swap_last(x)
    t = _ops.conj(t) if x.dtype.kind == "c" else t
    return _ops.div(_ops.add(x, t), _ops.convert_element_type(2, x.dtype))


def cholesky(x, *, symmetrize_input=True):
    x = to_array(x, "lax.linalg.cholesky")
    if symmetrize_input and x.ndim >= 2 and x.shape[-1] == x.shape[-2]:
        x = _symmetrize(x)
    return bind(P["cholesky"], x)


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """[w, vl, vr] of the general square `x` (..., n, n), as JAX's: complex eigenvalues, and
    the left and right eigenvectors (in columns) that are asked for, LAPACK's geev.
    `enable_eigvec_derivs=True` opts in to the eigenvectors' derivatives (JAX's; they assume
    distinct eigenvalues). `implementation` None or LAPACK; CUSOLVER and MAGMA raise JAX's CPU
    error (`use_magma`, deprecated, picks MAGMA or LAPACK, as JAX's)."""
    if use_magma is not None:
        warnings.warn("use_magma is deprecated, please use implementation=EigImplementation."
                      "MAGMA instead.", DeprecationWarning, stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    _check_choice(implementation)
    return list(bind(P["eig"], to_array(x, "lax.linalg.eig"),
                     compute_left_eigenvectors=bool(compute_left_eigenvectors),
                     compute_right_eigenvectors=bool(compute_right_eigenvectors),
                     enable_eigvec_derivs=bool(enable_eigvec_derivs)))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None,
         implementation=None):
    """(v, w) of the Hermitian `x` (..., n, n), as JAX's: eigenvectors in v's columns,
    eigenvalues in ascending order (always sorted: LAPACK's order). `implementation` None or
    QR (syevd/heevd); JACOBI and QDWH raise JAX's CPU errors."""
    _check_choice(implementation)
    if subset_by_index is not None:
        raise NotImplementedError("kiln.lax.linalg.eigh has no subset_by_index yet; slice the "
                                  "results instead")
    x = to_array(x, "lax.linalg.eigh")
    if symmetrize_input and x.ndim >= 2 and x.shape[-1] == x.shape[-2]:
        x = _symmetrize(x)
    return tuple(bind(P["eigh"], x, lower=bool(lower)))


def hessenberg(a):
    """(h, taus) of the square `a`, as JAX's: LAPACK's gehrd result (docs/linalg.md)."""
    return tuple(bind(P["hessenberg"], to_array(a, "lax.linalg.hessenberg")))


def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    """(T, vs) of the square `x`, or (T,) without `compute_schur_vectors`, as JAX's."""
    if sort_eig_vals:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not "
                                  "implemented.")
    return tuple(bind(P["schur"], to_array(x, "lax.linalg.schur"),
                      compute_schur_vectors=bool(compute_schur_vectors)))


def lu(x):
    """(lu, pivots, permutation) of `x` (..., m, n), as JAX's."""
    return tuple(bind(P["lu"], to_array(x, "lax.linalg.lu")))


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """(q, r) of `x` (..., m, n), as JAX's; column pivoting is not provided."""
    if pivoting:
        raise NotImplementedError("kiln.lax.linalg.qr has no column pivoting (pivoting=True) "
                                  "yet; use pivoting=False")
    return tuple(bind(P["qr"], to_array(x, "lax.linalg.qr"), full_matrices=bool(full_matrices)))


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """(u, s, vh) of `x` (..., m, n), or s alone without `compute_uv`, as JAX's. `algorithm`
    None, DEFAULT, QR or DIVIDE_AND_CONQUER (all LAPACK's gesdd); JACOBI and POLAR raise JAX's
    CPU error."""
    _check_choice(algorithm)
    if subset_by_index is not None:
        raise NotImplementedError("kiln.lax.linalg.svd has no subset_by_index yet; slice the "
                                  "results instead")
    out = bind(P["svd"], to_array(x, "lax.linalg.svd"), full_matrices=bool(full_matrices),
               compute_uv=bool(compute_uv))
    return (out[1], out[0], out[2]) if compute_uv else out[0]


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    a = to_array(a, "lax.linalg.triangular_solve")
    b = to_array(b, "lax.linalg.triangular_solve")
    return bind(P["triangular_solve"], a, b, left_side=bool(left_side), lower=bool(lower),
                transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                unit_diagonal=bool(unit_diagonal))
