"""BLAS for generated code: OpenBLAS kernels reached through function pointers.

Two providers, both OpenBLAS's Fortran interface (every argument, scalars included, by pointer; no
hidden string-length arguments): NumPy's ILP64 OpenBLAS and SciPy's cython_blas, found by
blas_lookup.py (which needs no llvmlite, so kiln.aot uses it too). `library()` is the one in use,
`address(name)` gives a routine's address in it, and `int_type()` the IR integer type its
arguments take. The choice changes the emitted IR, so it is part of the disk cache's fingerprint. Generated code calls a routine
through the `kiln_<name>` extern global (externs.py): addresses are never baked into object code.

Convention. BLAS is column-major; kiln's arrays are row-major. A row-major r x c matrix with row
stride ld is, read column-major, its transpose (c x r, leading dimension ld). So the row-major
product C = op(A) @ op(B) (C: m x n, op(A): m x k) is computed as the column-major product
C^T = op(B)^T @ op(A)^T:
    gemm(tb, ta, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc)
with ta = 'T' when op(A) = A^T else 'N' (likewise tb), lda/ldb/ldc the row strides (in elements) of
A, B and C as stored. Likewise y = op(A) @ x for a row-major m x n matrix A is the column-major
y = op(A^T)^T x: gemv(flip(t), n, m, alpha, A, lda, x, incx, beta, y, incy).
`emit_gemm` and `emit_gemv` emit exactly these calls into LLVM IR from row-major arguments.

OpenBLAS runs on one thread: `address` sets its thread count to 1 when generated code first binds
a routine (NumPy's products in the same process, which share the library, then run on one thread
too). Large products are split into panels by kiln's own thread pool instead (lower_linalg.py,
pool.py), whose dynamic tasks survive a busy machine where OpenBLAS's static shares, spin-waiting
for a thread without a core, collapsed (up to 136 ms for a 2 ms MLP step). Concurrent calls from
several threads are safe in OpenBLAS (each call on one thread uses its own buffers). The one
exception, a single large LAPACK factorisation, runs on OpenBLAS's threads (lapack_threads.py).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

import functools

from . import blas_lookup, externs
from .blas_lookup import Library, _numpy_openblas, _scipy_cython_blas, library  # noqa: F401

I8 = ir.IntType(8)
PTR = ir.PointerType()
_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_SCALAR = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType(),
           np.dtype(np.complex64): ir.LiteralStructType([ir.FloatType()] * 2),
           np.dtype(np.complex128): ir.LiteralStructType([ir.DoubleType()] * 2)}
_TRANS = {False: ord("N"), True: ord("T")}


def address(name: str) -> int:
    """The address of BLAS routine `name` for generated code that is being loaded; the first
    one sets the library to one thread (see the module docstring)."""
    _one_thread()
    return blas_lookup.address(name)


@functools.cache
def _one_thread() -> int:
    """Sets the library to one thread; returns the count it had before (its own setting:
    OPENBLAS_NUM_THREADS, else the cores), 1 when it cannot say."""
    before = blas_lookup.openblas_threads() or 1
    setter = blas_lookup.thread_setter()
    if setter is not None:
        setter(1)
    return before


def int_type() -> ir.IntType:
    """The IR type of the library's INTEGER arguments."""
    return ir.IntType(library().int_bits)


def routine(kind: str, dtype) -> str:
    """'gemm', float32 -> 'sgemm' (complex64 -> 'cgemm'); a clear error for dtypes BLAS does
    not cover."""
    dtype = np.dtype(dtype)
    if dtype not in _PREFIX:
        raise TypeError(f"BLAS {kind} supports complex64 and complex128 as well as float32 and "
                        f"float64, not {dtype}")
    return _PREFIX[dtype] + kind


# -- IR emission -------------------------------------------------------------------------------------

def _int(builder: ir.IRBuilder, value) -> ir.Value:
    """A Fortran INTEGER from a Python int or an integer IR value."""
    integer = int_type()
    if not isinstance(value, ir.Value):
        return ir.Constant(integer, int(value))
    if value.type.width == integer.width:
        return value
    return (builder.trunc if value.type.width > integer.width else builder.sext)(value, integer)


def _leading(builder: ir.IRBuilder, value) -> ir.Value:
    """A leading dimension: BLAS requires it to be at least 1, even for empty matrices."""
    value = _int(builder, max(1, int(value)) if not isinstance(value, ir.Value) else value)
    if isinstance(value, ir.Constant):
        return value
    one = ir.Constant(value.type, 1)
    return builder.select(builder.icmp_signed("<", value, one), one, value)


_GEMM = ir.FunctionType(ir.VoidType(), [PTR] * 13)
_GEMV = ir.FunctionType(ir.VoidType(), [PTR] * 11)


def emit_gemm(builder: ir.IRBuilder, dtype, m, n, k, a, b, c, *, trans_a=False, trans_b=False,
              lda=None, ldb=None, ldc=None, alpha=1.0, beta=0.0) -> None:
    """Row-major C (m x n) = alpha * op(A) @ op(B) + beta * C, op(A) m x k, op(B) k x n.

    `a`, `b`, `c` are pointers; sizes and strides are Python ints or integer IR values; the leading
    dimensions (row strides in elements) default to the contiguous ones (op(A) = A^T stores A as k x m).
    `trans_a`/`trans_b` are bools or i1 values (then the leading dimensions are given).
    `alpha`/`beta` are Python floats or IR scalars of the dtype.
    """
    scalar = _SCALAR[np.dtype(dtype)]
    lda = (m if trans_a else k) if lda is None else lda
    ldb = (k if trans_b else n) if ldb is None else ldb
    ldc = n if ldc is None else ldc
    values = [_trans(builder, trans_b), _trans(builder, trans_a),
              _int(builder, n), _int(builder, m), _int(builder, k), _float(scalar, alpha), b,
              _leading(builder, ldb), a, _leading(builder, lda), _float(scalar, beta), c, _leading(builder, ldc)]
    _call(builder, routine("gemm", dtype), _GEMM, values)


def _trans(builder: ir.IRBuilder, flag) -> ir.Value:
    """BLAS's transpose character for a bool or an i1 value."""
    if isinstance(flag, ir.Value):
        return builder.select(flag, ir.Constant(I8, _TRANS[True]), ir.Constant(I8, _TRANS[False]))
    return ir.Constant(I8, _TRANS[flag])


def emit_gemv(builder: ir.IRBuilder, dtype, m, n, a, x, y, *, trans_a=False, lda=None, incx=1, incy=1,
              alpha=1.0, beta=0.0) -> None:
    """Row-major y = alpha * op(A) @ x + beta * y for A stored m x n (row stride lda, default n)."""
    scalar = _SCALAR[np.dtype(dtype)]
    lda = n if lda is None else lda
    length, inner = (n, m) if trans_a else (m, n)

    def gemv():
        values = [ir.Constant(I8, _TRANS[not trans_a]), _int(builder, n), _int(builder, m), _float(scalar, alpha),
                  a, _leading(builder, lda), x, _int(builder, incx), _float(scalar, beta), y, _int(builder, incy)]
        _call(builder, routine("gemv", dtype), _GEMV, values)

    def empty_sum():  # gemv returns at once when inner == 0, leaving y unscaled; gemm scales it
        emit_gemm(builder, dtype, length, 1, 0, a, x, y, ldb=incx, ldc=incy, alpha=alpha, beta=beta)

    if isinstance(inner, ir.Value):
        with builder.if_else(builder.icmp_signed("==", inner, ir.Constant(inner.type, 0))) as (empty, full):
            with empty:
                empty_sum()
            with full:
                gemv()
    else:
        (gemv if inner else empty_sum)()


def _float(scalar: ir.Type, value) -> ir.Value:
    """An alpha/beta argument: an IR value as it is, a Python number as a constant (complex
    for the complex routines: their scalars are (re, im) pairs)."""
    if isinstance(value, ir.Value):
        return value
    if isinstance(scalar, ir.LiteralStructType):
        part = scalar.elements[0]
        return ir.Constant(scalar, [ir.Constant(part, complex(value).real),
                                    ir.Constant(part, complex(value).imag)])
    return ir.Constant(scalar, float(value))


def _call(builder: ir.IRBuilder, name: str, function_type: ir.FunctionType, values: list[ir.Value]) -> None:
    """Fortran ABI: pass array pointers as they are and every scalar through a stack slot."""
    args = [v if isinstance(v.type, ir.PointerType) else externs.stack_slot(builder, v) for v in values]
    externs.call(builder, f"kiln_{name}", function_type, args)
