"""`kiln.scipy.optimize`: `minimize` with JAX's methods, "BFGS" and
"l-bfgs-experimental-do-not-rely-on-this", returning JAX's `OptimizeResults`.

The minimisers (`_bfgs`) and their strong-Wolfe line search (`_line_search`) follow JAX's
algorithms step by step over `kiln.numpy` and `lax.while_loop`, so `minimize` runs eagerly
and compiles under `jit`; gradients of `fun` come from `kiln.value_and_grad`.

(The names are defined in `_minimize`; `__all__` lists them.)"""
from ._minimize import *  # noqa: F401,F403
from ._minimize import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
