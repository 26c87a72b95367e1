"""The implementation of `kiln.example_libraries.optimizers`: its public names (`__all__`, re-exported there)
and the helpers they use. `kiln.example_libraries.optimizers`'s docstring describes them."""
from __future__ import annotations

import builtins
import collections
import functools
from collections import namedtuple
from functools import partial
from typing import Any, Callable, NamedTuple

from .. import numpy as jnp
from ..tree_util import tree_flatten, tree_unflatten, tree_map, register_pytree_node

__all__ = ["OptimizerState", "Optimizer", "optimizer", "sgd", "momentum", "nesterov", "adagrad",
           "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3", "constant",
           "exponential_decay", "inverse_time_decay", "polynomial_decay", "piecewise_constant",
           "make_schedule", "l2_norm", "clip_grads", "JoinPoint", "unpack_optimizer_state",
           "pack_optimizer_state", "Schedule",
           # JAX's module-level names: type aliases, its length-checking map/zip, and the
           # typing and standard-library names its namespace exposes
           "Array", "Params", "State", "Updates", "Step", "InitFn", "UpdateFn", "ParamsFn",
           "safe_map", "safe_zip", "unzip2", "map", "zip", "Any", "Callable", "NamedTuple",
           "namedtuple", "partial", "annotations"]


def _same_lengths(name, seqs):
    seqs = [list(s) for s in seqs]
    if len({len(s) for s in seqs}) > 1:
        raise ValueError(f"{name}() argument lengths differ: {tuple(len(s) for s in seqs)}")
    return seqs


def safe_map(f, *seqs):
    """`map` that refuses sequences of different lengths (a list)."""
    return [f(*args) for args in builtins.zip(*_same_lengths("safe_map", seqs))]


def safe_zip(*seqs):
    """`zip` that refuses sequences of different lengths (a list)."""
    return list(builtins.zip(*_same_lengths("safe_zip", seqs)))


map, zip = safe_map, safe_zip   # noqa: A001  (as in JAX's module)


def unzip2(pairs):
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return tuple(firsts), tuple(seconds)


# The parameters form an "outer" pytree; init maps each of its leaves to an "inner" pytree of
# state. Both flatten, so the whole state is a list of lists (packed_state) plus the treedefs.
OptimizerState = collections.namedtuple("OptimizerState",
                                        ["packed_state", "tree_def", "subtree_defs"])
register_pytree_node(
    OptimizerState,
    lambda xs: ((xs.packed_state,), (xs.tree_def, xs.subtree_defs)),
    lambda data, xs: OptimizerState(xs[0], data[0], data[1]))

Schedule = Callable[[int], Any]
Array = Params = State = Updates = Any
Step = int
InitFn = Callable[[Params], OptimizerState]
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]


class Optimizer(NamedTuple):
    init_fn: Callable
    update_fn: Callable
    params_fn: Callable


def optimizer(opt_maker):
    """Decorator: turn a maker of per-array `(init, update, get_params)` into a maker of
    pytree-aware `Optimizer(init_fn, update_fn, params_fn)`.

    `update_fn(i, grad_tree, opt_state)` raises TypeError when `grad_tree`'s structure differs
    from the parameters', or when `update` changes the structure of a leaf's state.
    """
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_flatten(x0_tree)
            initial_states = [init(x0) for x0 in x0_flat]
            states_flat, subtrees = unzip2(safe_map(tree_flatten, initial_states))
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, tree2 = tree_flatten(grad_tree)
            if tree2 != tree:
                raise TypeError("optimizer update function was passed a gradient tree that did "
                                "not match the parameter tree structure with which it was "
                                f"initialized: parameter tree {tree} and grad tree {tree2}.")
            states = safe_map(tree_unflatten, subtrees, states_flat)
            new_states = safe_map(functools.partial(update, i), grad_flat, states)
            new_states_flat, subtrees2 = unzip2(safe_map(tree_flatten, new_states))
            for subtree, subtree2 in zip(subtrees, subtrees2):
                if subtree2 != subtree:
                    raise TypeError("optimizer update function produced an output structure "
                                    "that did not match its input structure: input "
                                    f"{subtree} and output {subtree2}.")
            return OptimizerState(new_states_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            states = safe_map(tree_unflatten, subtrees, states_flat)
            params = safe_map(get_params, states)
            return tree_unflatten(tree, params)

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# ------------------------------------------------------------------------------ optimizers

@optimizer
def sgd(step_size):
    """Stochastic gradient descent: `x - step_size(i) * g`."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x
    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size, mass):
    """Heavy-ball momentum: `v = mass * v + g; x = x - step_size(i) * v`."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        x = x - step_size(i) * velocity
        return x, velocity

    def get_params(state):
        x, _ = state
        return x
    return init, update, get_params


@optimizer
def nesterov(step_size, mass):
    """Nesterov's accelerated gradient: the step uses `mass * v + g`."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        x = x - step_size(i) * (mass * velocity + g)
        return x, velocity

    def get_params(state):
        x, _ = state
        return x
    return init, update, get_params


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al., 2011) with momentum on the scaled gradient."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        g_sq_inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        return x, g_sq, m

    def get_params(state):
        x, _, _ = state
        return x
    return init, update, get_params


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: divide by a running root mean square of the gradients."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        x = x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x, avg_sq_grad

    def get_params(state):
        x, _ = state
        return x
    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum on the scaled step."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        x = x - mom
        return x, avg_sq_grad, mom

    def get_params(state):
        x, _, _ = state
        return x
    return init, update, get_params


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, 2015) with bias-corrected moment estimates."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        x = x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps)
        return x, m, v

    def get_params(state):
        x, _, _ = state
        return x
    return init, update, get_params


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: Adam with the infinity norm in place of the second moment."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = (x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m
             / (u + eps))
        return x, m, u

    def get_params(state):
        x, _, _ = state
        return x
    return init, update, get_params


def _splice(seq, i, x):
    lst = list(seq)
    lst[i:i + 1] = x
    return lst


def _broadcast_into(ndim, x, axis):
    idx = _splice([None] * ndim, axis, [slice(None)])
    return x[tuple(idx)]


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al., 2019): memory-efficient adaptive steps from per-axis maxima."""
    step_size = make_schedule(step_size)

    def init(x0):
        x_shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        vs = [jnp.zeros(sz, dtype=x0.dtype) for sz in x0.shape]
        return x0, jnp.zeros_like(x0), vs, x_shape

    def update(i, g, state):
        x, m, vs, x_shape = state
        vs = [_broadcast_into(g.ndim, v, axis) for axis, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
        accum_inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(_splice(range(x.ndim), j, []))) for j in range(x.ndim)]
        return x, m, vs, x_shape

    def get_params(state):
        x, _, _, x_shape = state
        return x.reshape(x_shape)
    return init, update, get_params


# ------------------------------------------------------------------- learning-rate schedules

def constant(step_size):
    """The schedule `i -> step_size`."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """`step_size * decay_rate ** (i / decay_steps)`."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """`step_size / (1 + decay_rate * i / decay_steps)`, the ratio floored if `staircase`."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """Decay from `step_size` to `final_step_size` over `decay_steps` as `(1 - t)**power`."""
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """`values[k]` where `k` is the number of boundaries strictly below the step."""
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule):
    """A schedule from a callable (returned as is) or a scalar (a `constant` schedule)."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# -------------------------------------------------------------------------------- utilities

def l2_norm(tree):
    """The l2 norm of a pytree of arrays (all leaves concatenated)."""
    leaves, _ = tree_flatten(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """Rescale a gradient pytree so that its l2 norm is at most `max_norm`."""
    norm = l2_norm(grad_tree)

    def normalize(g):
        return jnp.where(norm < max_norm, g, g * (max_norm / norm))
    return tree_map(normalize, grad_tree)


# -------------------------------------------------------------------- serialization utilities

class JoinPoint:
    """Marks where the parameter pytree ends and a leaf's optimizer-state pytree begins."""

    def __init__(self, subtree):
        self.subtree = subtree

    # pytrees are containers of arrays, so a JoinPoint looks iterable.
    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """An `OptimizerState` as a plain pytree (for saving): the parameter tree with a
    `JoinPoint` holding each leaf's state."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = safe_map(tree_unflatten, subtree_defs, states_flat)
    sentinels = [JoinPoint(subtree) for subtree in subtrees]
    return tree_unflatten(tree_def, sentinels)


def pack_optimizer_state(marked_pytree):
    """The inverse of `unpack_optimizer_state`."""
    sentinels, tree_def = tree_flatten(marked_pytree)
    for s in sentinels:
        if not isinstance(s, JoinPoint):
            raise TypeError("pack_optimizer_state expects the pytree made by "
                            "unpack_optimizer_state, with a JoinPoint at every leaf; got a "
                            f"leaf of type {type(s).__name__}")
    subtrees = [s.subtree for s in sentinels]
    states_flat, subtree_defs = unzip2(safe_map(tree_flatten, subtrees))
    return OptimizerState(states_flat, tree_def, subtree_defs)
