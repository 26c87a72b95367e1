"""`kiln.numpy.fft`: JAX 0.10.2's 18 names, over `kiln.lax.fft`.

The transforms (`fft`, `ifft`, `fft2`, `ifft2`, `fftn`, `ifftn`, `rfft`, `irfft`, `rfft2`,
`irfft2`, `rfftn`, `irfftn`, `hfft`, `ihfft`) follow JAX's `_fft_core`: the axes are moved to
the end, `n`/`s` crop or zero-pad them, the `fft` primitive transforms the trailing axes (in
groups of at most 3), `norm` ("backward", "ortho", "forward") scales the result, and the axes
move back. Real input to the complex transforms becomes complex; `rfft` refuses complex input.
`fftfreq`, `rfftfreq`, `fftshift` and `ifftshift` are NumPy's, over `kiln.numpy`.

(The names are defined in `_fft_namespace`, with the helpers they use, which stay out of this
namespace; `__all__` lists them.)"""
from ._fft_namespace import *  # noqa: F401,F403
from ._fft_namespace import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
