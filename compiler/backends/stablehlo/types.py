"""MLIR spellings of kiln's types and constants, as JAX prints them.

    element_type(dtype)    f32, i32, ui8, i1, complex<f32>
    tensor_type(aval)      tensor<2x3xf32>, tensor<f32> (rank 0), tensor<0x3xi32>
    scalar_text(v, dtype)  one element of a `dense<...>` constant: 1, true, 0x3F800000, (hex
                           of the bit pattern for floats, so every value round-trips exactly:
                           NaN payloads, -0.0, infinities); complex constants are built
                           from two real ones (emitter.py)
    signedness(dtype)      the comparison type a `stablehlo.compare` needs: FLOAT, SIGNED,
                           UNSIGNED
"""
import numpy as np

_ELEMENT = {"b": lambda d: "i1", "i": lambda d: f"i{d.itemsize * 8}",
            "u": lambda d: f"ui{d.itemsize * 8}", "f": lambda d: f"f{d.itemsize * 8}",
            "c": lambda d: f"complex<f{d.itemsize * 4}>"}

_COMPARE = {"b": "UNSIGNED", "i": "SIGNED", "u": "UNSIGNED", "f": "FLOAT", "c": "FLOAT"}


def element_type(dtype):
    dtype = np.dtype(dtype)
    return _ELEMENT[dtype.kind](dtype)


def shape_type(shape, dtype):
    dims = "".join(f"{int(d)}x" for d in shape)
    return f"tensor<{dims}{element_type(dtype)}>"


def tensor_type(aval):
    return shape_type(aval.shape, aval.dtype)


def signedness(dtype):
    return _COMPARE[np.dtype(dtype).kind]


def _float_hex(value, dtype):
    bits = np.asarray(value, dtype).reshape(1).view(f"u{dtype.itemsize}")[0]
    return f"0x{int(bits):0{dtype.itemsize * 2}X}"


def scalar_text(value, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "true" if bool(value) else "false"
    if dtype.kind in "iu":
        return str(int(np.asarray(value, dtype)))
    return _float_hex(value, dtype)
