"""Loops in LLVM IR: a counted loop, and loop nests over an iteration space.

`counted_loop(builder, count, body, inits)` emits `for i in range(count)` (i64 index) with
loop-carried values (phis): `body(builder, i, carried) -> new carried`; it returns the carried
values after the loop. The loop tests at its head and has a single latch, the canonical form
LLVM's loop passes (rotation, LICM, the vectoriser) expect.

A loop nest walks an iteration space (a shape) in row-major order. Every array it touches is
read or written through an affine map over that space: offset + sum(index_k * stride_k)
(`strides` in elements; 0 along axes the array does not vary on). `collapse` simplifies a nest
before it is emitted: axes of size 1 disappear, and neighbouring axes k, k+1 merge into one
whenever every affine map has stride_k == stride_{k+1} * size_{k+1} and every reduction reduces
both or neither; a fused elementwise chain over contiguous arrays becomes one flat loop, whose
innermost axis is then contiguous so that it vectorises.

`emit_nest(builder, shape, body, inits, after_inner)` emits the loops: `body(builder, index,
carried)` runs in the innermost loop with the full index (a list of i64 values) and returns
the new carried values, which live in the innermost loop only (register accumulators of a
reduction along the last axis); `after_inner(builder, outer_index, carried)` runs after each
innermost loop. For a rank-0 space the body runs once. `bounds` restricts an axis to a
sub-range [start, stop) (the chunk of a parallel loop, lower_fused.py).
"""
import llvmlite.ir as ir

from ...ir.abstract import contiguous_strides  # noqa: F401  (the backend's modules take it here)

from . import ltypes as T


def counted_loop(builder, count, body, inits=(), name="i"):
    """`for i in range(count)`; `body(builder, i, carried) -> carried`; the final carried."""
    count = T.i64(count) if isinstance(count, int) else count
    func = builder.function
    pre = builder.block
    head = func.append_basic_block(f"{name}.head")
    loop = func.append_basic_block(f"{name}.body")
    done = func.append_basic_block(f"{name}.done")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(T.I64, name=name)
    i.add_incoming(T.i64(0), pre)
    inits = list(inits)
    fields = [_fields(v) for v in inits]
    with builder.goto_block(pre):
        flat_inits = [x for v, f in zip(inits, fields) for x in _split(builder, v, f)]
    phis = []
    for k, v in enumerate(flat_inits):
        phi = builder.phi(v.type, name=f"{name}.acc{k}")
        phi.add_incoming(v, pre)
        phis.append(phi)
    builder.cbranch(builder.icmp_signed("<", i, count), loop, done)
    builder.position_at_end(loop)
    new = list(body(builder, i, _join(builder, inits, fields, phis)))
    flat_new = [x for v, f in zip(new, fields) for x in _split(builder, v, f)]
    step = builder.add(i, T.i64(1), name=f"{name}.next", flags=("nuw", "nsw"))
    latch = builder.block
    builder.branch(head)
    i.add_incoming(step, latch)
    for phi, v in zip(phis, flat_new):
        phi.add_incoming(v, latch)
    builder.position_at_end(done)
    return _join(builder, inits, fields, phis)


# Carried values of struct type (complex numbers: lower_complex.py) are carried as one phi per
# field: the loop vectoriser handles scalar reductions, not struct-typed phis.

def _fields(value):
    ty = value.type
    return len(ty.elements) if isinstance(ty, ir.LiteralStructType) else None


def _split(builder, value, fields):
    if fields is None:
        return [value]
    return [builder.extract_value(value, k) for k in range(fields)]


def _join(builder, inits, fields, phis):
    """The carried values from their phis (structs packed again)."""
    out, it = [], iter(phis)
    for v, f in zip(inits, fields):
        if f is None:
            out.append(next(it))
            continue
        packed = ir.Constant(v.type, ir.Undefined)
        for k in range(f):
            packed = builder.insert_value(packed, next(it), k)
        out.append(packed)
    return out


def emit_nest(builder, shape, body, inits=(), after_inner=None, name="i", bounds=None,
              inner_loop=counted_loop):
    """Loops over `shape` (outermost first); see the module docstring. `bounds` may restrict
    axes to a sub-range: {axis: (start, stop)} (i64 values); the index is then absolute.
    `inner_loop` emits the innermost loop when its axis is not restricted (counted_loop's
    signature; pairwise.blocked_loop for long float sums)."""
    bounds = bounds or {}

    def loop(b, k, loop_body, carried):
        if k not in bounds:
            emit = inner_loop if k == len(shape) - 1 else counted_loop
            return emit(b, shape[k], loop_body, carried, f"{name}{k}")
        start, stop = bounds[k]
        return counted_loop(b, b.sub(stop, start), lambda b2, i, acc: loop_body(
            b2, b2.add(start, i, flags=("nsw",)), acc), carried, f"{name}{k}")

    def level(b, k, index):
        if k == len(shape) - 1 or not shape:
            if not shape:
                final = body(b, [], list(inits))
            else:
                final = loop(b, k, lambda b2, i, acc: body(b2, index + [i], acc), inits)
            if after_inner is not None:
                after_inner(b, index, final)
            return
        loop(b, k, lambda b2, i, acc: level(b2, k + 1, index + [i]) or [], ())
    level(builder, 0, [])


def unravel(builder, p, sizes):
    """The index (i64 values) of the flat position `p` in a row-major array of `sizes` (the
    first size is not needed)."""
    index = []
    for size in reversed(sizes[1:]):
        index.insert(0, builder.urem(p, T.i64(size)))
        p = builder.udiv(p, T.i64(size))
    return [p] + index


def affine_offset(builder, offset, strides, index):
    """offset + sum(index_k * stride_k) as an i64 value."""
    total = None
    for i, s in zip(index, strides):
        if s == 0:
            continue
        term = i if s == 1 else builder.mul(i, T.i64(s), flags=("nsw",))
        total = term if total is None else builder.add(total, term, flags=("nsw",))
    if total is None:
        return T.i64(offset)
    return builder.add(total, T.i64(offset), flags=("nsw",)) if offset else total


def collapse(shape, maps, reductions=()):
    """Simplify an iteration space (see the module docstring).

    `maps` are stride tuples over `shape`; `reductions` are sets of reduced axes. Returns
    (new shape, new stride tuples, new reduced-axis sets). A space with a zero-sized axis is
    returned as (0,)."""
    if any(d == 0 for d in shape):
        return (0,), [(0,) for _ in maps], [set() for _ in reductions]
    axes = [k for k, d in enumerate(shape) if d != 1]
    groups = []   # runs of original axes merged into one
    for k in axes:
        if groups and _mergeable(groups[-1][-1], k, shape, maps, reductions):
            groups[-1].append(k)
        else:
            groups.append([k])
    new_shape = tuple(_prod(shape[k] for k in g) for g in groups)
    new_maps = [tuple(m[g[-1]] for g in groups) for m in maps]
    new_reds = [{j for j, g in enumerate(groups) if g[0] in r} for r in reductions]
    return new_shape, new_maps, new_reds


def _mergeable(a, b, shape, maps, reductions):
    if any((a in r) != (b in r) for r in reductions):
        return False
    return all(m[a] == m[b] * shape[b] for m in maps)


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out
