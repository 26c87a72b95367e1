"""fft: passes of the runtime library's FFT kernel (fft_kernel.py) over the transformed axes.

Each pass transforms one axis a of a row-major array, seen as [outer, n, inner] (the axes
before a, a itself, the axes after it): one call of `kiln_fft_<complex dtype>`, which loops
over the outer * inner lines natively. The passes, last axis first:
- FFT/IFFT: the first pass reads the operand and writes the result; the others transform the
  result in place; IFFT's passes each divide by their length;
- RFFT: the last axis, real lines of n into n // 2 + 1 coefficients of the result; then the
  other axes in place on the result (complex);
- IRFFT: the other axes first (inverse, into a complex copy of the operand in the equation's
  scratch memory when there are any), then the last axis, Hermitian lines into real lines of
  n in the result.
The scratch memory holds the kernel's work space (the largest any axis needs: line buffers,
twiddle table, Bluestein's chirp and filter) and IRFFT's copy. A transform over a length-0 axis leaves an empty result,
or a result of zeros (RFFT of an empty line).
"""
import math

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import fft_kernel
from . import ltypes as T
from .lower_fused import fill

ALIGN = 64
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}


def _complex_dtype(eqn):
    dtype = eqn.invars[0].aval.dtype if eqn.params["fft_type"] == "IRFFT" else \
        eqn.outvars[0].aval.dtype
    return np.dtype(dtype)


def _copy_bytes(eqn):
    """Bytes of IRFFT's complex copy of its operand (0 when it needs none)."""
    x = eqn.invars[0].aval
    if eqn.params["fft_type"] != "IRFFT" or len(eqn.params["fft_lengths"]) == 1:
        return 0
    return -(-x.size * x.dtype.itemsize // ALIGN) * ALIGN


def _passes(eqn):
    """The kernel calls, in order: (source, destination, the source's shape, axis, mode,
    len_out, n), with "x", "out" and "scratch" for the operand, the result and IRFFT's copy."""
    x, out = eqn.invars[0].aval, eqn.outvars[0].aval
    fft_type, fft_lengths = eqn.params["fft_type"], eqn.params["fft_lengths"]
    ndim, k = x.ndim, len(fft_lengths)
    axes = list(range(ndim - k, ndim))
    if fft_type in ("FFT", "IFFT"):
        mode = "forward" if fft_type == "FFT" else "inverse"
        return [("x" if axis == ndim - 1 else "out", "out", x.shape, axis, mode,
                 x.shape[axis], x.shape[axis]) for axis in reversed(axes)]
    if fft_type == "RFFT":
        return [("x", "out", x.shape, ndim - 1, "real_forward", out.shape[-1], x.shape[-1])] + \
            [("out", "out", out.shape, axis, "forward", out.shape[axis], out.shape[axis])
             for axis in reversed(axes[:-1])]
    return [("scratch" if i else "x", "scratch", x.shape, axis, "inverse", x.shape[axis],
             x.shape[axis]) for i, axis in enumerate(reversed(axes[:-1]))] + \
        [("x" if k == 1 else "scratch", "out", x.shape, ndim - 1, "real_inverse",
          fft_lengths[-1], fft_lengths[-1])]


def _scratch_bytes(eqn):
    dtype = _complex_dtype(eqn)
    return _copy_bytes(eqn) + max(
        fft_kernel.work_bytes(dtype, math.prod(shape[:axis]), math.prod(shape[axis + 1:]), n)
        for _, _, shape, axis, _, _, n in _passes(eqn))


def _fft(ctx, outs, ins, *, fft_type, fft_lengths):
    b = ctx.builder
    out, x = outs[0], ins[0]
    if out.aval.size == 0:
        return
    if x.aval.size == 0 or 0 in fft_lengths:
        fill(b, out, T.const(out.aval.dtype, 0))
        return
    dtype = _complex_dtype(ctx.eqn)
    work = b.gep(ctx.scratch, [T.i64(_copy_bytes(ctx.eqn))], inbounds=True, source_etype=T.I8)
    pointers = {"x": x.ptr, "out": out.ptr, "scratch": ctx.scratch}
    for src, dst, shape, axis, mode, len_out, n in _passes(ctx.eqn):
        inverse = mode in ("inverse", "real_inverse")
        fft_kernel.emit_call(b, dtype, pointers[src], pointers[dst], math.prod(shape[:axis]),
                             math.prod(shape[axis + 1:]), n, shape[axis], len_out, mode,
                             1.0 / n if inverse else 1.0, work)


LLVM[PRIMITIVES["fft"]] = _fft
LLVM_SCRATCH[PRIMITIVES["fft"]] = _scratch_bytes
