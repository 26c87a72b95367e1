"""`kiln.numpy` counting and binning: bincount, digitize, histogram, histogram_bin_edges,
histogram2d, histogramdd, interp.

JAX's algorithms over `searchsorted` and scatter-add: `bincount` adds weights at the clipped
values (negative values count in bin 0, values past `length` are dropped; under `jit` pass
`length=`), a histogram finds each sample's bin with `searchsorted(side='right')`, puts a
sample equal to the last edge in the last bin and drops the two outer bins. `interp` is
piecewise linear between the points `searchsorted` finds.
"""
import operator

import numpy as np

from ..array import to_array
from ._core import check_arraylike, promote_dtypes_inexact
from .. import numpy as jnp
from ..sharding_types import out_sharding_keyword

_range = range   # the builtin (histogram's parameter `range` shadows it)

__all__ = ["bincount", "digitize", "histogram", "histogram_bin_edges", "histogram2d",
           "histogramdd", "interp"]


@out_sharding_keyword
def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed `weights`) of each non-negative integer value of 1-D `x`."""
    check_arraylike("bincount", x)
    x = to_array(x, "bincount")
    if x.dtype.kind not in "iub":
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = operator.index(minlength)
    if length is None:
        if x.size == 0:
            length = minlength
        else:
            length = max(int(jnp.max(x)) + 1, minlength)   # needs a concrete x
    length = operator.index(length)
    if weights is None:
        weights = jnp.ones_like(x, dtype=int)   # the default integer type, as JAX's
    else:
        weights = jnp.asarray(weights)
    return jnp.zeros(length, weights.dtype).at[jnp.clip(x, 0)].add(weights, mode="drop")


def digitize(x, bins, right=False, *, method=None):
    """The index of the bin of each value of `x` (increasing or decreasing `bins`)."""
    check_arraylike("digitize", x, bins)
    x, bins = to_array(x, "digitize"), to_array(bins, "digitize")
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    if bins.shape[0] == 0:
        return jnp.zeros(x.shape, dtype=jnp.int32)
    side = "left" if right else "right"   # NumPy: bins[i-1] <= x < bins[i] unless right
    kw = {} if method is None else {"method": method}
    return jnp.where(bins[-1] >= bins[0], jnp.searchsorted(bins, x, side=side, **kw),
                     bins.shape[0] - jnp.searchsorted(bins[::-1], x, side=side, **kw))


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002
    """The edges `histogram` uses: `bins` given, or `bins` equal bins over `range`."""
    check_arraylike("histogram_bin_edges", a)
    if not isinstance(bins, int):
        return jnp.asarray(bins)
    arr = jnp.ravel(to_array(a, "histogram_bin_edges"))
    dtype = jnp.result_type(arr.dtype, float)   # inexact, as JAX's: float16 stays float16
    if range is None:
        lo, hi = jnp.min(arr), jnp.max(arr)
    else:
        lo, hi = jnp.asarray(range[0], dtype), jnp.asarray(range[1], dtype)
    lo, hi = lo.astype(dtype), hi.astype(dtype)
    same = lo == hi
    lo = jnp.where(same, lo - 0.5, lo)
    hi = jnp.where(same, hi + 0.5, hi)
    return jnp.linspace(lo, hi, bins + 1, dtype=dtype)


def histogram(a, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """(counts, bin edges) of the values of `a`, optionally weighted or a density."""
    check_arraylike("histogram", a)
    arr = jnp.ravel(to_array(a, "histogram"))
    if weights is not None:
        weights = jnp.ravel(jnp.asarray(weights))
        if weights.shape != arr.shape:
            raise ValueError("weights should have the same shape as a.")
    edges = histogram_bin_edges(arr, bins, range, weights)
    idx = jnp.searchsorted(edges, arr, side="right")
    idx = jnp.where(arr == edges[-1], edges.shape[0] - 1, idx)
    w = jnp.ones(arr.shape, jnp.result_type(arr.dtype, float)) if weights is None else weights
    counts = jnp.zeros(edges.shape[0] + 1, w.dtype).at[idx].add(w)[1:-1]
    if density:
        counts = counts / jnp.diff(edges) / counts.sum()
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """The histogram of `(N, D)` samples over `D` axes: (counts of shape `bins`, edges)."""
    check_arraylike("histogramdd", sample)
    s = to_array(sample, "histogramdd")
    n, d = s.shape
    if weights is not None:
        weights = jnp.ravel(jnp.asarray(weights))
        if weights.shape != (n,):
            raise ValueError("should have one weight for each sample.")
    if getattr(bins, "ndim", 0) == 2:   # one row of edges per dimension
        bins = list(bins)
    bins_per = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(bins_per) != d:
        raise ValueError("should be a bin for each dimension.")
    ranges = [None] * d if range is None else list(range)
    edges, idx = [], []
    for k in _range(d):
        e = histogram_bin_edges(s[:, k], bins_per[k], ranges[k])
        i = jnp.searchsorted(e, s[:, k], side="right")
        i = jnp.where(s[:, k] == e[-1], e.shape[0] - 1, i)
        edges.append(e)
        idx.append(i)
    dims = tuple(e.shape[0] + 1 for e in edges)
    flat = jnp.ravel_multi_index(tuple(idx), dims, mode="clip")
    w = jnp.ones(n, int) if weights is None else weights   # default-integer counts, as JAX's
    counts = jnp.zeros(int(np.prod(dims)), w.dtype).at[flat].add(w)
    counts = jnp.reshape(counts, dims)[(slice(1, -1),) * d]
    if density:
        counts = counts / counts.sum()
        for k, e in enumerate(edges):
            shape = [1] * d
            shape[k] = -1
            counts = counts / jnp.reshape(jnp.diff(e), shape)
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    """The 2-D histogram of the points (x, y): (counts, x edges, y edges)."""
    check_arraylike("histogram2d", x, y)
    xs, ys = to_array(x, "histogram2d"), to_array(y, "histogram2d")
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):   # one array of edges used for both axes
        bins = [bins, bins]
    counts, edges = histogramdd(jnp.stack([xs, ys], axis=1), bins, range, weights, density)
    return counts, edges[0], edges[1]


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise linear interpolant through (`xp`, `fp`) at `x` (NumPy's `interp`)."""
    check_arraylike("interp", x, xp, fp)
    x, xp, fp = (to_array(v, "interp") for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape != fp.shape:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    # JAX's promotion: x and xp to one inexact type, fp to its own (float16 stays float16).
    x, xp = promote_dtypes_inexact(x, xp)
    fp, = promote_dtypes_inexact(fp)
    if x.dtype.kind == "c":
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        if left is not None or right is not None:
            raise ValueError("interp: left and right must be None if period is specified.")
        period = jnp.abs(period)
        x = x % period
        xp = xp % period
        order = jnp.argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    i = jnp.clip(jnp.searchsorted(xp, x, side="right"), 1, xp.shape[0] - 1)
    df = fp[i] - fp[i - 1]
    dx = xp[i] - xp[i - 1]
    delta = x - xp[i - 1]
    eps = np.spacing(np.finfo(xp.dtype).eps)
    dx0 = jnp.abs(dx) <= eps
    f = jnp.where(dx0, fp[i - 1], fp[i - 1] + (delta / jnp.where(dx0, 1, dx)) * df)
    if period is None:
        f = jnp.where(x < xp[0], fp[0] if left is None else left, f)
        f = jnp.where(x > xp[-1], fp[-1] if right is None else right, f)
    return f
