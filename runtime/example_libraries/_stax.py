"""The implementation of `kiln.example_libraries.stax`: its public names (`__all__`, re-exported
there) and the helpers they use. `kiln.example_libraries.stax`'s docstring describes them."""
import functools
import operator

from .. import lax, random
from .. import numpy as jnp
from ..nn import (relu, log_softmax, softmax, softplus, sigmoid, elu, leaky_relu, selu, gelu,
                  standardize)
from ..nn.initializers import glorot_normal, normal, ones, zeros

__all__ = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout",
           "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv",
           "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu",
           "Selu", "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh", "elementwise", "elu",
           "gelu", "glorot", "glorot_normal", "lax", "leaky_relu", "log_softmax", "logsoftmax",
           "normal", "ones", "parallel", "randn", "random", "relu", "selu", "serial",
           "shape_dependent", "sigmoid", "softmax", "softplus", "standardize", "zeros"]

# JAX's aliases, kept for old code
glorot, randn, logsoftmax = glorot_normal, normal, log_softmax


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: inputs @ W + b."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        params = (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))
        return tuple(input_shape[:-1]) + (out_dim,), params

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _kernel_and_bias(dimension_numbers, out_chan, filter_shape, input_shape):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = iter(filter_shape)
    kernel = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
              else next(spatial) for c in rhs_spec]
    bias = [out_chan if c == "C" else 1 for c in out_spec]
    return kernel, bias


def _conv_layer(output_shape, apply_conv):
    """The layer factory of GeneralConv and GeneralConvTranspose."""
    def layer(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
              W_init=None, b_init=normal(1e-6)):
        rhs_spec = dimension_numbers[1]
        strides = strides or (1,) * len(filter_shape)
        W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

        def init_fun(rng, input_shape):
            kernel, bias = _kernel_and_bias(dimension_numbers, out_chan, filter_shape,
                                            input_shape)
            out = output_shape(input_shape, kernel, strides, padding, dimension_numbers)
            k1, k2 = random.split(rng)
            return out, (W_init(k1, kernel), b_init(k2, bias))

        def apply_fun(params, inputs, **kwargs):
            W, b = params
            return apply_conv(inputs, W, strides, padding, dimension_numbers) + b
        return init_fun, apply_fun
    return layer


GeneralConv = _conv_layer(
    lax.conv_general_shape_tuple,
    lambda x, W, strides, padding, dn: lax.conv_general_dilated(
        x, W, strides, padding, (1,) * len(strides), (1,) * len(strides), dimension_numbers=dn))
GeneralConv.__name__ = "GeneralConv"
GeneralConvTranspose = _conv_layer(
    lax.conv_transpose_shape_tuple,
    lambda x, W, strides, padding, dn: lax.conv_transpose(x, W, strides, padding,
                                                          dimension_numbers=dn))
GeneralConvTranspose.__name__ = "GeneralConvTranspose"
Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Normalisation over `axis` (batch statistics), then a learnt scale and offset."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A layer without parameters applying `fun(inputs, **fun_kwargs)`."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _non_spatial_axes(spec, ndim):
    return (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))


def _pooling_layer(reducer, init_val, rescaler=None):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        window_shape = tuple(window_shape)
        strides = tuple(strides or (1,) * len(window_shape))
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        dims, steps = window_shape, strides
        for i in sorted(_non_spatial_axes(spec, len(window_shape) + 2)):
            dims, steps = dims[:i] + (1,) + dims[i:], steps[:i] + (1,) + steps[i:]

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, dims, steps, padding)
            unit = (1,) * len(dims)
            return lax.reduce_window_shape_tuple(input_shape, dims, steps, pads, unit, unit), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, dims, steps, padding)
            return rescale(out, inputs, spec) if rescale else out
        return init_fun, apply_fun
    return PoolingLayer


def _normalize_by_window_size(dims, strides, padding):
    def rescale(outputs, inputs, spec):
        axes = _non_spatial_axes(spec, inputs.ndim)
        spatial = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in axes)
        sizes = lax.reduce_window(jnp.ones(spatial, dtype=inputs.dtype), 0., lax.add, dims,
                                  strides, padding)
        for i in sorted(axes):
            sizes = jnp.expand_dims(sizes, i)
        return outputs / sizes
    return rescale


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.)
AvgPool = _pooling_layer(lax.add, 0., _normalize_by_window_size)


def _flatten():
    def init_fun(rng, input_shape):
        return (input_shape[0], functools.reduce(operator.mul, input_shape[1:], 1)), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()
Identity = elementwise(lambda x: x)


def FanOut(num):
    """`num` copies of the input (a list), for `parallel` layers."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum():
    def init_fun(rng, input_shape):
        return input_shape[0], ()

    def apply_fun(params, inputs, **kwargs):
        return sum(inputs)
    return init_fun, apply_fun


FanInSum = _fan_in_sum()


def FanInConcat(axis=-1):
    """The inputs (a list) concatenated along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):
    """In mode "train", keeps each input with probability `rate` (scaled by 1 / rate; JAX's
    stax calls the keep probability `rate`); any other mode passes inputs through."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key "
                             "argument. That is, instead of `apply_fun(params, inputs)`, call "
                             "it like `apply_fun(params, inputs, rng)` where `rng` is a PRNG "
                             "key (e.g. from `kiln.random.key`).")
        if mode == "train":
            keep = random.bernoulli(rng, rate, inputs.shape)
            return jnp.where(keep, inputs / rate, 0)
        return inputs
    return init_fun, apply_fun


def _layer_keys(rng, n):
    return random.split(rng, n) if rng is not None else (None,) * n


def serial(*layers):
    """Layers applied one after the other."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rngs = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        for fun, param, rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Layers applied side by side, each to its own input of a list."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(init_funs))
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params, inputs, **kwargs):
        rngs = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer made by `make_layer(input_shape)` once the input's shape is known."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
