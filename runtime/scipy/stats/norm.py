"""`kiln.scipy.stats.norm`: the normal distribution with `loc` and `scale`, as
`jax.scipy.stats.norm` (densities over `kiln.lax`, the CDF family over `kiln.scipy.special`'s
`ndtr`, `log_ndtr` and `ndtri`).

(The names are defined in `_norm`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._norm import *  # noqa: F401,F403
from ._norm import __all__  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
