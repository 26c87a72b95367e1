"""LLVM types of kiln's dtypes, and scalar constants.

In registers a bool is an `i1`, integers are `iN` (LLVM integers carry no sign: the dtype says
which instructions to use), floats are `half`/`float`/`double`, and complex64/complex128 are the
literal structs `{float, float}`/`{double, double}` (real part first: NumPy's layout, so memory
holds the same type; lower_complex.py). In memory a bool takes one byte (`i8` holding 0 or 1),
as in NumPy.
"""
import numpy as np
import llvmlite.ir as ir

from ...errors import BackendUnsupportedError

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_FLOATS = {2: ir.HalfType(), 4: ir.FloatType(), 8: ir.DoubleType()}


def unsupported(what, dtype, info=None):
    dtype = np.dtype(dtype)
    avoid = " or avoid complex numbers in it" if dtype.kind == "c" else ""
    return BackendUnsupportedError(
        f"the LLVM backend cannot lower {what} on {dtype} values yet", info,
        f"Compile this function with kiln.jit(..., backend='reference'){avoid}.")


def reg_type(dtype, what="this operation"):
    """The LLVM type of a `dtype` value in a register."""
    dtype = np.dtype(dtype)
    kind = dtype.kind
    if kind == "b":
        return I1
    if kind in "iu":
        return ir.IntType(dtype.itemsize * 8)
    if kind == "f":
        return _FLOATS[dtype.itemsize]
    if kind == "c":
        part = _FLOATS[dtype.itemsize // 2]
        return ir.LiteralStructType([part, part])
    if kind == "O":   # reverse mode's tapes: pointers (lower_tapes.py), moved as 8-byte words
        return I64
    raise unsupported(what, dtype)


def mem_type(dtype, what="this operation"):
    """The LLVM type of one `dtype` element in memory."""
    return I8 if np.dtype(dtype).kind == "b" else reg_type(dtype, what)


def const(dtype, value):
    """The register constant `value` of `dtype` (NaN and infinities included)."""
    dtype = np.dtype(dtype)
    ty = reg_type(dtype)
    if dtype.kind == "b":
        return ir.Constant(ty, int(bool(value)))
    if dtype.kind in "iu":
        return ir.Constant(ty, int(np.asarray(value).astype(dtype).view(_unsigned(dtype))))
    if dtype.kind == "c":
        z = np.asarray(value).astype(dtype)
        return ir.Constant(ty, [ir.Constant(ty.elements[0], float(z.real)),
                                ir.Constant(ty.elements[1], float(z.imag))])
    return ir.Constant(ty, float(np.asarray(value, dtype)))


def _unsigned(dtype):
    return np.dtype(f"u{dtype.itemsize}")


def i64(value):
    return ir.Constant(I64, int(value))


def is_float(dtype):
    return np.dtype(dtype).kind == "f"


def is_signed(dtype):
    return np.dtype(dtype).kind == "i"


def bits(dtype):
    return np.dtype(dtype).itemsize * 8
