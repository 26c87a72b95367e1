"""The implementation of `kiln.nn.initializers`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.nn.initializers`'s docstring describes them."""
import typing
import math
import operator

import numpy as np

from .. import numpy as jnp
from ..compiler.ir import dtypes
from ..numpy._core import canonical_dtype

__all__ = ["zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
           "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal",
           "Initializer"]

# Standard deviations of a standard normal truncated to (-2, 2), real and complex.
_TRUNC_STD_REAL = .87962566103423978
_TRUNC_STD_COMPLEX = .95311164380491208
_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def _random():
    from .. import random
    return random


def _dtype(dtype):
    return dtypes.default_float() if dtype is None else canonical_dtype(dtype, "initializer")


def _check_sharding(name, out_sharding):
    if out_sharding is not None:
        raise ValueError(f"nn.initializers.{name}: out_sharding is not supported by kiln "
                         f"(got {out_sharding!r}); pass out_sharding=None")


def _shape(name, shape):
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"nn.initializers.{name}: shape must be a sequence of integers, got "
                        f"{shape!r}") from None


def zeros(key, shape, dtype=None, out_sharding=None):
    """An array of zeros (the key is ignored)."""
    _check_sharding("zeros", out_sharding)
    return jnp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None, out_sharding=None):
    """An array of ones (the key is ignored)."""
    _check_sharding("ones", out_sharding)
    return jnp.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """An initializer that fills with `value`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("constant", out_sharding)
        return jnp.full(shape, value, dtype=_dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer sampling uniformly from `[0, scale)`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("uniform", out_sharding)
        dtype = _dtype(dtype)
        return _random().uniform(key, shape, dtype) * jnp.array(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer sampling from a centred normal with standard deviation `stddev`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("normal", out_sharding)
        dtype = _dtype(dtype)
        return _random().normal(key, shape, dtype) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer sampling a standard normal truncated to `(lower, upper)`, times
    `stddev`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("truncated_normal", out_sharding)
        dtype = _dtype(dtype)
        return _random().truncated_normal(key, lower, upper, shape, dtype) * \
            jnp.array(stddev, dtype)
    return init


def _axes_size(shape, axes):
    if isinstance(axes, int):
        return shape[axes]
    return math.prod([shape[i] for i in axes])


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    """(fan_in, fan_out) of a weight shape; the remaining axes form the receptive field."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size = _axes_size(shape, in_axis)
    out_size = _axes_size(shape, out_axis)
    batch_size = _axes_size(shape, batch_axis)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


def _real_dtype(dtype):
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def _complex_uniform(key, shape, dtype):
    """Uniform on the unit-area disk centred at 0 (variance 1)."""
    random = _random()
    key_r, key_theta = random.split(key)
    real_dtype = _real_dtype(dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real_dtype)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """Complex normal with modulus truncated to `upper`."""
    random = _random()
    key_r, key_theta = random.split(key)
    real_dtype = _real_dtype(dtype)
    t = ((1 - jnp.exp(jnp.array(-(upper ** 2), dtype)))
         * random.uniform(key_r, shape, real_dtype).astype(dtype))
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _denominator(mode, fan_in, fan_out):
    return {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
            "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]


def _sample_truncated_normal(key, shape, dtype, variance):
    if dtype.kind == "f":
        stddev = jnp.sqrt(variance) / jnp.array(_TRUNC_STD_REAL, dtype)
        return _random().truncated_normal(key, -2, 2, shape, dtype) * stddev
    stddev = jnp.sqrt(variance) / jnp.array(_TRUNC_STD_COMPLEX, dtype)
    return _complex_truncated_normal(key, 2, shape, dtype) * stddev


def _sample_normal(key, shape, dtype, variance):
    return _random().normal(key, shape, dtype) * jnp.sqrt(variance)


def _sample_uniform(key, shape, dtype, variance):
    if dtype.kind == "f":
        return _random().uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
    return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)


_SAMPLERS = {"truncated_normal": _sample_truncated_normal, "normal": _sample_normal,
             "uniform": _sample_uniform}


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer whose samples have variance `scale / n`, `n` chosen by `mode` from the
    fans of the weight shape (`fan_in`, `fan_out`, `fan_avg`, `fan_geo_avg`), drawn from a
    truncated normal, a normal or a uniform distribution."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("variance_scaling", out_sharding)
        shape = _shape("variance_scaling", shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode not in _MODES:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        if distribution not in _SAMPLERS:
            raise ValueError(f"invalid distribution for variance scaling initializer: "
                             f"{distribution}")
        variance = jnp.array(scale / _denominator(mode, fan_in, fan_out), dtype=dtype)
        return _SAMPLERS[distribution](key, shape, dtype, variance)
    return init


def _scaling(scale, mode, distribution):
    def constructor(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    return constructor


glorot_uniform = xavier_uniform = _scaling(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _scaling(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _scaling(1.0, "fan_in", "uniform")
lecun_normal = _scaling(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _scaling(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _scaling(2.0, "fan_in", "truncated_normal")
for _name, _fn in (("glorot_uniform", glorot_uniform), ("glorot_normal", glorot_normal),
                   ("lecun_uniform", lecun_uniform), ("lecun_normal", lecun_normal),
                   ("he_uniform", he_uniform), ("he_normal", he_normal)):
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__doc__ = f"`{_name}`: a `variance_scaling` initializer (JAX's defaults)."


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer for (semi-)orthogonal matrices: `kiln.random.orthogonal` over the
    product of the other axes by `shape[column_axis]`, times `scale` (JAX's bits for the same
    key)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("orthogonal", out_sharding)
        shape = _shape("orthogonal", shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_cols = shape[column_axis]
        q = _random().orthogonal(key, math.prod(shape) // n_cols, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """JAX's delta-orthogonal initializer for 3-D, 4-D and 5-D convolution kernels: zeros
    with an `orthogonal` matrix over the last two axes at the kernel's centre."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("delta_orthogonal", out_sharding)
        shape = _shape("delta_orthogonal", shape)
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        matrix = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype=dtype).at[centre].set(matrix)
    return init


@typing.runtime_checkable
class Initializer(typing.Protocol):
    """What every initializer is: `init(key, shape, dtype=...) -> Array`."""

    def __call__(self, key, shape, dtype=None):
        ...
