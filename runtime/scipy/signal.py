"""`kiln.scipy.signal`: convolution, correlation and detrending as `jax.scipy.signal` has
them. `convolve`/`correlate` (N-D) and the 2-D forms run `lax.conv_general_dilated` (complex
inputs as four real correlations), with JAX's rule that one input must be at least as large
as the other in every dimension; `fftconvolve` multiplies `kiln.numpy.fft` transforms;
`detrend` subtracts a mean or a least-squares line per segment. `stft`, `csd` and `welch`
(in `_spectral`) cut the signal into windowed segments and transform them with
`kiln.numpy.fft`; `istft` overlap-adds the inverted segments.

(The names are defined in `_signal`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._signal import *  # noqa: F401,F403
from ._signal import __all__ as _direct
from ._spectral import *  # noqa: F401,F403
from ._spectral import __all__ as _spectral
from ..wrappers import user_facing_names  # noqa: E402

__all__ = _direct + _spectral
user_facing_names(globals())
del user_facing_names, _direct, _spectral
