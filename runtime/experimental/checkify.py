"""`kiln.experimental.checkify`: JAX's `jax.experimental.checkify` on kiln's checkify transform
(`kiln.compiler.transforms.checkify`, rules in `kiln.compiler.primitives.checks`).

`check(pred, msg, *fmt_args, **fmt_kwargs)` outside compiled code raises `JaxRuntimeError` at
once when `pred` is False; inside a function being specialised it becomes a `check` equation.
`checkify(f, errors)` stages `f` (its non-array arguments by value, as JAX closes over them;
for `f = jit(g)`, the arguments that jit traces are traced, Python numbers included, as in
JAX), then replays it with the checks of the categories in `errors` and returns `(Error, out)`:
inside a specialisation (`jit(checkify(f))`, `vmap(checkify(f))`) inline, outside compiled
once per argument signature and run on the reference backend. `jit` and `pmap` refuse a
function with a `check` that no checkify discharged, with JAX's ValueError
(`staging.compile_ssa`); eager transforms (`grad(f)`, `vmap(f)` outside `jit`) run it and
raise. An `Error` is a pytree: per slot a flag, a code
and a payload (docs/debugging.md).
"""
import numpy as np

from ..array import Array
from ..dispatch import is_traced
from ..tree_util import tree_flatten, tree_unflatten, tree_leaves, register_pytree_node
from ..jit import Jitted
from ..wrappers import user_facing, name_like
from .. import staging
from ..staging import leaf_value, wrap_outputs
from ..compiler.ir.builder import Builder, current
from ..compiler.ir.ssa import Literal, literal
from ..compiler.primitives import checks as C
from ..compiler.primitives.checks import (JaxRuntimeError, JaxException, FailedCheckError,
                                          NaNError, OOBError, DivisionByZeroError)
from ..compiler.transforms.checkify import checkify_emit

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks",
           "check", "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]

ErrorCategory = type[JaxException]   # an error category: one of the classes in the sets below

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


class Error:
    """An error value: `get()` is the message of the first failure (None if none), `throw()`
    raises it as a JaxRuntimeError. Mapped (vmap) errors report per example in `get()`."""
    __slots__ = ("_slots", "_leaves")

    def __init__(self, slots, leaves):
        self._slots = tuple(slots)
        self._leaves = list(leaves)

    def get(self):
        """The error message if an error happened, None otherwise."""
        exc = self.get_exception()
        return None if exc is None else str(exc)

    def get_exception(self):
        """The exception of the first error (a BatchedError for mapped errors), or None."""
        return C.first_error(self._slots, [np.asarray(x) for x in self._leaves])

    def throw(self):
        """Raise JaxRuntimeError if an error happened (`check_error`)."""
        _check_error(self)

    def __str__(self):
        return f"Error({self.get()})"

    __repr__ = __str__


register_pytree_node(Error, lambda e: (list(e._leaves), e._slots),
                     lambda slots, leaves: Error(slots, leaves))

init_error = Error((), [])


def _traced(values):
    return current() is not None or any(is_traced(x) for x in values)


def _check_error(err, debug=False):
    if not err._slots:
        return
    if _traced(err._leaves):
        leaves = list(err._leaves)
        batch = _aval(leaves[0]).shape
        if batch:   # a mapped error: one example's (the examples flattened, in order)
            leaves = C.reduce_leading(err._slots, [
                x.reshape((-1,) + tuple(_aval(x).shape[len(batch):])) for x in leaves])
        current().bind(C.check, leaves, {"slots": err._slots, "debug": debug})
        return
    if not debug:
        failure = C.failure(err._slots, [leaf_value(x) for x in err._leaves])
        if failure is not None:
            raise failure


def check_error(error):
    """Raise if `error` holds a failure; under checkify, its failure joins the error."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes an Error as argument, got type {type(error)} "
                        f"instead.")
    _check_error(error)


def _is_scalar_pred(pred):
    if isinstance(pred, bool):
        return True
    if type(pred) is Array or is_traced(pred):
        return pred.shape == () and pred.dtype == np.dtype(bool)
    return False


def _check(pred, msg, debug, *fmt_args, **fmt_kwargs):
    if not _is_scalar_pred(pred):
        raise TypeError(f"{'debug_check' if debug else 'check'} takes a scalar pred as "
                        f"argument, got {pred}")
    leaves, tree = tree_flatten((fmt_args, fmt_kwargs))
    for arg in leaves:
        if not (isinstance(arg, (Array, np.ndarray)) or is_traced(arg)):
            raise TypeError(f"Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {arg!r} of type {type(arg)}.")
    if not _traced([pred, *leaves]):
        if debug or bool(pred):
            return
        exc = FailedCheckError(msg, *fmt_args, **fmt_kwargs)
        raise JaxRuntimeError(str(exc)) from exc
    code = C.new_code(FailedCheckError, (msg,), lambda payload: tree_unflatten(
        tree, wrap_outputs([np.asarray(p) for p in payload], [False] * len(payload))))
    key = C.slot_key(FailedCheckError, [_aval(x) for x in leaves])
    b = current()
    flag = literal(not pred) if isinstance(pred, bool) else b.bind(C.PRIMITIVES["not"], [pred], {})
    b.bind(C.check, [flag, literal(code, np.int32), *leaves], {"slots": (key,), "debug": debug})


def _aval(x):
    return x.aval if is_traced(x) else staging.leaf_aval(x, "a format argument")[0]


@user_facing
def check(pred, msg, *fmt_args, debug=False, **fmt_kwargs):
    """Check `pred`; if False, an error with `msg` (formatted with the array arguments)."""
    _check(pred, msg, debug, *fmt_args, **fmt_kwargs)


@user_facing
def debug_check(pred, msg, *fmt_args, **fmt_kwargs):
    """`check` that only acts under checkify; elsewhere it does nothing."""
    _check(pred, msg, True, *fmt_args, **fmt_kwargs)


class _Entry(staging.Entry):
    __slots__ = ("executable", "consts", "out_tree", "out_weak", "slots", "num_err")


def _leaf(x):
    """An error leaf as a traced value (a Literal, a placeholder's or a check's code, copied)."""
    return current().bind(C.PRIMITIVES["copy"], [x], {}) if type(x) is Literal else x


def _jit_traced(f, args, kwargs):
    """For `f` made by `kiln.jit`: per leaf of `(args, kwargs)`, whether its jit traces it (the
    dynamic arguments, Python numbers among them, as JAX's jit makes them traced values);
    else None."""
    if not isinstance(f, Jitted):
        return None
    nums, names = f._static.nums, f._static.names
    flags = []
    for i, a in enumerate(args):
        flags += [i not in nums and i - len(args) not in nums] * len(tree_leaves(a))
    for k in sorted(kwargs):   # the order of a dict's leaves
        flags += [k not in names] * len(tree_leaves(kwargs[k]))
    return flags


def checkify(f, errors=user_checks):
    """Functionalize the `check`s in `f` and add the checks of `errors`: the result returns
    `(Error, f's output)`."""
    enabled = frozenset(errors)
    cache = staging.GuardedCache()

    def stage(treedef, statics, avals):
        def rebuild(tracers):
            return tree_unflatten(treedef, staging.merge_leaves(tracers, statics))
        return staging.stage(f, avals, rebuild, staging.function_name(f, "checkify"),
                             api="checkified by kiln.experimental.checkify")

    def compile_entry(treedef, statics, avals):
        st = stage(treedef, statics, avals)
        b = Builder(st.fn.name, names=st.names)
        with b:
            inputs = [b.new_input(v.aval, v.name) for v in st.fn.invars]
            err = C.ErrorState()
            outs = checkify_emit(st.fn, inputs, err, enabled)
            leaves = err.leaves()
            fn = b.build(leaves + list(outs))
        entry = _Entry()
        ssa, entry.executable = staging.compile_ssa(fn)
        entry.consts = list(st.extra) + [value for _, value, _ in b.consts]
        entry.out_tree, entry.guards = st.out_tree, st.guards
        entry.out_weak = [v.aval.weak_type for v in ssa.outvars]
        entry.slots, entry.num_err = err.keys(), len(leaves)
        return entry

    @user_facing
    def checked_fun(*args, **kwargs):
        leaves, treedef = tree_flatten((tuple(args), kwargs))
        mask = staging.static_mask(leaves, _jit_traced(f, args, kwargs) or
                                   [False] * len(leaves), True)
        statics, dynamic = staging.split_leaves(leaves, mask)
        avals = list(staging.leaf_avals(dynamic))
        if _traced(dynamic):
            st = stage(treedef, statics, avals)
            err = C.ErrorState()
            outs = checkify_emit(st.fn, list(dynamic) + list(st.extra), err, enabled)
            return (Error(err.keys(), [_leaf(x) for x in err.leaves()]),
                    tree_unflatten(st.out_tree, outs))
        entry = cache.lookup((treedef, statics, tuple(avals)),
                             lambda stale: compile_entry(treedef, statics, avals))
        outs = wrap_outputs(entry.executable(*[leaf_value(x) for x in dynamic], *entry.consts),
                            entry.out_weak)
        n = entry.num_err
        return Error(entry.slots, outs[:n]), tree_unflatten(entry.out_tree, outs[n:])

    name_like(checked_fun, f)
    return checked_fun


def __dir__():
    return sorted(__all__)
