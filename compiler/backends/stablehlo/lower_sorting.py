"""StableHLO rule of `sort` (compiler/primitives/sorting.py): one `stablehlo.sort` of all the
operands whose comparator orders the first `num_keys` lexicographically as JAX's does:
floating-point keys canonicalised (-0.0 to 0.0, every NaN to one NaN) and compared in
TOTALORDER, so NaNs sort last; complex keys by real part, then imaginary part."""
import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .lower_reductions import scalar
from .types import signedness


def _canonical(ctx, x):
    if x.aval.dtype.kind != "f":
        return x
    zero = ctx.constant(0, x.aval.dtype)
    x = ctx.select(ctx.compare("EQ", x, zero), zero, x)
    return ctx.select(ctx.compare("NE", x, x), ctx.constant(np.nan, x.aval.dtype), x)


def _parts(ctx, x):
    if x.aval.dtype.kind != "c":
        return [_canonical(ctx, x)]
    part = scalar(np.dtype(f"f{x.aval.dtype.itemsize // 2}"))
    return [_canonical(ctx, ctx.unary(op, x, part))
            for op in ("stablehlo.real", "stablehlo.imag")]


def _kind(x):
    return "TOTALORDER" if x.aval.dtype.kind == "f" else signedness(x.aval.dtype)


def _comparator(ctx, block, n, num_keys):
    pairs = []
    for k in range(num_keys):
        pairs += zip(_parts(ctx, block[2 * k]), _parts(ctx, block[2 * k + 1]))
    out = None
    for a, b in reversed(pairs):   # a < b, or a == b and the rest decides
        less = ctx.compare("LT", a, b, _kind(a))
        if out is not None:
            same = ctx.compare("EQ", a, b, _kind(a))
            less = ctx.binary("stablehlo.or", less, ctx.binary("stablehlo.and", same, out))
        out = less
    return [out]


def sort(ctx, args, *, dimension, is_stable=True, num_keys=1):
    block = [scalar(a.aval.dtype) for a in args for _ in (0, 1)]
    return ctx.generic("stablehlo.sort", list(args), [a.aval for a in args],
                       [(block, lambda b: _comparator(ctx, b, len(args), num_keys))],
                       f"dimension = {int(dimension)} : i64, is_stable = true")


STABLEHLO[PRIMITIVES["sort"]] = sort
