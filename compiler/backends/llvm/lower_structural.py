"""Lowerings of data-movement primitives that are not views: pad, concatenate, and the byte
copies of reshape/squeeze/bitcast_convert_type when they cannot share their operand's memory.

`aliasing(eqn)` tells the storage planner (buffers.py) which equations read their operand's
bytes another way (a reshape or squeeze of a contiguous array, a bitcast, a broadcast that
only inserts axes of size 1, a reduction over axes of size 1: what `jit(pmap(f))` leaves
around a collective when a process runs one replica): their result is the operand's buffer,
no code at all. When such a result is a function output, the planner computes the operand in
the output buffer when it can (a temporary), else the result is copied (reshape and squeeze
then lower as views in lower_fused.py; a bitcast, whose element size may change, as a byte
copy; broadcasts and reductions by their own lowerings).

`pad` fills the output with the padding value, then copies the operand elements that land
inside it (negative padding crops); `concatenate` copies each operand into its slab of the
output. Both copies are loop nests over affine views of source and destination
(`copy_nest`), which collapse to flat contiguous loops where they can.
"""
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM
from . import ltypes as T
from .buffers import View, load, store, nbytes
from .calls import intrinsic
from .loops import collapse, emit_nest, affine_offset, contiguous_strides
from .lower_fused import fill, lower_eqn, _transpose


REDUCTIONS = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                        "reduce_or", "reduce_xor"})


def aliasing(eqn):
    name, x = eqn.prim.name, eqn.invars[0].aval if eqn.invars else None
    if name == "reshape":
        return eqn.params.get("dimensions") is None
    if name == "broadcast_in_dim":   # the operand's axes in order, the others of size 1
        dims, shape = eqn.params["broadcast_dimensions"], eqn.params["shape"]
        return list(dims) == sorted(set(dims)) and \
            all(shape[d] == n for d, n in zip(dims, x.shape)) and \
            all(n == 1 for d, n in enumerate(shape) if d not in dims)
    if name in REDUCTIONS:   # one element per result element: itself
        return all(x.shape[a] == 1 for a in eqn.params["axes"])
    return name in ("squeeze", "bitcast_convert_type")


def copy_nest(builder, shape, src, dst):
    """dst[index] = src[index] over `shape` (both Views of that shape)."""
    space, (s_strides, d_strides), _ = collapse(shape, [src.strides, dst.strides])
    if space == (0,):
        return

    def body(b, index, carried):
        value = load(b, src.buffer, affine_offset(b, src.offset, s_strides, index))
        store(b, dst.buffer, affine_offset(b, dst.offset, d_strides, index), value)
        return carried
    emit_nest(builder, space, body)


def _pad(ctx, outs, ins, *, padding_config):
    out, (x, value) = outs[0], ins
    b = ctx.builder
    fill(b, out, load(b, value, T.i64(0)))
    out_strides = contiguous_strides(out.aval.shape)
    x_strides = contiguous_strides(x.aval.shape)
    counts, src_off, dst_off, dst_strides = [], 0, 0, []
    for (lo, _, interior), d, n, xs, os in zip(padding_config, x.aval.shape, out.aval.shape,
                                               x_strides, out_strides):
        step = interior + 1
        # Operand element i lands at lo + i * step; keep those in [0, n).
        first = 0 if lo >= 0 else -(lo // step)
        last = min(d, max(0, -(-(n - lo) // step)))
        counts.append(max(last - first, 0))
        src_off += first * xs
        dst_off += (lo + first * step) * os
        dst_strides.append(os * step)
    copy_nest(b, counts, View(x, src_off, x_strides, counts),
              View(out, dst_off, dst_strides, counts))


def _concatenate(ctx, outs, ins, *, dimension):
    out = outs[0]
    strides = contiguous_strides(out.aval.shape)
    start = 0
    for x in ins:
        shape = x.aval.shape
        if x.const is not None:   # a rank-0 literal cannot be concatenated; never happens
            raise ctx.error("concatenate of a literal")
        copy_nest(ctx.builder, shape, x.view(),
                  View(out, start * strides[dimension], strides, shape))
        start += shape[dimension]


def _reshape(ctx, outs, ins, *, new_sizes, dimensions=None):
    """A copy in row-major order of the (transposed) operand: the output's elements are that
    order's, whatever the new shape."""
    src = ins[0].view()
    if dimensions is not None:
        src = _transpose(src, dimensions)
    copy_nest(ctx.builder, src.shape, src,
              View(outs[0], 0, contiguous_strides(src.shape), src.shape))


def _bitcast(ctx, outs, ins, *, new_dtype):
    """The operand's bytes, read as `new_dtype` (the shape changes with the element size)."""
    if ins[0].const is not None:   # a literal: a scalar bitcast (same element size)
        lower_eqn(ctx, ctx.eqn, outs, ins)
        return
    size = nbytes(outs[0].aval)
    if size:
        intrinsic(ctx.builder, "memcpy", [outs[0].ptr, ins[0].ptr, T.i64(size), T.I1(0)],
                  ret=T.VOID, overloads=[T.PTR, T.PTR, T.I64])


LLVM[PRIMITIVES["pad"]] = _pad
LLVM[PRIMITIVES["concatenate"]] = _concatenate
LLVM[PRIMITIVES["bitcast_convert_type"]] = _bitcast
LLVM[PRIMITIVES["reshape"]] = _reshape
