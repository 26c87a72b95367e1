"""`kiln.nn.initializers`: JAX's weight initializers.

An initializer is a function `init(key, shape, dtype=None)` returning an array of that shape
(dtype `None` means the default float dtype). The constructors here (`normal(stddev)`,
`variance_scaling(scale, mode, distribution)`, `glorot_uniform()`, ...) build such functions,
exactly as `jax.nn.initializers` does, drawing their random bits from `kiln.random`, so the same
key gives the same values as JAX. Shape bookkeeping (fan-in/fan-out) is static Python.


(The names are defined in `_initializers`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._initializers import *  # noqa: F401,F403
from ._initializers import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
