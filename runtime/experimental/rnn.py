"""`kiln.experimental.rnn`: JAX's LSTM helpers: `lstm`, `lstm_ref`, `init_lstm_weight`,
`unpack_lstm_weights`, `get_num_params_in_lstm` and `swap_lstm_gates`.

The weights are one flat vector in cuDNN's order: for each layer and direction (forward,
then backward when bidirectional) the input and the hidden weight matrices, W_ih (4H, I) and
W_hh (4H, H), then for each the two biases (4H,), every block's four gates in the order
input, forget, cell, output. Inputs are batch first: `x` (B, T, I), the states (L * D, B, H)
and `seq_lengths` (B,) int32. A step computes the gates from x_t and h_{t-1}, then
c_t = f * c_{t-1} + i * g and h_t = o * tanh(c_t); the outputs past a sequence's length are
zero and its final state is the one at its last step; the backward direction reads each
sequence reversed within its length; a layer's input is the previous layer's outputs
(both directions concatenated). The recurrence is a `lax.scan`, so all of it works under
`jit`, `grad` and `vmap`.

JAX's `lstm` calls cuDNN and needs an NVIDIA GPU; kiln's runs the same recurrence
(`lstm_ref` on the unpacked weights) on every backend. Dropout between layers is not
implemented (`NotImplementedError`, as JAX's `lstm_ref` says), nor are other `seq_lengths`
dtypes than int32.
"""
import math

import numpy as np

from .. import lax
from .. import numpy as jnp
from .. import random
from ..nn import sigmoid

__all__ = ["get_num_params_in_lstm", "init_lstm_weight", "lstm", "lstm_ref",
           "swap_lstm_gates", "unpack_lstm_weights"]


def _shapes(input_size, hidden_size, num_layers, bidirectional):
    """The shapes of the flat weight vector's blocks, in order (module docstring)."""
    directions = 2 if bidirectional else 1
    matrices, biases = [], []
    for layer in range(num_layers * directions):
        width = input_size if layer < directions else directions * hidden_size
        matrices += [(4 * hidden_size, width), (4 * hidden_size, hidden_size)]
        biases += [(4 * hidden_size,), (4 * hidden_size,)]
    return matrices + biases


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int,
                           bidirectional: bool) -> int:
    """The length of the flat weight vector."""
    return sum(math.prod(shape)
               for shape in _shapes(input_size, hidden_size, num_layers, bidirectional))


def init_lstm_weight(rng, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool):
    """A flat float32 weight vector drawn from U(-k, k), k = sqrt(1 / hidden_size)."""
    k = np.sqrt(1.0 / hidden_size)
    count = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    return random.uniform(rng, shape=(count,), dtype=np.float32, minval=-k, maxval=k)


def _blocks(weights, shapes):
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(weights[start:start + size].reshape(shape))
        start += size
    return out


def unpack_lstm_weights(weights, input_size: int, hidden_size: int, num_layers: int,
                        bidirectional: bool):
    """The flat weights as four dicts, W_ih, W_hh, b_ih, b_hh, keyed by pseudo-layer
    (layer * directions + direction)."""
    shapes = _shapes(input_size, hidden_size, num_layers, bidirectional)
    blocks = _blocks(weights, shapes)
    layers = len(shapes) // 4
    matrices, biases = blocks[:2 * layers], blocks[2 * layers:]
    return ({n: matrices[2 * n] for n in range(layers)},
            {n: matrices[2 * n + 1] for n in range(layers)},
            {n: biases[2 * n] for n in range(layers)},
            {n: biases[2 * n + 1] for n in range(layers)})


def swap_lstm_gates(weights, input_size, hidden_size, num_layers, bidirectional):
    """The flat weights with the third and fourth gates of every block swapped (cuDNN's
    order i, f, g, o to MIOpen's i, f, o, g and back)."""
    weights = jnp.asarray(weights)
    shapes = _shapes(input_size, hidden_size, num_layers, bidirectional)
    swapped = []
    for block in _blocks(weights, shapes):
        i, f, g, o = jnp.split(block, 4, axis=0)
        swapped.append(jnp.concatenate([i, f, o, g], axis=0).ravel())
    return jnp.concatenate(swapped)


def _layer(xs, h0, c0, w_ih, w_hh, b_ih, b_hh, seq_lengths):
    """One direction of one layer over time-first inputs `xs` (T, B, F): the outputs (zero
    past each sequence's length) and the states at each sequence's last step."""
    def step(carry, x):
        h, c = carry
        gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * jnp.tanh(g)
        h = sigmoid(o) * jnp.tanh(c)
        return (h, c), (h, c)
    _, (hs, cs) = lax.scan(step, (h0, c0), xs)
    batch = jnp.arange(xs.shape[1])
    last = seq_lengths - 1
    inside = jnp.arange(xs.shape[0], dtype=np.int32)[:, None] < seq_lengths[None, :]
    return jnp.where(inside[..., None], hs, 0), hs[last, batch], cs[last, batch]


def _reverse_within(xs, seq_lengths):
    """Each sequence of time-first `xs` reversed within its length, padding kept last."""
    steps = xs.shape[0]
    t = jnp.arange(steps, dtype=np.int32)[:, None]
    source = jnp.where(t < seq_lengths[None, :], seq_lengths[None, :] - 1 - t, t)
    return jnp.take_along_axis(xs, source[..., None], axis=0)


def lstm_ref(x, h_0, c_0, W_ih, W_hh, b_ih, b_hh, seq_lengths, input_size: int,
             hidden_size: int, num_layers: int, dropout: float, bidirectional: bool):
    """A (bidirectional, multi-layer) LSTM over batch-first `x` with per-layer weight dicts
    (`unpack_lstm_weights`): (y (B, T, D * H), h_n, c_n (L * D, B, H))."""
    seq_lengths = jnp.asarray(seq_lengths)
    if seq_lengths.dtype != np.dtype("int32"):
        raise NotImplementedError("`seq_lengths` can only be int32.")
    if dropout != 0.0:
        raise NotImplementedError("Dropout not supported in LSTM reference because we cannot "
                                  "determine CUDNN dropout mask.")
    directions = 2 if bidirectional else 1
    xs = jnp.swapaxes(jnp.asarray(x), 0, 1)
    final_h, final_c = [], []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            n = layer * directions + direction
            inputs = xs if direction == 0 else _reverse_within(xs, seq_lengths)
            ys, h, c = _layer(inputs, h_0[n], c_0[n], W_ih[n], W_hh[n], b_ih[n], b_hh[n],
                              seq_lengths)
            outputs.append(ys if direction == 0 else _reverse_within(ys, seq_lengths))
            final_h.append(h)
            final_c.append(c)
        xs = jnp.concatenate(outputs, axis=-1) if directions == 2 else outputs[0]
    return jnp.swapaxes(xs, 0, 1), jnp.stack(final_h), jnp.stack(final_c)


def lstm(x, h_0, c_0, weights, seq_lengths, input_size: int, hidden_size: int,
         num_layers: int, dropout: float, bidirectional: bool, precision=None):
    """JAX's cuDNN LSTM with flat weights: `lstm_ref` on the unpacked weights, on every
    backend (`precision` is accepted; kiln's matrix products are float32 throughout)."""
    return lstm_ref(x, h_0, c_0, *unpack_lstm_weights(weights, input_size, hidden_size,
                                                      num_layers, bidirectional),
                    seq_lengths, input_size, hidden_size, num_layers, dropout, bidirectional)
