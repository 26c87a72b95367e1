"""`kiln.scipy.cluster.vq`: `vq`, vector quantisation as `jax.scipy.cluster.vq` has it: each
observation's nearest code (Euclidean distance; the first on ties) and that distance."""
from ._vq import *  # noqa: F401,F403
from ._vq import __all__  # noqa: F401
from ...wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
