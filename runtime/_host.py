"""The runtime side of the specialiser's host interface (`kiln.compiler.frontend.host`).

The specialiser compiles Python control flow on traced values into the structured primitives;
it reaches pytrees, arrays and the staged `lax` control flow through these functions. The one
thing added on top of `lax` here is type joining for Python `if` statements: the branches of a
Python `if` may produce a weak Python scalar on one side and an array on the other, or static
values that agree; `switch` unifies them (as Python's dynamic typing would) instead of
demanding identical types as `lax.cond` does.
"""
import numpy as np

from .array import Array, to_array
from .compiler.errors import CompileError
from .compiler.ir.builder import current, trace_region, close_regions
from .compiler.frontend.host import HOST
from .compiler.ir import dtypes
from .compiler.ir.abstract import ShapedArray
from .compiler.primitives import PRIMITIVES as P
from .dispatch import bind, is_traced as _is_traced
from .tree_util import tree_flatten, tree_unflatten
from .lax import _staged
from . import lax, ref_regions



def _is_numeric_static(x):
    return isinstance(x, (bool, int, float, complex, np.ndarray, np.generic, Array))


def _aval(x):
    if _is_traced(x) or isinstance(x, Array):
        return x.aval
    a = to_array(x)
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def _same_static(values):
    first = values[0]
    for v in values[1:]:
        if type(v) is not type(first):
            return False
        if isinstance(first, (np.ndarray, Array)):
            return False
        try:
            if not (v is first or v == first):
                return False
        except Exception:
            return False
    return True


def _leaf_names(names, trees_per_name):
    out = []
    for n, count in zip(names, trees_per_name):
        out += [n] * count
    return out


def switch(index, runners, names=(), info=None):
    """Specialise each runner as a branch of one `cond`; join their results. Refs the
    branches write are extra results (ref_regions)."""
    def carry(refs, values):
        def branch(run):
            def run_refs():
                ref_regions.enter(refs, values)
                return [*run(), ref_regions.values(refs)]
            return run_refs
        out = _switch(index, [branch(run) for run in runners], [*names, "Ref"], info)
        return out[:-1], out[-1]
    return ref_regions.written_in(lambda: _switch(index, runners, names, info), carry)


def _switch(index, runners, names, info):
    b = current()
    # Pass 1: trace every branch, recording output structure and leaves.
    records = []
    for i, run in enumerate(runners):
        rec = {}

        def flat(inputs, run=run, rec=rec):
            outs = run()
            leaves, tree = tree_flatten(list(outs))
            rec["tree"], rec["leaves"] = tree, leaves
            rec["counts"] = [len(tree_flatten(o)[0]) for o in outs]
            return []
        trace_region(b, f"probe{i}", flat, [])
        records.append(rec)
    tree = records[0]["tree"]
    leaf_names = _leaf_names(list(names), records[0]["counts"])
    for rec in records[1:]:
        if rec["tree"] != tree:
            raise CompileError(f"the branches of an `if` on a traced value give "
                               f"{_which(names)} different structures: {tree} vs "
                               f"{rec['tree']}", info, "Make both branches assign values of "
                               "the same kind (arrays, or the same Python containers).")
    n = len(records[0]["leaves"])
    static_idx, targets = {}, {}
    for j in range(n):
        vals = [rec["leaves"][j] for rec in records]
        if all(v is vals[0] for v in vals) or (
                not any(_is_traced(v) for v in vals) and _same_static(vals)):
            static_idx[j] = vals[0]  # static, or a value from before the `if` left unchanged
            continue
        for v in vals:
            if not (_is_traced(v) or _is_numeric_static(v)):
                raise CompileError(f"the branches of an `if` on a traced value give "
                                   f"{_name(leaf_names, j)} different non-array values "
                                   f"({vals[0]!r} and {vals[-1]!r})", info,
                                   "Such values must not depend on traced data.")
        avals = [_aval(v) for v in vals]
        shapes = {a.shape for a in avals}
        strong = {a.dtype for a in avals if not a.weak_type}  # weak Python scalars join
        if len(shapes) > 1 or len(strong) > 1:
            raise TypeError(_located_msg(
                f"the branches of an `if` on a traced value disagree on "
                f"{_name(leaf_names, j)}: " + ", ".join(
                    f"{a.str_short()} in the {'true' if k == 1 else 'false' if k == 0 else f'#{k}'} "
                    f"branch" for k, a in enumerate(avals)) + ". Give it the same shape and "
                "dtype on every path (e.g. with .astype or jnp.broadcast_to)", info))
        dtype, weak = dtypes.result_type(*((a.dtype, a.weak_type) for a in avals))
        targets[j] = ShapedArray(avals[0].shape, dtype, weak)
    dyn = [j for j in range(n) if j not in static_idx]
    # Pass 2: the real branches, casting each dynamic leaf to its joined type.
    children = []
    for i, run in enumerate(runners):
        def flat(inputs, run=run):
            outs = run()
            leaves, _ = tree_flatten(list(outs))
            return [_cast(leaves[j], targets[j]) for j in dyn]
        children.append(trace_region(b, f"branch{i}", flat, []))
    fns, outers = close_regions(children)
    idx = index if _is_traced(index) else to_array(index)
    if idx.dtype != np.int32:
        idx = lax.convert_element_type(idx, np.int32)
    # A branch with equations but no outputs may still print (an effect): keep its `cond`.
    keep = dyn or any(fn.eqns for fn in fns)
    outs = ()
    if keep:   # the `cond` is the `if` statement's (errors of transforms name its line)
        prev, b.info = b.info, info or b.info
        try:
            outs = bind(P["cond"], idx, *outers, branches=tuple(fns))
        finally:
            b.info = prev
    leaves = [None] * n
    for j, v in static_idx.items():
        leaves[j] = v
    for j, v in zip(dyn, outs):
        leaves[j] = v
    return tree_unflatten(tree, leaves)


def _cast(x, aval):
    a = x if (_is_traced(x) or isinstance(x, Array)) else to_array(x)
    if a.dtype != aval.dtype or a.weak_type != aval.weak_type:
        a = lax.convert_element_type(a, aval.dtype)
    return a


def _which(names):
    return ", ".join(repr(n) for n in names) if names else "their results"


def _name(leaf_names, j):
    return f"variable {leaf_names[j]!r}" if j < len(leaf_names) else f"result {j}"


def _located_msg(msg, info):
    from .compiler.errors import located
    return located(msg, info)


def _named_errors(fn, names, info, what):
    try:
        return fn()
    except TypeError as e:
        text = str(e)
        if names and "carry leaf" in text:
            text += f" (the {what} carries {', '.join(repr(n) for n in names)})"
            raise TypeError(_located_msg(text, info)) from None
        raise


def while_loop(cond_fun, body_fun, init, names=(), info=None):
    return _named_errors(lambda: _staged.while_loop(cond_fun, body_fun, init), names, info,
                         "while loop")


def fori_loop(lo, hi, body_fun, init, names=(), info=None):
    return _named_errors(lambda: _staged.fori_loop(lo, hi, body_fun, init), names, info,
                         "for loop")


def scan(f, init, xs, length, reverse, names=(), info=None):
    return _named_errors(lambda: _staged.scan(f, init, xs, length, reverse), names, info,
                         "for loop")


def select(pred, a, b):
    from . import numpy as jnp
    return jnp.where(pred, a, b)


def logical_not(x):
    from . import numpy as jnp
    return jnp.logical_not(x)


def logical_and(x, y):
    from . import numpy as jnp
    return jnp.logical_and(x, y)


def logical_or(x, y):
    from . import numpy as jnp
    return jnp.logical_or(x, y)


def debug_print(fmt, args, kwargs):
    from .debug import print_callback
    return print_callback(fmt, args, kwargs)


HOST.tree_flatten = tree_flatten
HOST.tree_unflatten = tree_unflatten
HOST.to_array = to_array
HOST.switch = switch
HOST.while_loop = while_loop
HOST.fori_loop = fori_loop
HOST.scan = scan
HOST.select = select
HOST.logical_not = logical_not
HOST.logical_and = logical_and
HOST.logical_or = logical_or
HOST.debug_print = debug_print


def debug_breakpoint(fn, variables, where, kwargs):
    import builtins
    import os
    from .debugger import compiled_breakpoint
    if fn is builtins.breakpoint and os.environ.get("PYTHONBREAKPOINT") == "0":
        return None   # Python's switch for breakpoint(): off
    return compiled_breakpoint(variables, where, kwargs)


def _breakpoint_functions():
    import builtins
    from .debugger import breakpoint as debug_breakpoint_function
    return (builtins.breakpoint, debug_breakpoint_function)


HOST.debug_breakpoint = debug_breakpoint
HOST.breakpoints = _breakpoint_functions()
