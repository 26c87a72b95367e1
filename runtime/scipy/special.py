"""`kiln.scipy.special`: SciPy's special functions as JAX has them (`jax.scipy.special`).

Written in plain Python over `kiln.lax` primitives (`erf`, `erfc`, `erf_inv`, `lgamma`,
`digamma`, `logistic`, ...) and `kiln.numpy`, following JAX's formulas so that values, dtypes and
weak types agree with JAX: `ndtr` switches between `erf` and `erfc` at |x| = 1/sqrt(2), `ndtri`
uses Cephes' piecewise rational approximations, `log_ndtr` an asymptotic series in the far
left tail. The series, continued-fraction, quadrature and rational-approximation functions
(`_special_series`, `_special_integrals`, `_special_hyper`) say their methods in their modules'
docstrings. Constants are built in the argument's dtype (JAX's `_const`): a weakly typed scalar
argument keeps its weak type. `logsumexp` is `kiln.nn.logsumexp`. `gamma` and `loggamma` of
complex arguments are JAX's Lanczos approximation with reflection (`loggamma` on SciPy's
principal branch, shifted right of Re z = 1/2 in a `lax.while_loop`); `erfcx` of a complex
argument is `wofz(iz)`.

(The names are defined in `_special`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._special import *  # noqa: F401,F403
from ._special import __all__ as _base
from ._special_closed import *  # noqa: F401,F403
from ._special_closed import __all__ as _closed
from ._special_series import *  # noqa: F401,F403
from ._special_series import __all__ as _series
from ._special_bessel import *  # noqa: F401,F403
from ._special_bessel import __all__ as _bessel
from ._special_integrals import *  # noqa: F401,F403
from ._special_integrals import __all__ as _integrals
from ._special_hyper import *  # noqa: F401,F403
from ._special_hyper import __all__ as _hyper
from ._special_hyp2f1 import *  # noqa: F401,F403
from ._special_hyp2f1 import __all__ as _hyp2f1
from ._special_harmonics import *  # noqa: F401,F403
from ._special_harmonics import __all__ as _harmonics
from ..wrappers import user_facing_names  # noqa: E402

__all__ = _base + _closed + _series + _bessel + _integrals + _hyper + _hyp2f1 + _harmonics
user_facing_names(globals())

from ..eager_tiers import tier_names  # noqa: E402

# Eager calls of `gammasgn` (comparisons and selections) compile once a signature repeats
# (eager_tiers.py), with the eager bits. The other functions JAX jits (expi, expn, sici,
# hyp1f1, hyp2f1, bessel_jn) run exp, log or pow, which round otherwise when compiled, and
# stay eager (docs/performance.md).
tier_names(globals(), {"gammasgn": ()})

from ..eager_tiers import tier_composites  # noqa: E402

# The others run as one unit from the second eager call of a signature, with the eager bits
# (eager_tiers.composite).
tier_composites(globals())
del tier_composites
del user_facing_names, tier_names, _base, _closed, _series, _bessel, _integrals, _hyper, _hyp2f1, _harmonics
