"""`kiln.scipy.spatial.transform`: `Rotation` and `Slerp` as `jax.scipy.spatial.transform`
has them (NamedTuples, so pytrees; `_transform` describes them)."""
from ._transform import *  # noqa: F401,F403
from ._transform import __all__  # noqa: F401
