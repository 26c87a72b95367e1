"""The functions `tests/test_jet.py` runs through kiln's jet and `tests/goldens/make_jet_goldens.py`
through JAX 0.10.2's: each case is `f(np_, lax_)`, returning the function written with kiln's or
JAX's numpy and lax; the input `X` and its series `terms(order)`."""
import numpy as np

RNG = np.random.RandomState(0)
X = np.array([0.3, -0.7, 1.1, 0.45], np.float32)
W1 = RNG.randn(4, 5).astype(np.float32) * 0.5
B1 = RNG.randn(5).astype(np.float32) * 0.1
W2 = RNG.randn(5, 3).astype(np.float32) * 0.5
M = RNG.randn(3, 4).astype(np.float32)


def terms(order, shape=X.shape, seed=1):
    r = np.random.RandomState(seed)
    return [r.randn(*shape).astype(np.float32) * 0.5 ** k for k in range(order)]


# Each case: name -> f(np_, lax_) -> the function (np_: kiln.numpy or jax.numpy).
CASES = {
    "mlp": lambda np_, lax_: lambda x: np_.tanh(np_.tanh(x @ W1 + B1) @ W2).sum(),
    "tanh_chain": lambda np_, lax_: lambda x: np_.tanh(2.0 * np_.tanh(np_.tanh(x)) + x),
    "polynomial": lambda np_, lax_: lambda x: 3 * x ** 3 - 2 * x ** 2 + x ** 5 / 7 - 1 / x ** 2 + 4,
    "division": lambda np_, lax_: lambda x: (x + 2.0) / (x * x + 1.0) - 1.0 / (3.0 + x),
    "exp_log": lambda np_, lax_: lambda x: np_.log(2.0 + np_.exp(x)) * np_.exp(-x * x)
    + np_.log1p(x * x) + np_.expm1(x / 2),
    "trig": lambda np_, lax_: lambda x: np_.sin(x) * np_.cos(2 * x) + np_.sinh(x / 3)
    - np_.cosh(x / 4),
    "powers": lambda np_, lax_: lambda x: np_.sqrt(x + 2.0) + lax_.rsqrt(x + 3.0)
    + (x + 2.0) ** 2.5 + np_.square(x) + (x + 2.0) ** (x / 3),
    "special": lambda np_, lax_: lambda x: lax_.logistic(x) + lax_.erf(x) * lax_.erfc(x / 2)
    + lax_.erf_inv(x / 3),
    "inverse_hyperbolic": lambda np_, lax_: lambda x: np_.arcsinh(x) + np_.arccosh(x + 2.0)
    + np_.arctanh(x / 2) + np_.arctan2(x, 2.0 - x),
    "piecewise": lambda np_, lax_: lambda x: np_.abs(x) * np_.maximum(x, 0.2)
    + np_.minimum(x, np_.full_like(x, -0.1)) + np_.where(x > 0, x ** 2, np_.sin(x)) + np_.floor(x * 3),
    "reductions": lambda np_, lax_: lambda x: np_.stack([np_.sum(np_.sin(x)), np_.mean(x * x),
                                                         np_.max(x ** 3), np_.min(np_.exp(x))]),
    "structure": lambda np_, lax_: lambda x: np_.concatenate([
        np_.cumsum(x[::-1] ** 2), np_.reshape(np_.outer(x, x).T[1:3], (-1,)),
        np_.pad(x[1:], (1, 2)), x[np_.array([2, 0])], lax_.dynamic_slice(x, (1,), (2,)),
        np_.broadcast_to(x[:, None], (4, 2)).ravel(), np_.zeros(4).at[np_.array([1, 1])].add(x[:2]),
        lax_.dynamic_update_slice(x, np_.exp(x[:2]), (1,)), np_.real(np_.fft.fft(x * x)),
        np_.imag(np_.fft.ifft(np_.sin(x)))]),
    "matmul": lambda np_, lax_: lambda x: np_.tanh(M @ x) @ (M @ np_.sin(x)),
    # x twice: cummax ties (1.1 at positions 2 and 6), which share the series as JAX's scan does
    "cumulative": lambda np_, lax_: lambda x: np_.concatenate([
        np_.cumprod(x + 1.5), lax_.cummax(np_.concatenate([x, x])),
        lax_.cummin(np_.sin(x), reverse=True), lax_.cumsum(x * x, reverse=True)]),
}


def two_args(np_, lax_):
    return lambda x, y: np_.exp(x) * np_.log(y) / (x + y) + np_.sin(x * y)


Y = np.abs(X) + 0.5
