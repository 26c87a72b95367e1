"""The implementation of `kiln.nn`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.nn`'s docstring describes them."""
import operator
import warnings

import numpy as np

from .. import lax
from .. import numpy as jnp
from ..array import to_array
from ..custom_derivatives import custom_jvp
from ..compiler.ir import dtypes
from ..numpy._core import (check_arraylike, is_arraylike, promote_args_inexact,
                           canonicalize_axis, canonicalize_axes)
from . import initializers  # noqa: F401
from ._attention import dot_product_attention  # noqa: F401
from ._scaled import (scaled_matmul, scaled_dot_general,  # noqa: F401
                      get_scaled_dot_general_config)

tanh = jnp.tanh

__all__ = ["identity", "relu", "relu6", "squareplus", "softplus", "sparse_plus", "soft_sign",
           "sigmoid", "sparse_sigmoid", "silu", "swish", "mish", "log_sigmoid", "elu",
           "leaky_relu", "hard_tanh", "celu", "selu", "gelu", "glu", "logsumexp", "logmeanexp",
           "log_softmax", "softmax", "standardize", "one_hot", "hard_sigmoid", "hard_silu",
           "hard_swish", "log1mexp", "initializers", "tanh", "dot_product_attention",
           "scaled_matmul", "scaled_dot_general", "get_scaled_dot_general_config"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _ensure(fun_name, *args):
    """JAX's `ensure_arraylike`: refuse lists/tuples, convert the rest to arrays."""
    check_arraylike(fun_name, *args)
    arrs = [to_array(a, fun_name) for a in args]
    return arrs[0] if len(arrs) == 1 else arrs


def _check_arraylike_or_none(fun_name, *args):
    for pos, arg in enumerate(args):
        if arg is not None and not is_arraylike(arg):
            raise TypeError(f"{fun_name} requires ndarray, scalar, or None arguments, got "
                            f"{type(arg)} at position {pos}.")


def _strong_const(value, dtype):
    """A strongly typed rank-0 constant, rounded once from the Python value (JAX's
    `np.float32(c)`-style constants)."""
    return to_array(np.asarray(value, dtype))


# ------------------------------------------------------------------------- activations

def identity(x):
    """Identity activation: returns `x` as an array."""
    return _ensure("identity", x)


def relu(x):
    """Rectified linear unit, `max(x, 0)`. Its derivative is 0 at 0 (JAX's custom JVP), not
    the 1/2 that `maximum` gives at a tie."""
    return jnp.maximum(x, 0)


relu = custom_jvp(relu)
relu.defjvps(lambda g, ans, x: lax.select(x > 0, g, lax.full_like(g, 0)))


def relu6(x):
    """`min(max(x, 0), 6)`, with derivative 0 at 0 and at 6 (JAX's custom JVP)."""
    return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6 = custom_jvp(relu6)
relu6.defjvps(lambda g, ans, x: lax.select((x > 0) & (x < 6), g, lax.full_like(g, 0)))


def squareplus(x, b=4):
    """`(x + sqrt(x**2 + b)) / 2`, a smooth relu."""
    x, b = _ensure("squareplus", x, b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def softplus(x):
    """`log(1 + exp(x))`, computed as `logaddexp(x, 0)`."""
    return jnp.logaddexp(x, 0)


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, `(x + 1)**2 / 4` in between."""
    x = _ensure("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def soft_sign(x):
    """`x / (|x| + 1)`."""
    x = _ensure("soft_sign", x)
    return x / (jnp.abs(x) + 1)


def sigmoid(x):
    """Logistic sigmoid `1 / (1 + exp(-x))` (the `logistic` primitive)."""
    return lax.logistic(x)


def sparse_sigmoid(x):
    """`clip(x + 1, 0, 2) / 2`."""
    x = _ensure("sparse_sigmoid", x)
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


def silu(x):
    """SiLU (swish): `x * sigmoid(x)`."""
    x = _ensure("silu", x)
    return x * sigmoid(x)


swish = silu


def mish(x):
    """`x * tanh(softplus(x))`."""
    x = _ensure("mish", x)
    return x * jnp.tanh(softplus(x))


def log_sigmoid(x):
    """`log(sigmoid(x))`, computed stably as `-softplus(-x)`."""
    x = _ensure("log_sigmoid", x)
    return -softplus(-x)


def elu(x, alpha=1.0):
    """`x` for x > 0, `alpha * (exp(x) - 1)` otherwise."""
    x = _ensure("elu", x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0., x)))


def leaky_relu(x, negative_slope=1e-2):
    """`x` for x >= 0, `negative_slope * x` otherwise."""
    x = _ensure("leaky_relu", x)
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    """`x` clipped to [-1, 1]."""
    x = _ensure("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def celu(x, alpha=1.0):
    """`max(x, 0) + alpha * expm1(min(x, 0) / alpha)`."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def selu(x):
    """Scaled ELU with the self-normalising constants of Klambauer et al. (2017)."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def gelu(x, approximate=True):
    """Gaussian error linear unit: the tanh approximation, or the exact `x * Phi(x)`."""
    [x] = promote_args_inexact("gelu", x)
    if approximate:
        c = _strong_const(np.sqrt(2 / np.pi), x.dtype)
        cdf = 0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = _strong_const(np.sqrt(0.5), x.dtype)
    return jnp.asarray(0.5 * x * lax.erfc(-x * sqrt_half), dtype=x.dtype)


def glu(x, axis=-1):
    """Gated linear unit: split `x` in two halves along `axis`, return `x1 * sigmoid(x2)`."""
    x = _ensure("glu", x)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: the size of axis {axis} must be divisible by 2, got shape "
                         f"{x.shape}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def hard_sigmoid(x):
    """`relu6(x + 3) / 6`."""
    x = _ensure("hard_sigmoid", x)
    return relu6(x + 3.) / 6.


def hard_silu(x):
    """`x * hard_sigmoid(x)`."""
    x = _ensure("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def log1mexp(x):
    """`log(1 - exp(-x))`, switching formulas at `log(2)` for accuracy."""
    x = _ensure("log1mexp", x)
    c = jnp.log(2.0)
    return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


# ------------------------------------------------------------- reductions over exponentials

def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """`log(sum(b * exp(a)))` over `axis`, stable for large and -inf inputs (JAX semantics).

    The maximum is subtracted first (non-finite maxima are replaced by 0). With `b`, negative
    sums give NaN unless `return_sign=True`, which returns `(log|sum|, sign(sum))`.
    """
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = promote_args_inexact("logsumexp", a, b)
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a, = promote_args_inexact("logsumexp", a)
    dims = canonicalize_axes(axis, a.ndim, "logsumexp")
    amax = jnp.max(jnp.real(a), axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, jnp.zeros_like(amax)))
    amax_with_dims = amax if keepdims else lax.expand_dims(amax, dims)
    exp_a = jnp.exp(jnp.subtract(a, amax_with_dims.astype(a.dtype)))
    if b is not None:
        exp_a = jnp.multiply(exp_a, b)
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    is_complex = dtypes.is_complex(a.dtype)
    if return_sign or not is_complex:
        sumexp = jnp.abs(sumexp)
    out = lax.add(lax.log(sumexp), amax.astype(sumexp.dtype))
    if return_sign:
        return out, sign
    if b is not None and not is_complex:
        out = jnp.where(sign < 0, _strong_const(np.nan, out.dtype), out)
    return out


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """`log(mean(exp(x)))` over `axis`: `logsumexp` minus the log of the element count."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    if where is None:
        x = to_array(x, "logmeanexp")
        dims = canonicalize_axes(axis, x.ndim, "logmeanexp")
        count = lax.convert_element_type(int(np.prod([x.shape[d] for d in dims])), lse.dtype)
    else:
        count = jnp.sum(jnp.broadcast_to(where, jnp.shape(x)), axis=axis, keepdims=keepdims,
                        dtype=lse.dtype)
    return lse - jnp.log(count)


def log_softmax(x, axis=-1, where=None):
    """`x - logsumexp(x, axis, keepdims=True)`, with masked entries (`where` False) at -inf."""
    x = _ensure("log_softmax", x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_logsumexp = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_logsumexp
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


def softmax(x, axis=-1, where=None):
    """`exp(x) / sum(exp(x), axis)`, the maximum subtracted first; masked entries give 0."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(x_safe - x_max)
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """`(x - mean) / sqrt(variance + epsilon)`, the moments computed over `axis` if not given.

    `algorithm="fast"` uses `E[x^2] - E[x]^2` (clipped at 0); `"stable"` uses `E[(x - mean)^2]`.
    """
    check_arraylike("standardize", x)
    _check_arraylike_or_none("standardize", mean, variance, where)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        variance = _variance(x, mean, axis, where, algorithm)
    return jnp.subtract(x, mean) * lax.rsqrt(to_array(variance) + epsilon)


def _variance(x, mean, axis, where, algorithm):
    if algorithm == "stable":
        return jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
    if algorithm == "fast":
        variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean)
        return jnp.clip(variance, 0)
    raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")


# ------------------------------------------------------------------------------- one_hot

def _num_classes(num_classes):
    try:
        n = operator.index(num_classes)
    except TypeError:
        raise TypeError(f"one_hot: num_classes must be a concrete non-negative integer, got "
                        f"{num_classes!r} of type {type(num_classes).__name__}") from None
    if n < 0:
        raise TypeError(f"one_hot: num_classes must be non-negative, got {n}")
    return n


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """One-hot encode integer array `x` along a new axis of size `num_classes`.

    Entries outside `[0, num_classes)` encode as all zeros. `axis` places the new axis (named
    mapped axes, as JAX allows inside `pmap`, are not supported by kiln).
    """
    num_classes = _num_classes(num_classes)
    x = jnp.asarray(x)
    if not dtypes.is_integer(x.dtype):
        if dtypes.is_bool(x.dtype):
            raise TypeError("one_hot: iota does not accept dtype bool. Accepted dtypes are "
                            "subtypes of integer, floating, complexfloating; convert x to an "
                            "integer type first.")
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = dtypes.default_float() if dtype is None else dtype
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"one_hot: axis must be an integer, got {axis!r}; named mapped axes "
                        f"are not supported by kiln")
    out_axis = canonicalize_axis(axis, x.ndim + 1, "one_hot")
    lhs = lax.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(x.dtype, rhs_shape, out_axis)
    return (lhs == rhs).astype(dtype)
