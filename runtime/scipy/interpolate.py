"""`kiln.scipy.interpolate`: `RegularGridInterpolator` as `jax.scipy.interpolate` has it
(methods "linear" and "nearest"; `_interpolate` describes it). It is a pytree, so an
interpolator can be passed to jitted functions."""
from ._interpolate import *  # noqa: F401,F403
from ._interpolate import __all__  # noqa: F401
