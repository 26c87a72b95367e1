"""Structured control flow while kiln specialises a function: `lax.cond`, `switch`,
`while_loop`, `fori_loop`, `scan` and `map` become the `cond`, `while_loop` and `scan`
primitives with their bodies as regions (instead of running them as Python loops).

Each body is specialised once on fresh traced inputs of the carry's types; values it reads
from the enclosing function are captured as extra operands. Pytrees are flattened here; the
compiler only sees flat lists of values. JAX's checks apply: a loop body must return its
carry's structure, shapes and dtypes; a weakly typed initial value (a Python scalar) is
promoted to the type the body gives it, as JAX does.
"""
import numpy as np

from ..array import to_array
from ..compiler.ir.builder import current, trace_region, close_regions
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.ir.abstract import ShapedArray
from ..compiler.ir.ssa import Function
from ..tree_util import tree_flatten, tree_unflatten
from ..compiler.primitives.collectives import holds_collectives
from ..dispatch import bind, is_traced
from .. import ref_regions


def tracing():
    return current() is not None



def _bind(prim, *args, **params):
    """`bind`, which runs control flow on constant operands at once, except around collectives
    (`lax.psum` in a loop body): those only the transform binding their axis can evaluate."""
    regions = [r for v in params.values() for r in (v if isinstance(v, tuple) else (v,))
               if isinstance(r, Function)]
    if any(map(holds_collectives, regions)):
        return current().bind(prim, args, params)
    return bind(prim, *args, **params)


def _aval(x):
    if hasattr(x, "aval"):
        return x.aval
    a = to_array(x)
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def _flat_avals(tree):
    leaves, treedef = tree_flatten(tree)
    return leaves, treedef, [_aval(x) for x in leaves]


def _describe(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _check_same(what, treedef, avals, out_tree, out_avals):
    if out_tree != treedef:
        raise TypeError(f"{what} output and input must have identical types: the carry has "
                        f"structure {treedef} on input but {out_tree} on output")
    for i, (a, b) in enumerate(zip(avals, out_avals)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TypeError(f"{what} output and input must have identical types: carry leaf "
                            f"{i} is {a.str_short()} on input but {b.str_short()} on output")


def _body_outputs(fn, treedef):
    """Wrap a pytree function as a flat one, recording its output tree and types."""
    record = {}

    def flat(inputs):
        out = fn(tree_unflatten(treedef, inputs))
        leaves, out_tree = tree_flatten(out)
        record["tree"] = out_tree
        record["avals"] = [_aval(x) for x in leaves]
        return leaves
    return flat, record


def _promote_weak(init_avals, out_avals):
    """JAX's rule: a weakly typed initial carry takes the type the body gives it."""
    return [ShapedArray(o.shape, o.dtype, o.weak_type)
            if (a.weak_type and (a.dtype != o.dtype or not o.weak_type) and a.shape == o.shape)
            else a for a, o in zip(init_avals, out_avals)]


def _convert(leaves, avals):
    from .. import lax
    leaves = [x if hasattr(x, "aval") else to_array(x) for x in leaves]
    return [lax.convert_element_type(x, a.dtype)
            if _aval(x).dtype != a.dtype or (_aval(x).weak_type and not a.weak_type) else x
            for x, a in zip(leaves, avals)]


def while_loop(cond_fun, body_fun, init_val):
    """A `while_loop` primitive; Refs its body writes are carried too (ref_regions)."""
    def carry(refs, values):
        def cond_refs(c):
            ref_regions.enter(refs, c[1])
            return cond_fun(c[0])

        def body_refs(c):
            ref_regions.enter(refs, c[1])
            out = body_fun(c[0])
            return out, ref_regions.values(refs)
        return _while_loop(cond_refs, body_refs, (init_val, values))
    return ref_regions.written_in(lambda: _while_loop(cond_fun, body_fun, init_val), carry)


def _while_loop(cond_fun, body_fun, init_val):
    b = current()
    leaves, treedef, avals = _flat_avals(init_val)
    for _ in range(2):  # at most one retry, after promoting weak initial values
        body_flat, rec = _body_outputs(body_fun, treedef)
        body_child = trace_region(b, "body", body_flat, avals)
        promoted = _promote_weak(avals, rec["avals"])
        if promoted == avals:
            break
        avals = promoted
    _check_same("body_fun", treedef, avals, rec["tree"], rec["avals"])

    def cond_flat(inputs):
        c = cond_fun(tree_unflatten(treedef, inputs))
        ca = _aval(c)
        if ca.shape != () or ca.dtype != np.bool_:
            raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                            f"[{ca.str_short()}].")
        return [c]
    cond_child = trace_region(b, "cond", cond_flat, avals)
    (cond_fn, body_fn), outers = close_regions([cond_child, body_child])
    outs = _bind(P["while_loop"], *outers, *_convert(leaves, avals), cond_fn=cond_fn,
                 body_fn=body_fn, num_consts=len(outers))
    return tree_unflatten(treedef, list(outs))


def cond(pred, true_fun, false_fun, *operands):
    from .. import lax
    p = to_array(pred) if not hasattr(pred, "aval") else pred
    if _aval(p).shape != ():
        raise TypeError(f"Pred must be a scalar, got {_aval(p).str_short()}.")
    return switch(lax.convert_element_type(p, np.int32), [false_fun, true_fun], *operands)


def switch(index, branches, *operands):
    """A `cond` primitive; Refs its branches write are extra operands and results
    (ref_regions)."""
    def carry(refs, values):
        def branch(br):
            def run(vals, *ops):
                ref_regions.enter(refs, vals)
                out = br(*ops)
                return out, ref_regions.values(refs)
            return run
        return _switch(index, [branch(br) for br in branches], values, *operands)
    return ref_regions.written_in(lambda: _switch(index, branches, *operands), carry)


def _switch(index, branches, *operands):
    b = current()
    leaves, treedef, avals = _flat_avals(operands)
    children, records = [], []
    for i, br in enumerate(branches):
        flat, rec = _body_outputs(lambda ops, br=br: br(*ops), treedef)
        children.append(trace_region(b, f"branch{i}", flat, avals))
        records.append(rec)
    first = records[0]
    for i, rec in enumerate(records[1:], 1):
        if rec["tree"] != first["tree"] or any(
                x.shape != y.shape or x.dtype != y.dtype for x, y in zip(rec["avals"], first["avals"])):
            raise TypeError(f"branches 0 and {i} of cond/switch must return the same types: "
                            f"{first['tree']} {_describe(first['avals'])} vs "
                            f"{rec['tree']} {_describe(rec['avals'])}")
    # Weak types join as in JAX: a result is weak only if it is weak in every branch.
    strong = [not all(rec["avals"][j].weak_type for rec in records)
              for j in range(len(first["avals"]))]
    if any(s and rec["avals"][j].weak_type for rec in records for j, s in enumerate(strong)):
        children = []
        for i, br in enumerate(branches):
            def flat(ops, br=br):
                outs, _ = tree_flatten(br(*tree_unflatten(treedef, ops)))
                return [_strengthen(o) if s else o for o, s in zip(outs, strong)]
            children.append(trace_region(b, f"branch{i}", flat, avals))
    fns, outers = close_regions(children)
    from .. import lax
    idx = to_array(index) if not hasattr(index, "aval") else index
    if _aval(idx).dtype != np.int32:
        idx = lax.convert_element_type(idx, np.int32)
    outs = _bind(P["cond"], idx, *outers, *leaves, branches=tuple(fns))
    return tree_unflatten(first["tree"], list(outs))


def _strengthen(x):
    from .. import lax
    a = _aval(x)
    return lax.convert_element_type(x, a.dtype) if a.weak_type else x


def scan(f, init, xs, length, reverse):
    """A `scan` primitive; Refs its body writes are carried too (ref_regions)."""
    def carry(refs, values):
        def f_refs(c, x):
            ref_regions.enter(refs, c[1])
            new, y = f(c[0], x)
            return (new, ref_regions.values(refs)), y
        (out, new_values), ys = _scan(f_refs, (init, values), xs, length, reverse)
        return (out, ys), new_values
    return ref_regions.written_in(lambda: _scan(f, init, xs, length, reverse), carry)


def _scan(f, init, xs, length, reverse):
    b = current()
    c_leaves, c_tree, c_avals = _flat_avals(init)
    x_leaves, x_tree, x_avals = _flat_avals(xs)
    n = length
    slice_avals = [ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in x_avals]
    record = {}
    for _ in range(2):
        def body(inputs, c_avals=c_avals):
            carry = tree_unflatten(c_tree, inputs[:len(c_avals)])
            x = tree_unflatten(x_tree, inputs[len(c_avals):])
            new_carry, y = f(carry, x)
            cl, ct = tree_flatten(new_carry)
            yl, yt = tree_flatten(y)
            record.update(tree=ct, avals=[_aval(v) for v in cl], ytree=yt)
            return cl + yl
        child = trace_region(b, "scan_body", body, c_avals + slice_avals)
        promoted = _promote_weak(c_avals, record["avals"])
        if promoted == c_avals:
            break
        c_avals = promoted
    _check_same("scan body function carry", c_tree, c_avals, record["tree"], record["avals"])
    (fn,), outers = close_regions([child])
    outs = _bind(P["scan"], *outers, *_convert(c_leaves, c_avals), *x_leaves, body=fn,
                 length=n, reverse=bool(reverse), num_consts=len(outers),
                 num_carry=len(c_avals))
    carry = tree_unflatten(c_tree, list(outs[:len(c_avals)]))
    ys = tree_unflatten(record["ytree"], list(outs[len(c_avals):]))
    return carry, ys


def fori_loop(lower, upper, body_fun, init_val):
    """Static bounds: a scan over the trip count; traced bounds: a while_loop."""
    from .. import lax
    static = all(isinstance(v, (int, np.integer)) or (hasattr(v, "_value"))
                 for v in (lower, upper))
    if static:
        lo, hi = int(np.asarray(getattr(lower, "_value", lower))), \
            int(np.asarray(getattr(upper, "_value", upper)))
        n = max(hi - lo, 0)
        # As in JAX with concrete bounds, the index is a weakly typed int (a Python int).

        def step(carry, _):
            i, val = carry
            return (lax.add(i, to_array(1)), body_fun(i, val)), None
        (_, val), _ = scan(step, (to_array(lo), init_val), None, n, False)
        return val

    def cond_fn(c):
        return lax.lt(c[0], c[1])

    def body_fn(c):
        i, hi_, val = c
        return lax.add(i, np.int32(1)), hi_, body_fun(i, val)
    lo_a = lax.convert_element_type(lower, np.int32)
    hi_a = lax.convert_element_type(upper, np.int32)
    return while_loop(cond_fn, body_fn, (lo_a, hi_a, init_val))[2]
