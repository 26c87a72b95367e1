"""`kiln.scipy.ndimage`: `map_coordinates` as `jax.scipy.ndimage` has it (orders 0 and 1; the
modes "constant", "nearest", "wrap", "mirror" and "reflect"), written over `kiln.numpy`
(`_ndimage` describes it)."""
from ._ndimage import *  # noqa: F401,F403
from ._ndimage import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
