"""StableHLO rule of `fft` (compiler/primitives/fft.py): one `stablehlo.fft` with JAX's type
names (FFT, IFFT, RFFT, IRFFT) and lengths; XLA's IFFT divides by the product of the lengths
and its multi-axis IRFFT is Hermitian in the last axis only, as numpy.fft's `ifftn`/`irfftn`.
An empty operand or result is zeros (the reference's rule)."""
from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .types import tensor_type


def _fft(ctx, args, *, fft_type, fft_lengths):
    (x,) = args
    aval = ctx.out_avals[0]
    if x.aval.size == 0 or aval.size == 0:
        return [ctx.splat(0, aval)]
    lengths = [int(n) for n in fft_lengths]
    return [ctx.emit(f"stablehlo.fft {x}, type = {fft_type}, length = {lengths} : "
                     f"({x.type}) -> {tensor_type(aval)}", aval)]


STABLEHLO[PRIMITIVES["fft"]] = _fft
