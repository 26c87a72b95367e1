"""`kiln.scipy.fft`: the discrete cosine transform as `jax.scipy.fft` has it (`dct`, `dctn`,
`idct`, `idctn`, type 2, norms None/"backward" and "ortho"), through `kiln.numpy.fft`
(`_fft` describes the algorithm)."""
from ._fft import *  # noqa: F401,F403
from ._fft import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
