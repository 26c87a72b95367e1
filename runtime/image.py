"""`kiln.image`: image resampling as `jax.image` has it: `resize`, `scale_and_translate` and
`ResizeMethod`.

Resampling is separable. For each resampled dimension of input size `m` and output size `n`, an
`(m, n)` weight matrix says how much input sample `i` contributes to output sample `j`, and the
image is contracted with it along that dimension. Output sample `j`'s centre, mapped back into
input coordinates, is `s_j = (j + 0.5 - translation) / scale - 0.5`; its weight on input `i` is
`kernel(|s_j - i| / k)`, where `k = max(1 / scale, 1)` with `antialias` (the kernel widens by
the downsampling factor, so it low-pass filters) and `k = 1` without. Each column is normalised
to sum to 1 (a column whose sum is within 1000 float32 epsilons of 0 becomes 0), and outputs
whose centre lies outside `[-0.5, m - 0.5]` get no weight. The kernels: linear (the triangle
`max(0, 1 - |x|)`), cubic (Keys' kernel with `a = -0.5`), lanczos3 and lanczos5
(`sinc(x) sinc(x / r)` for `|x| <= r`), cubic-pytorch (Keys with `a = -0.75`; without
antialias the edge samples repeat outwards instead of being cut off, as PyTorch and OpenCV do)
and area (the overlap of the output pixel's extent with each input pixel's). Nearest-neighbour
resizing takes input sample `floor((j + 0.5) * m / n)` (in float32) and keeps the image's dtype;
the other methods compute in the image's inexact dtype (integers become float32).
"""
import enum

import numpy as np

from . import lax
from . import numpy as jnp
from .numpy._core import canonicalize_axis, promote_dtypes_inexact

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]

_EPS_FLOOR = 1000.0 * float(np.finfo(np.float32).eps)


class ResizeMethod(enum.Enum):
    """How `resize` and `scale_and_translate` resample: NEAREST (the nearest input sample),
    LINEAR (triangle kernel), LANCZOS3 and LANCZOS5 (Lanczos kernels of radius 3 and 5), CUBIC
    (Keys' cubic kernel, a = -0.5), CUBIC_PYTORCH (a = -0.75 with repeated edges when not
    antialiasing) and AREA (the average of the input pixels an output pixel covers)."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str):
        """The method a string names ('nearest', 'linear', 'bilinear', 'trilinear',
        'triangle', 'lanczos3', 'lanczos5', 'cubic', 'bicubic', 'tricubic', 'cubic-pytorch',
        'bicubic-pytorch', 'area'); any other string is a ValueError."""
        for names, method in _NAMES:
            if s in names:
                return method
        raise ValueError(f'Unknown resize method "{s}"')


_NAMES = (
    (("nearest",), ResizeMethod.NEAREST),
    (("linear", "bilinear", "trilinear", "triangle"), ResizeMethod.LINEAR),
    (("lanczos3",), ResizeMethod.LANCZOS3),
    (("lanczos5",), ResizeMethod.LANCZOS5),
    (("cubic", "bicubic", "tricubic"), ResizeMethod.CUBIC),
    (("cubic-pytorch", "bicubic-pytorch"), ResizeMethod.CUBIC_PYTORCH),
    (("area",), ResizeMethod.AREA),
)


def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


def _keys_cubic(a):
    # Keys (1981): (a+2)|x|^3 - (a+3)|x|^2 + 1 on [0, 1), a|x|^3 - 5a|x|^2 + 8a|x| - 4a on [1, 2).
    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


def _lanczos(radius):
    # sinc(x) sinc(x / r) = r sin(pi x) sin(pi x / r) / (pi x)^2, 1 near 0, 0 beyond r.
    def kernel(x):
        num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x * x, 1)
        value = jnp.where(x > 1e-3, num / safe, 1)
        return jnp.where(x > radius, 0.0, value)
    return kernel


# method -> (kernel radius, kernel of |distance|; None for AREA, which uses pixel overlaps)
_KERNELS = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _keys_cubic(-0.75)),
    ResizeMethod.AREA: (1, None),
}


def _normalise(weights):
    total = jnp.sum(weights, axis=0, keepdims=True)
    scaled = weights / jnp.where(total != 0, total, 1)
    return jnp.where(jnp.abs(total) > _EPS_FLOOR, scaled, 0)


def _weights(in_size, out_size, scale, translation, kernel, antialias, pad):
    """The (in_size, out_size) weight matrix of one dimension; `pad` is the number of samples
    the edges repeat outwards (0: samples beyond the edges get no weight)."""
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    out_pos = jnp.arange(out_size, dtype=dtype)
    centre = (out_pos + 0.5) * inv_scale - translation * inv_scale - 0.5
    if kernel is None:
        # AREA: the length of [j, j + 1) / scale - t / scale overlapping [i, i + 1).
        left = out_pos * inv_scale - translation * inv_scale
        right = left + inv_scale
        in_left = jnp.arange(in_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum(right[None, :], in_left[:, None] + 1.0)
                              - jnp.maximum(left[None, :], in_left[:, None]))
    else:
        width = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
        positions = jnp.arange(-pad, in_size + pad, dtype=dtype)
        weights = kernel(jnp.abs(centre[None, :] - positions[:, None]) / width)
        if pad:
            # Fold the weights of the samples beyond each edge onto the edge sample.
            inner = weights[pad:pad + in_size]
            first = inner[:1] + jnp.sum(weights[:pad], axis=0, keepdims=True)
            last = inner[-1:] + jnp.sum(weights[pad + in_size:], axis=0, keepdims=True)
            if in_size == 1:
                weights = first + last - inner
            else:
                weights = jnp.concatenate([first, inner[1:-1], last], axis=0)
            return _normalise(weights)
    weights = _normalise(weights)
    inside = (centre >= -0.5) & (centre <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _resample(image, shape, spatial_dims, scales, translations, method, antialias, precision):
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    pad = radius if method == ResizeMethod.CUBIC_PYTORCH else 0
    for d, scale, translation in zip(spatial_dims, scales, translations):
        d = canonicalize_axis(d, image.ndim)
        w = _weights(image.shape[d], shape[d], scale, translation, kernel, antialias,
                     pad).astype(image.dtype)
        moved = jnp.tensordot(image, w, axes=([d], [0]), precision=precision)
        image = jnp.moveaxis(moved, -1, d)
    return image


def _canonical_shape(image, shape):
    shape = tuple(int(s) for s in shape)
    if len(shape) != jnp.ndim(image):
        raise ValueError("shape must have length equal to the number of dimensions of x;  "
                         f"{shape} vs {jnp.shape(image)}")
    return shape


def _method(method):
    return ResizeMethod.from_string(method) if isinstance(method, str) else method


def _resize_nearest(image, shape):
    for d, (m, n) in enumerate(zip(image.shape, shape)):
        if m == n:
            continue
        centres = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m)
        index = np.floor(centres / np.float32(n)).astype(np.int32)
        image = jnp.take(image, index, axis=d)
    return image


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=lax.Precision.HIGHEST):
    """`image` resampled to `shape` along `spatial_dims`, where output coordinate
    `y = x * scale + translation` for input coordinate `x` (both per dimension, arrays or
    numbers that may be traced). `method` is a `ResizeMethod` or its name; NEAREST is refused.
    `antialias` widens the kernel when downsampling. The result has the image's inexact dtype
    (float32 for integer images)."""
    image = jnp.asarray(image)
    shape = _canonical_shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    image, = promote_dtypes_inexact(image)
    spatial_dims = tuple(spatial_dims)
    if not spatial_dims:
        return image
    scale, translation = promote_dtypes_inexact(jnp.asarray(scale), jnp.asarray(translation))
    return _resample(image, shape, spatial_dims, [scale[i] for i in range(len(spatial_dims))],
                     [translation[i] for i in range(len(spatial_dims))], method, antialias,
                     precision)


def resize(image, shape, method, antialias=True, precision=lax.Precision.HIGHEST):
    """`image` resampled to `shape` (one size per dimension; dimensions whose size does not
    change are left alone) by `method`, a `ResizeMethod` or one of its names: 'nearest',
    'linear' ('bilinear', 'trilinear', 'triangle'), 'lanczos3', 'lanczos5', 'cubic'
    ('bicubic', 'tricubic'), 'cubic-pytorch', 'area'. With `antialias` (the default) the kernel
    widens when downsampling, which low-pass filters the image first; it does nothing for
    'nearest' or when upsampling. Nearest keeps the image's dtype; the other methods return the
    image's inexact dtype (float32 for integer images)."""
    image = jnp.asarray(image)
    shape = _canonical_shape(image, shape)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    dims = tuple(d for d in range(len(shape)) if image.shape[d] != shape[d])
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scales, [0.0] * len(dims), method, antialias,
                     precision)


def __dir__():
    """The public names only (the modules and helpers this one imports are not its API)."""
    return sorted(__all__)
