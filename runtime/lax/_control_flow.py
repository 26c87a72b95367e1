"""Structured control flow in eager mode: fori_loop, while_loop, scan, cond, switch, map and
associative_scan.

Outside `jit` these run as Python loops and branches over eager arrays, with JAX's typing
rules. JAX traces a loop body once, with the abstract values of the initial carry; here the
first iteration plays that role (a loop that runs zero times evaluates its body once, and
discards the values, to learn the output types):

* carries keep their pytree structure, shapes and dtypes from one iteration to the next (a
  TypeError with JAX's message names every mismatching component);
* a weakly typed initial carry (a Python scalar) whose body output has another dtype is first
  promoted to the common dtype, as JAX does (`fori_loop(0, 3, lambda i, c: c * 1.5, 0)` is a
  float32 loop);
* results carry the weak types of that first body output, and `scan`'s stacked `ys` those of
  the first `y`.

`cond`'s predicate must be a scalar (floats and ints mean `pred != 0`), `switch`'s index is
clamped into range, `fori_loop` with concrete bounds is a `scan` whose index is a weakly typed
int, and `associative_scan` uses JAX's parallel-prefix algorithm (`fn` is called on slices), so
rounding matches JAX. In eager mode only the branch taken by `cond`/`switch` runs, so a branch
whose output type differs from the others is reported only when the function is compiled.
Under `jit` the specialiser compiles these functions into the structured SSA operations `cond`,
`while_loop` and `scan`. A long eager loop compiles its iterations past
`eager_tiers.HOT_ITERATIONS` (`eager_tiers.compiled_rest`): `fori_loop`'s rest is a
`fori_loop` with traced bounds, `while_loop`'s a `while_loop`, `scan`'s a `scan` of what is left
of `xs`, whose `ys` are joined to the eager ones.
"""
import functools
import inspect
import operator

import numpy as np

from ..array import Array, to_array
from ..compiler.ir import dtypes
from ..tree_util import (tree_flatten, tree_flatten_with_path, tree_unflatten, tree_structure,
                         treedef_is_leaf, flatten_one_level_with_keys, keystr)
from .. import eager_tiers
from . import _ops as lax
from . import _staged

_NO_OPERAND = object()


# ------------------------------------------------------------------------------ helpers

def _as_arrays(tree):
    leaves, treedef = tree_flatten(tree)
    return treedef, [x if type(x) is Array else to_array(x) for x in leaves]


def _retype(leaves, weak_types):
    """The leaves with the weak types JAX's traced output would have."""
    return [x if x.weak_type == w else Array(x._value, w) for x, w in zip(leaves, weak_types)]


def _type_str(x):
    return f"{x.dtype}[{','.join(str(d) for d in x.shape)}]"


def _carry_name(fun, default=None):
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return default
    return params[0] if params else default


def _component(carry_name, path):
    if carry_name:
        return (f"the input carry component {carry_name}{keystr(path)}" if path
                else f"the input carry {carry_name}")
    return f"the input carry at path {keystr(path)}" if path else "the input carry"


def _capitalize(s):
    return s[0].upper() + s[1:]


def _bullets(diffs):
    if len(diffs) == 1:
        return f"{_capitalize(diffs[0])}.\n"
    return "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"


def _is_leaf(t):
    return t is not None and treedef_is_leaf(tree_structure(t))


def _structure_errors(path, t1, t2):
    """JAX's `equality_errors`: (path, thing1, thing2, explanation) per structural difference."""
    if _is_leaf(t1) and _is_leaf(t2):
        return
    if type(t1) is not type(t2):
        yield path, str(type(t1)), str(type(t2)), "their Python types differ"
        return
    if isinstance(t1, (list, tuple)) and len(t1) != len(t2):
        yield (path, f"{type(t1).__name__} of length {len(t1)}",
               f"{type(t2).__name__} of length {len(t2)}", "the lengths do not match")
        return
    (c1, meta1), (c2, meta2) = flatten_one_level_with_keys(t1), flatten_one_level_with_keys(t2)
    if len(c1) != len(c2):
        yield (path, f"{type(t1)} with {len(c1)} children", f"{type(t2)} with {len(c2)} "
               f"children", "the numbers of children do not match")
        return
    if meta1 != meta2:
        yield (path, f"{type(t1)} with pytree metadata {meta1}",
               f"{type(t2)} with pytree metadata {meta2}",
               "the pytree node metadata does not match")
        return
    for (k, a), (_, b) in zip(c1, c2):
        yield from _structure_errors(path + (k,), a, b)


def _check_carry_type(what, carry_name, in_tree, in_leaves, out_tree, out_leaves):
    """JAX's `_check_carry_type`: same pytree structure, then same shapes and dtypes."""
    if in_tree != out_tree:
        diffs = [f"{_component(carry_name, p)} is a {a} but the corresponding component of the "
                 f"carry output is a {b}, so {why}"
                 for p, a, b, why in _structure_errors((), tree_unflatten(in_tree, in_leaves),
                                                       tree_unflatten(out_tree, out_leaves))]
        detail = _bullets(diffs) if diffs else (f"the input tree structure is:\n{in_tree}\n"
                                                f"the output tree structure is:\n{out_tree}\n")
        raise TypeError(f"{what} function carry input and carry output must have the same "
                        f"pytree structure, but they differ:\n\n{detail}\nRevise the function "
                        f"so that the carry output has the same pytree structure as the carry "
                        f"input.")
    paths = [p for p, _ in tree_flatten_with_path(tree_unflatten(in_tree, in_leaves))[0]]
    diffs = [f"{_component(carry_name, p)} has type {_type_str(a)} but the corresponding output "
             f"carry component has type {_type_str(b)}, so the "
             f"{'dtypes' if a.dtype != b.dtype else 'shapes'} do not match"
             for p, a, b in zip(paths, in_leaves, out_leaves)
             if a.dtype != b.dtype or a.shape != b.shape]
    if diffs:
        raise TypeError(f"{what} function carry input and carry output must have equal types, "
                        f"but they differ:\n\n{_bullets(diffs)}\nRevise the function so that "
                        f"all output types match the corresponding input types.")


def _promote_weak_inputs(in_leaves, out_leaves):
    """JAX's `_promote_weak_typed_input`: a weak initial carry leaf whose output type differs
    becomes the (strong) common dtype. Returns (leaves, changed)."""
    new, changed = [], False
    for x, y in zip(in_leaves, out_leaves):
        if x.weak_type and (x.dtype != y.dtype or x.shape != y.shape):
            dtype, _ = dtypes.result_type((x.dtype, True), (y.dtype, y.weak_type))
            x, changed = lax.convert_element_type(x, dtype), True
        new.append(x)
    return new, changed


class _Carry:
    """A loop carry as (treedef, array leaves), checked against the first body output."""

    def __init__(self, what, carry_name, tree):
        self.what, self.carry_name = what, carry_name
        self.tree, self.leaves = _as_arrays(tree)
        self.out_weak = None

    def value(self, leaves=None):
        return tree_unflatten(self.tree, self.leaves if leaves is None else leaves)

    def first_output(self, out):
        """Check the first body output; returns False when the initial carry was promoted
        (the first iteration must then be run again)."""
        tree, leaves = _as_arrays(out)
        if tree != self.tree:
            _check_carry_type(self.what, self.carry_name, self.tree, self.leaves, tree, leaves)
        self.leaves, changed = _promote_weak_inputs(self.leaves, leaves)
        if changed:
            return False
        _check_carry_type(self.what, self.carry_name, self.tree, self.leaves, tree, leaves)
        self.out_weak = [x.weak_type for x in leaves]
        return True

    def next_output(self, out):
        tree, leaves = _as_arrays(out)
        _check_carry_type(self.what, self.carry_name, self.tree, self.leaves, tree, leaves)
        self.leaves = leaves

    def result(self):
        return self.value(_retype(self.leaves, self.out_weak))


# ------------------------------------------------------------------------------- loops

def _predicate(cond_fun, val):
    out = cond_fun(val)
    tree, leaves = _as_arrays(out)
    if not treedef_is_leaf(tree) or len(leaves) != 1:
        raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {tree}.")
    p = leaves[0]
    if p.shape != () or p.dtype != np.bool_:
        weak = ", weak_type=True" if p.weak_type else ""
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"[ShapedArray({_type_str(p)}{weak})].")
    return bool(p._host())


def while_loop(cond_fun, body_fun, init_val):
    """Repeat `val = body_fun(val)` while `cond_fun(val)` is True."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    if _staged.tracing():
        return _staged.while_loop(cond_fun, body_fun, init_val)
    carry = _Carry("while_loop body", _carry_name(body_fun), init_val)
    while True:
        go = _predicate(cond_fun, carry.value())
        out = body_fun(carry.value())  # the first iteration (or, if none runs, the type probe)
        if carry.first_output(out):
            break
    if go:
        carry.next_output(out)
        done = 1
        while _predicate(cond_fun, carry.value()):
            if done == eager_tiers.HOT_ITERATIONS:   # a long loop: the rest compiled
                rest = eager_tiers.compiled_rest(("while_loop", cond_fun, body_fun),
                                                 functools.partial(_while_rest, cond_fun,
                                                                   body_fun), carry.value())
                if rest is not None:
                    carry.next_output(rest)
                    break
            carry.next_output(body_fun(carry.value()))
            done += 1
    return carry.result()


def _while_rest(cond_fun, body_fun, val):
    return while_loop(cond_fun, body_fun, val)


def _bound_dtype(lower, upper):
    """JAX's rule: equal dtypes, or a weak Python int next to a signed integer bound."""
    lo, hi = to_array(lower, "fori_loop"), to_array(upper, "fori_loop")
    if lo.dtype == hi.dtype:
        return lo, hi
    if lo.dtype.kind == "i" and hi.dtype.kind == "i" and lo.weak_type != hi.weak_type:
        return lo, hi
    raise TypeError(f"lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo.dtype.name} and {hi.dtype.name}")


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """`for i in range(lower, upper): val = body_fun(i, val)`.

    As in JAX with concrete bounds, this is a `scan` over `(i, val)` whose index `i` is a weakly
    typed Python int (int32, or int64 with x64)."""
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    if _staged.tracing():
        return _staged.fori_loop(lower, upper, body_fun, init_val)
    lo, hi = _bound_dtype(lower, upper)
    start, stop = int(lo._host()), int(hi._host())

    def rest(carry_value, _):   # one compile for every trip count
        done = eager_tiers.compiled_rest(("fori_loop", body_fun),
                                         functools.partial(_fori_rest, body_fun),
                                         carry_value, stop)
        return None if done is None else (done, None)

    (_, result), _ = _scan_eager(functools.partial(_fori_step, body_fun), (start, init_val),
                                 None, max(stop - start, 0), False, rest)
    return result


def _fori_step(body_fun, loop_carry, _):
    i, x = loop_carry
    return (lax.add(i, 1), body_fun(i, x)), None


def _fori_rest(body_fun, loop_carry, stop):
    i, x = loop_carry
    return stop, fori_loop(i, stop, body_fun, x)


def _scan_length(x_leaves, length):
    for x in x_leaves:
        if not x.ndim:
            raise ValueError(f"scan got value with no leading axis to scan over: "
                             f"{_type_str(x)}.")
    lengths = [x.shape[0] for x in x_leaves]
    if length is not None:
        length = operator.index(length)
        if any(n != length for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return length
    if len(set(lengths)) > 1:
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in lengths)}.")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return lengths[0]


def _scan_step(f, carry_value, x):
    out = f(carry_value, x)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"scan body output must be a pair, got {out!r}.")
    return out


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """`carry, y = f(carry, x)` over the leading axis of `xs`; returns (carry, stacked ys)."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [to_array(x, "scan xs") for x in x_leaves]
    n = _scan_length(x_leaves, length)
    if _staged.tracing():
        return _staged.scan(f, init, xs, n, reverse)

    def rest(carry_value, xs_left):
        left = tree_flatten(xs_left)[0][0].shape[0] if x_leaves else n - eager_tiers.HOT_ITERATIONS
        return eager_tiers.compiled_rest(
            ("scan", f, reverse, left), functools.partial(_scan_rest, f, reverse, left),
            carry_value, xs_left)

    return _scan_eager(f, init, xs, n, reverse, rest)


def _scan_rest(f, reverse, length, carry, xs):
    return scan(f, carry, xs, length=length, reverse=reverse)


def _scan_eager(f, init, xs, n, reverse, rest_of):
    """`scan` outside `jit`: its body run eagerly; after `eager_tiers.HOT_ITERATIONS`
    iterations, `rest_of(carry, xs left)` may run the others compiled ((carry, ys), or None
    to go on eagerly)."""
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [to_array(x, "scan xs") for x in x_leaves]
    order = range(n - 1, -1, -1) if reverse else range(n)

    def x_at(i):
        return tree_unflatten(x_tree, [Array(leaf._value[i], leaf.weak_type)
                                       for leaf in x_leaves])

    # The first iteration types the scan (with an all-zero x if there is none).
    first_x = x_at(order[0]) if n else tree_unflatten(
        x_tree, [Array(np.zeros(x.shape[1:], x.dtype), x.weak_type) for x in x_leaves])
    carry = _Carry("scan body", _carry_name(f), init)
    while True:
        out_carry, y = _scan_step(f, carry.value(), first_x)
        if carry.first_output(out_carry):
            break
    y_tree, y0 = _as_arrays(y)
    if n == 0:
        return carry.result(), tree_unflatten(
            y_tree, [Array(np.zeros((0,) + v.shape, v.dtype), v.weak_type) for v in y0])
    carry.next_output(out_carry)
    ys, rest = [y0], None
    for done, i in enumerate(list(order)[1:], 1):
        if done == eager_tiers.HOT_ITERATIONS:   # a long loop: the rest compiled
            left = n - done   # iterations left: indices [done, n), or [0, left) reversed
            part = [Array(x._value[:left] if reverse else x._value[done:], x.weak_type)
                    for x in x_leaves]
            rest = rest_of(carry.value(), tree_unflatten(x_tree, part))
            if rest is not None:
                carry.next_output(rest[0])
                rest = _as_arrays(rest[1])
                break
        out_carry, y = _scan_step(f, carry.value(), x_at(i))
        carry.next_output(out_carry)
        tree, leaves = _as_arrays(y)
        if tree != y_tree:
            raise TypeError(f"scan body function output structure changed between iterations: "
                            f"{y_tree} vs {tree}")
        ys.append(leaves)
    if reverse:
        ys.reverse()
    stacked = [np.stack([row[j]._value for row in ys]) for j in range(len(y0))]
    if rest is not None:   # the compiled iterations' ys, in index order
        if rest[0] != y_tree:
            raise TypeError(f"scan body function output structure changed between "
                            f"iterations: {y_tree} vs {rest[0]}")
        stacked = [np.concatenate([r._value, s] if reverse else [s, r._value])
                   for s, r in zip(stacked, rest[1])]
    return carry.result(), tree_unflatten(
        y_tree, [Array(s, y.weak_type) for s, y in zip(stacked, y0)])


def map(f, xs, *, batch_size=None):  # noqa: A001
    """`stack([f(x) for x in xs])` over the leading axis, as a scan (`batch_size` does not
    change the result)."""
    if batch_size is not None and operator.index(batch_size) < 1:
        raise ValueError(f"lax.map: batch_size must be a positive integer, got {batch_size}")
    _, ys = scan(lambda c, x: (c, f(x)), (), xs)
    return ys


# ------------------------------------------------------------------------------ branches

def _operands(operands, operand):
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand!r} and positional operands {operands!r}")
    return (operand,)


def _call_branch(fun, operands):
    tree, leaves = _as_arrays(operands)
    out_tree, out = _as_arrays(fun(*tree_unflatten(tree, leaves)))
    return tree_unflatten(out_tree, out)


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """`true_fun(*operands)` if pred else `false_fun(*operands)`; JAX's deprecated form
    `cond(pred, true_operand, true_fun, false_operand, false_fun)` too."""
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _operands(operands, operand)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, (list, tuple, str)):
        raise TypeError(f"Pred must be a scalar, got {pred} of type {type(pred)}")
    p = to_array(pred, "lax.cond")
    if p.shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {p.shape}.")
    if p.dtype.kind not in "biuf":
        raise TypeError(f"Pred type must be either boolean or number, got {p.dtype}.")
    if _staged.is_traced(p):
        if p.dtype != np.bool_:
            p = lax.ne(p, lax.full_like(p, 0))
        return _staged.cond(p, true_fun, false_fun, *operands)
    return _call_branch(true_fun if bool(p._host()) else false_fun, operands)


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """`branches[clamp(index, 0, len(branches) - 1)](*operands)`."""
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _operands(operands, operand)
    i = to_array(index, "lax.switch")
    if i.shape != ():
        raise TypeError(f"Branch index must be scalar, got {index} of shape {i.shape}.")
    if i.dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {i.dtype}")
    if not branches:
        raise ValueError("Empty branch sequence")
    if _staged.is_traced(i):
        return _staged.switch(i, branches, *operands)
    k = min(max(int(i._host()), 0), len(branches) - 1)
    return _call_branch(branches[k], operands)


# ---------------------------------------------------------------------- associative_scan

def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan with an associative `fn`, by JAX's parallel-prefix recursion: `fn` is
    applied to whole slices (it must be vectorised), in the same order as JAX."""
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    leaves, tree = tree_flatten(elems)
    leaves = [to_array(x, "associative_scan") for x in leaves]
    if not leaves:
        return elems
    axis = lax._canonical_axis(axis, leaves[0].ndim)
    n = leaves[0].shape[axis]
    if any(x.shape[axis] != n for x in leaves[1:]):
        raise ValueError(f"Array inputs to associative_scan must have the same first "
                         f"dimension. (saw: {[x.shape for x in leaves]})")
    if reverse:
        leaves = [lax.rev(x, (axis,)) for x in leaves]

    def combine(a, b):
        return tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))[0]

    out = _prefix_scan(combine, leaves, axis)
    if reverse:
        out = [lax.rev(x, (axis,)) for x in out]
    return tree_unflatten(tree, out)


def _prefix_scan(combine, elems, axis):
    n = elems[0].shape[axis]
    if n < 2:
        return elems
    sl = lax.slice_in_dim
    reduced = combine([sl(e, 0, n - 1, 2, axis) for e in elems],
                      [sl(e, 1, None, 2, axis) for e in elems])
    odd = _prefix_scan(combine, reduced, axis)
    if n % 2 == 0:
        even = combine([sl(e, 0, e.shape[axis] - 1, 1, axis) for e in odd],
                       [sl(e, 2, None, 2, axis) for e in elems])
    else:
        even = combine(odd, [sl(e, 2, None, 2, axis) for e in elems])
    even = [lax.concatenate([sl(e, 0, 1, 1, axis), r], axis) for e, r in zip(elems, even)]
    return [_interleave(a, b, axis) for a, b in zip(even, odd)]


def _interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... along `axis` (len(a) is len(b) or len(b) + 1)."""
    same = a.shape[axis] == b.shape[axis]
    a_pad, b_pad = [(0, 0, 0)] * a.ndim, [(0, 0, 0)] * b.ndim
    a_pad[axis] = (0, 1 if same else 0, 1)
    b_pad[axis] = (1, 0 if same else 1, 1)
    op = lax.bitwise_or if a.dtype == np.bool_ else lax.add
    return op(lax.pad(a, lax.full((), 0, a.dtype), a_pad),
              lax.pad(b, lax.full((), 0, b.dtype), b_pad))
