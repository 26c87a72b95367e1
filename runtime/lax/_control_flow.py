"""Structured control flow in eager mode: fori_loop, while_loop, scan, cond, switch, map.

Outside `jit` these run as Python loops and branches over eager arrays, with JAX's argument
checks: loop carries must keep their pytree structure, shapes and dtypes from one iteration to
the next (a TypeError naming the first mismatch otherwise), `cond`'s predicate must be a scalar,
`switch`'s index is clamped into range, `scan` slices its `xs` along the leading axis and stacks
its `ys`. Under `jit` the specialiser compiles the same functions into the structured SSA
operations `cond`, `while_loop` and `scan`. In eager mode only the branch taken runs, so a
branch that disagrees with the other one in type is reported only when it is compiled.
"""
import operator

import numpy as np

from ..array import Array, to_array
from ..tree_util import tree_flatten, tree_unflatten, tree_map, tree_leaves


def _abstract(tree):
    leaves, treedef = tree_flatten(tree)
    return treedef, [_leaf_type(x) for x in leaves]


def _leaf_type(x):
    a = to_array(x) if not isinstance(x, Array) else x
    return (a.shape, a.dtype)


def _type_str(t):
    shape, dtype = t
    return f"{dtype}{list(shape)}"


def _check_carry(who, before, after, what="carry"):
    (tb, lb), (ta, la) = before, after
    if tb != ta:
        raise TypeError(f"{who} output and input must have identical types: the {what} has "
                        f"structure {tb} on input but {ta} on output")
    for i, (x, y) in enumerate(zip(lb, la)):
        if x != y:
            raise TypeError(f"{who} output and input must have identical types: {what} leaf "
                            f"{i} is {_type_str(x)} on input but {_type_str(y)} on output")


def _as_arrays(tree):
    return tree_map(lambda x: to_array(x) if not isinstance(x, Array) else x, tree)


def _concrete_bool(pred, who):
    p = to_array(pred, who)
    if p.shape != ():
        raise TypeError(f"{who}: pred must be a scalar, got {p.dtype}{list(p.shape)}")
    return bool(p._value)


def while_loop(cond_fun, body_fun, init_val):
    """Repeat `val = body_fun(val)` while `cond_fun(val)` is True."""
    val = _as_arrays(init_val)
    sig = _abstract(val)
    while True:
        c = to_array(cond_fun(val), "while_loop cond_fun")
        if c.shape != () or c.dtype != np.bool_:
            raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                            f"[{c.dtype}{list(c.shape)}].")
        if not bool(c._value):
            return val
        val = _as_arrays(body_fun(val))
        _check_carry("body_fun", sig, _abstract(val))


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """`for i in range(lower, upper): val = body_fun(i, val)`."""
    lo, hi = to_array(lower, "fori_loop"), to_array(upper, "fori_loop")
    if lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
        raise TypeError(f"lower and upper arguments to fori_loop must have integer dtypes, got "
                        f"{lo.dtype} and {hi.dtype}")
    idx_dtype = lo.dtype if not lo.weak_type else hi.dtype
    val = _as_arrays(init_val)
    sig = _abstract(val)
    for i in range(int(lo._value), int(hi._value)):
        val = _as_arrays(body_fun(Array(np.asarray(i, idx_dtype)), val))
        _check_carry("body_fun", sig, _abstract(val))
    return val


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """`carry, y = f(carry, x)` over the leading axis of `xs`; returns (carry, stacked ys)."""
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [to_array(x, "scan xs") for x in x_leaves]
    lengths = {x.shape[0] if x.ndim else None for x in x_leaves}
    if None in lengths:
        raise ValueError("scan got value with no leading axis to scan over: "
                         + ", ".join(f"{x.dtype}{list(x.shape)}" for x in x_leaves if not x.ndim))
    if length is not None:
        length = operator.index(length)
        lengths.add(length)
    if len(lengths) > 1:
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in sorted(lengths))}")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    n = lengths.pop()
    carry = _as_arrays(init)
    sig = _abstract(carry)
    ys = []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        x = tree_unflatten(x_tree, [Array(leaf._value[i], leaf.weak_type) for leaf in x_leaves])
        carry, y = f(carry, x)
        carry = _as_arrays(carry)
        _check_carry("scan body function carry", sig, _abstract(carry))
        ys.append(_as_arrays(y))
    if reverse:
        ys.reverse()
    return carry, _stack_trees(ys, n)


def _stack_trees(ys, n):
    if n == 0:
        return None
    leaves0, tree = tree_flatten(ys[0])
    cols = [[] for _ in leaves0]
    for y in ys:
        leaves, t = tree_flatten(y)
        if t != tree:
            raise TypeError(f"scan body function output structure changed between iterations: "
                            f"{tree} vs {t}")
        for c, leaf in zip(cols, leaves):
            c.append(leaf._value)
    return tree_unflatten(tree, [Array(np.stack(c), leaves0[i].weak_type)
                                 for i, c in enumerate(cols)])


def cond(pred, true_fun, false_fun, *operands, operand=None):
    """`true_fun(*operands)` if pred else `false_fun(*operands)`."""
    if operand is not None:
        operands = operands + (operand,)
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    p = to_array(pred, "lax.cond")
    if p.shape != ():
        raise TypeError(f"Pred must be a scalar, got {p._value.tolist()} of shape {p.shape}.")
    if p.dtype.kind not in "biu":
        raise TypeError(f"Pred type must be either boolean or number, got {p.dtype}.")
    return (true_fun if bool(p._value) else false_fun)(*operands)


def switch(index, branches, *operands, operand=None):
    """`branches[clamp(index, 0, len(branches) - 1)](*operands)`."""
    if operand is not None:
        operands = operands + (operand,)
    branches = list(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    i = to_array(index, "lax.switch")
    if i.shape != () or i.dtype.kind not in "iu":
        raise TypeError(f"Branch index must be scalar integer, got {i.dtype}{list(i.shape)}")
    k = min(max(int(i._value), 0), len(branches) - 1)
    return branches[k](*operands)


def map(f, xs, *, batch_size=None):  # noqa: A001
    """`stack([f(x) for x in xs])` over the leading axis, as a scan."""
    _, ys = scan(lambda c, x: (c, f(x)), (), xs)
    return ys


def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan with an associative `fn`, evaluated sequentially in eager mode."""
    leaves, tree = tree_flatten(elems)
    leaves = [to_array(x) for x in leaves]
    if not leaves:
        return elems
    moved = [np.moveaxis(x._value, axis, 0) for x in leaves]
    n = moved[0].shape[0]
    order = list(range(n))[::-1] if reverse else list(range(n))
    acc, outs = None, [None] * n
    for i in order:
        cur = tree_unflatten(tree, [Array(m[i]) for m in moved])
        acc = cur if acc is None else fn(acc, cur)
        outs[i] = tree_leaves(acc)
    stacked = [Array(np.moveaxis(np.stack([o[j]._value for o in outs]), 0, axis))
               for j in range(len(leaves))]
    return tree_unflatten(tree, stacked)
