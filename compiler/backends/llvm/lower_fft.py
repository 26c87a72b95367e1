"""fft: calls of the runtime library's FFT kernel (fft_kernel.py) over the transformed axes.

Each call transforms one axis a of a row-major array, seen as [outer, n, inner] (the axes
before a, a itself, the axes after it): one call of `kiln_fft_<complex dtype>`, which
transforms the outer * inner lines natively, in groups of adjacent lines spread over the
thread pool. The calls, last axis first (`_calls`):
- FFT/IFFT: the first reads the operand and writes the result; the others transform the
  result in place; IFFT's calls each divide by their length. A single line of a power of
  two n >= FOUR_STEP takes two calls instead (`_four_step`): n = n1 n2, the n2 columns of
  [n1, n2] (length n1) into the scratch memory, each result times W_n^(k1 j2), then its
  n1 rows (length n2) into the result, written transposed, so that X[k1 + n1 k2] lands in
  place: two passes of short lines that stay in cache and split over threads, instead of
  log4(n) passes over the whole line;
- RFFT: the last axis (`_real_lines`): an even n as the complex transform of length n / 2
  of the real line read as complex numbers (four steps when long), then the kernel's
  real_split mode in place; an odd n as real lines; then the other axes in place on the
  result (complex);
- IRFFT: the other axes first (inverse, into a complex copy of the operand in the equation's
  scratch memory when there are any), then the last axis, Hermitian lines into real lines of
  n in the result.
The scratch memory holds IRFFT's copy or the four-step intermediate (`_lead_bytes`), then
the kernel's work space (the largest any call needs: line buffers per task, twiddle tables,
Bluestein's chirp and filter). A transform over a length-0 axis leaves an empty result, or a
result of zeros (RFFT of an empty line).
"""
import math
from typing import NamedTuple, Optional

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import fft_kernel
from . import ltypes as T
from .lower_fused import fill

ALIGN = 64
FOUR_STEP = 1 << 16   # single lines this long (and longer) take the four-step path
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}


def _complex_dtype(eqn):
    dtype = eqn.invars[0].aval.dtype if eqn.params["fft_type"] == "IRFFT" else \
        eqn.outvars[0].aval.dtype
    return np.dtype(dtype)


class _Call(NamedTuple):
    """One kernel call (fft_kernel.emit_call's arguments); src and dst are "x", "out" or
    "scratch" (the operand, the result, the lead of the scratch memory)."""
    src: str
    dst: str
    outer: int
    inner: int
    n: int
    len_in: int
    len_out: int
    mode: str
    scale: float
    out_row: Optional[int] = None
    out_stride: Optional[int] = None
    twist: int = 0


def _axis_call(src, dst, shape, axis, mode, len_out=None, n=None):
    """The call transforming `axis` of the row-major `shape` (the source's)."""
    n = shape[axis] if n is None else n
    return _Call(src, dst, math.prod(shape[:axis]), math.prod(shape[axis + 1:]), n,
                 shape[axis], shape[axis] if len_out is None else len_out, mode,
                 1.0 / n if mode in ("inverse", "real_inverse") else 1.0)


def _four_step(call):
    """A single long line of a power-of-two length N = n1 n2 as two calls through the
    scratch memory: the n2 columns of [n1, n2] (length n1), each result times W_N^(k1 j2),
    then the n1 rows (length n2) written transposed: X[k1 + n1 k2]."""
    n = call.n
    n1 = 1 << ((n.bit_length() - 1 + 1) // 2)
    n2 = n // n1
    return [_Call(call.src, "scratch", 1, n2, n1, n1, n1, call.mode, 1.0, twist=n),
            _Call("scratch", call.dst, n1, 1, n2, n2, n2, call.mode, call.scale, out_row=1,
                  out_stride=n1)]


def _long(call):
    return (call.mode in ("forward", "inverse") and call.outer * call.inner == 1
            and call.n >= FOUR_STEP and call.n & (call.n - 1) == 0)


def _real_lines(shape, len_out):
    """RFFT's last axis into the result. An even length n as the transform of length
    h = n / 2 of the real lines read as complex numbers (four steps when long) into the
    result's rows, then the kernel's real_split in place; an odd one directly."""
    n = shape[-1]
    if n % 2:
        return [_axis_call("x", "out", shape, len(shape) - 1, "real_forward", len_out)]
    outer, h = math.prod(shape[:-1]), n // 2
    half = _Call("x", "out", outer, 1, h, h, h, "forward", 1.0, out_row=len_out)
    return (_four_step(half) if _long(half) else [half]) + \
        [_Call("out", "out", outer, 1, n, len_out, len_out, "real_split", 1.0)]


def _calls(eqn):
    """The kernel calls, in order. The axes, last first:
    - FFT/IFFT: the operand into the result, then the result in place; a single long line
      in four steps (`_four_step`), through the scratch memory;
    - RFFT: the last axis into the result (`_real_lines`), then the other axes in place;
    - IRFFT: the other axes into IRFFT's copy (the scratch memory), then the last one."""
    x, out = eqn.invars[0].aval, eqn.outvars[0].aval
    fft_type, fft_lengths = eqn.params["fft_type"], eqn.params["fft_lengths"]
    ndim, k = x.ndim, len(fft_lengths)
    axes = list(range(ndim - k, ndim))
    if fft_type in ("FFT", "IFFT"):
        mode = "forward" if fft_type == "FFT" else "inverse"
        calls = [_axis_call("x" if axis == ndim - 1 else "out", "out", x.shape, axis, mode)
                 for axis in reversed(axes)]
        return [step for call in calls for step in (_four_step(call) if _long(call)
                                                    else [call])]
    if fft_type == "RFFT":
        return _real_lines(x.shape, out.shape[-1]) + \
            [_axis_call("out", "out", out.shape, axis, "forward") for axis in reversed(axes[:-1])]
    return [_axis_call("scratch" if i else "x", "scratch", x.shape, axis, "inverse")
            for i, axis in enumerate(reversed(axes[:-1]))] + \
        [_axis_call("x" if k == 1 else "scratch", "out", x.shape, ndim - 1, "real_inverse",
                    fft_lengths[-1], fft_lengths[-1])]


def _lead_bytes(eqn):
    """Bytes of the scratch memory before the kernel's work space: IRFFT's complex copy of
    its operand, or a four-step transform's intermediate (0 when there is none)."""
    x = eqn.invars[0].aval
    if eqn.params["fft_type"] == "IRFFT" and len(eqn.params["fft_lengths"]) > 1:
        size = x.size * x.dtype.itemsize
    elif any(call.twist for call in _calls(eqn)):
        size = x.size * _complex_dtype(eqn).itemsize
    else:
        return 0
    return -(-size // ALIGN) * ALIGN


def _scratch_bytes(eqn):
    dtype = _complex_dtype(eqn)
    return _lead_bytes(eqn) + max(
        fft_kernel.work_bytes(dtype, call.outer, call.inner, call.n, call.twist, call.mode)
        for call in _calls(eqn))


def _fft(ctx, outs, ins, *, fft_type, fft_lengths):
    b = ctx.builder
    out, x = outs[0], ins[0]
    if out.aval.size == 0:
        return
    if x.aval.size == 0 or 0 in fft_lengths:
        fill(b, out, T.const(out.aval.dtype, 0))
        return
    dtype = _complex_dtype(ctx.eqn)
    work = b.gep(ctx.scratch, [T.i64(_lead_bytes(ctx.eqn))], inbounds=True, source_etype=T.I8)
    pointers = {"x": x.ptr, "out": out.ptr, "scratch": ctx.scratch}
    for call in _calls(ctx.eqn):
        fft_kernel.emit_call(b, dtype, pointers[call.src], pointers[call.dst], call.outer,
                             call.inner, call.n, call.len_in, call.len_out, call.mode,
                             call.scale, work, call.out_row, call.out_stride, call.twist)


LLVM[PRIMITIVES["fft"]] = _fft
LLVM_SCRATCH[PRIMITIVES["fft"]] = _scratch_bytes
