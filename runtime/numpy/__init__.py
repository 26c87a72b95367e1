"""`kiln.numpy`: the NumPy API as JAX has it, written in plain Python over `kiln.lax`.

Eagerly, every function runs at once on NumPy buffers; under `kiln.jit` the compiler
specialises the same Python source. Each sub-module holds one family and lists its public names
in `__all__`.
"""
from ._dtypes import *  # noqa: F401,F403
from ._dtypes import (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,  # noqa: F401
                      float16, float32, float64, complex64, complex128, dtype, issubdtype,
                      promote_types, result_type, finfo, iinfo)
from ._ufuncs import *  # noqa: F401,F403
from ._creation import *  # noqa: F401,F403
from ._reductions import *  # noqa: F401,F403
from ._shape import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from ._sorting import *  # noqa: F401,F403
from ._indexing import *  # noqa: F401,F403
from ._setops import *  # noqa: F401,F403
from ._differences import *  # noqa: F401,F403
from ._histograms import *  # noqa: F401,F403
from ._editing import *  # noqa: F401,F403
from ._index_tricks import *  # noqa: F401,F403
from ._functional import *  # noqa: F401,F403
from ._windows import *  # noqa: F401,F403
from ._polynomial import *  # noqa: F401,F403
from ._predicates import *  # noqa: F401,F403
from ._host_io import *  # noqa: F401,F403
from ._ufunc import *  # noqa: F401,F403  (after the rest: rebinds add, multiply, ... as ufuncs)
from . import linalg, fft  # noqa: F401
from ..array import Array as ndarray  # noqa: F401

import numpy as _np

pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

from ..wrappers import user_facing_names  # noqa: E402

# Eager calls of these functions show the user's frames, not kiln's (wrappers.user_facing).
__all__ = [name for name in dir() if not name.startswith("_") and name != "user_facing_names"]
user_facing_names(globals())
del user_facing_names

from ..eager_tiers import tier_names  # noqa: E402

# Eager calls of these compile once a signature repeats (eager_tiers.py), with the static
# parameters JAX 0.10.2's jit takes for each. Only functions whose compiled code gives the
# eager bits are here: comparisons, selections, sorts, integer arithmetic, elementwise + - * /
# and sqrt, cumulative sums. Those that run exp, log, pow and the like, sum along an axis
# (var, mean, cov, trapezoid), multiply matrices or factorise them round otherwise when
# compiled, and stay eager (docs/performance.md).
_QUANTILE = ("axis", "overwrite_input", "keepdims", "method")
tier_names(globals(), {
    "diff": ("n", "axis"), "ediff1d": (), "gradient": ("axis", "edge_order"),
    "isclose": ("equal_nan",), "allclose": ("equal_nan",), "round": ("decimals",),
    "around": ("decimals",), "nan_to_num": (), "unwrap": ("axis",),
    "cross": ("axisa", "axisb", "axisc", "axis"), "kron": (), "vander": ("N", "increasing"),
    "gcd": (), "lcm": (), "fmin": (), "fmax": (), "packbits": ("axis", "bitorder"),
    "unpackbits": ("axis", "count", "bitorder"),
    "searchsorted": ("side", "method"), "digitize": ("right", "method"),
    "isin": ("assume_unique", "invert", "method"), "lexsort": ("axis",),
    "partition": ("kth", "axis"), "argpartition": ("kth", "axis"),
    "ptp": ("axis", "keepdims"), "count_nonzero": ("axis", "keepdims"),
    "nanmin": ("axis", "keepdims"), "nanmax": ("axis", "keepdims"),
    "nancumsum": ("axis", "dtype"), "nancumprod": ("axis", "dtype"),
    "quantile": _QUANTILE, "nanquantile": _QUANTILE, "percentile": _QUANTILE,
    "nanpercentile": _QUANTILE, "median": ("axis", "overwrite_input", "keepdims"),
    "nanmedian": ("axis", "overwrite_input", "keepdims"),
    "linspace": ("num", "endpoint", "retstep", "dtype", "axis", "device"),
    "polyval": ("unroll",), "polyint": ("m",), "polyder": ("m",), "polyadd": (), "polysub": (),
})
del tier_names, _QUANTILE

from ..eager_tiers import tier_composites  # noqa: E402
from . import _host_io  # noqa: E402

# Every other function runs as one unit from the second eager call of a signature, with the
# eager bits (eager_tiers.composite); not those that read or write files or print options,
# nor the constructors whose eager result is a lazily broadcast array (a unit would stage it
# as a constant and copy it: docs/performance.md, broadcast inputs).
_BROADCAST_MAKERS = ("zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
                     "empty_like", "broadcast_to")
tier_composites(globals(), exclude=tuple(_host_io.__all__) + _BROADCAST_MAKERS)
del _BROADCAST_MAKERS
del tier_composites
