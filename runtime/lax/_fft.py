"""`kiln.lax.fft` and `kiln.lax.FftType`: JAX's lax-level FFT over the trailing axes.

`fft(x, fft_type, fft_lengths)` converts `x` as JAX does (RFFT: to an inexact dtype, refusing
complex input; the others: to a complex dtype), returns it unchanged for no lengths, and binds
the `fft` primitive (compiler/primitives/fft.py), whose param is the type's name."""
import enum

import numpy as np

from ..array import to_array
from ..dispatch import bind
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES as P
from ._ops import convert_element_type

__all__ = ["FftType", "fft"]


class FftType(enum.IntEnum):
    """Which FFT to perform (JAX's `jax.lax.FftType`)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_BY_NAME = {"fft": FftType.FFT, "ifft": FftType.IFFT, "rfft": FftType.RFFT,
            "irfft": FftType.IRFFT}


def _fft_type(fft_type):
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        typ = _BY_NAME.get(fft_type.lower()) if fft_type in (
            *_BY_NAME, *(k.upper() for k in _BY_NAME)) else None
        if typ is None:
            raise ValueError(f"Unknown FFT type '{fft_type}'")
        return typ
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def fft(x, fft_type, fft_lengths):
    typ = _fft_type(fft_type)
    x = to_array(x, "lax.fft")
    if typ == FftType.RFFT:
        if dtypes.is_complex(x.dtype):
            raise ValueError("only real valued inputs supported for rfft")
        if not dtypes.is_inexact(x.dtype):
            x = convert_element_type(x, dtypes.default_float())
    elif not dtypes.is_complex(x.dtype):   # JAX's to_complex_dtype: the same precision
        x = convert_element_type(x, (np.complex128 if x.dtype == np.float64 else np.complex64)
                                 if dtypes.is_inexact(x.dtype) else dtypes.default_complex())
    fft_lengths = tuple(int(n) for n in fft_lengths)
    if not fft_lengths:
        return x
    return bind(P["fft"], x, fft_type=typ.name, fft_lengths=fft_lengths)
