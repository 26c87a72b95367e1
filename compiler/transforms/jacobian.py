"""Jacobians as loops over basis vectors, emitted as SSA.

`jacfwd_emit(fn, primals, active)` emits one `scan` over the N basis vectors of the active
inputs (N = their total size); its body is `fn`'s JVP with tangent e_k. `jacrev_emit` does the
same over the M basis vectors of the outputs with `fn`'s VJP, and keeps the forward section
outside the loop (the body reads its values as residuals). Both return the blocks
`J[i][j]` of shape `out_i.shape + in_j.shape`. The loop keeps the SSA small for any N (one
body, not N copies); the batching transform will replace it by `vmap` over the basis.
"""
import numpy as np

from ..ir.builder import current, trace_region, close_regions
from ..ir.abstract import ShapedArray
from ..primitives import PRIMITIVES
from ..primitives import emit
from ..primitives.rule_forms import has_tangent
from .jvp import jvp_emit
from .vjp import vjp_forward, vjp_backward


def _size(a):
    return int(np.prod(a.shape, dtype=np.int64))


def _basis_pieces(k, avals, dtype_of):
    """The k-th basis vector over the concatenation of `avals`, split into pieces shaped like
    each aval: piece j is `(iota == k - offset_j)` reshaped."""
    pieces, offset = [], 0
    for a in avals:
        n = _size(a)
        idx = emit.iota(dtype=np.dtype(np.int32), shape=(n,), dimension=0)
        hit = emit.eq(idx, emit.sub(k, offset) if offset else k)
        piece = emit.convert(hit, dtype_of(a), a.weak_type)
        pieces.append(emit.reshape(piece, new_sizes=a.shape, dimensions=None)
                      if a.shape != (n,) else piece)
        offset += n
    return pieces


def _loop(n, body):
    """`scan` over k = 0..n-1 with `body(k) -> list of values`; returns the stacked values."""
    b = current()
    k_aval = ShapedArray((), np.dtype(np.int32), False)

    def region(inputs):
        (k,) = inputs
        outs = body(k)
        return [emit.add(k, 1)] + list(outs)
    child, outvars = trace_region(b, "basis", region, [k_aval], ["k"])
    (fn,), outer = close_regions([(child, outvars)])
    outs = b.bind(PRIMITIVES["scan"], list(outer) + [emit.scalar(0, k_aval)],
                  dict(body=fn, length=n, reverse=False, num_consts=len(outer), num_carry=1))
    return list(outs[1:])


def _unstack(stacked, rows_avals, cols_aval_shape):
    """From `stacked` of shape (N, *cols) pull each row block j (rows_avals[j]) and return it
    as `cols + rows_j.shape`."""
    blocks, offset = [], 0
    cols = tuple(cols_aval_shape)
    for a in rows_avals:
        n = _size(a)
        part = emit.slice_(stacked, start_indices=(offset,) + (0,) * len(cols),
                           limit_indices=(offset + n,) + cols, strides=None)
        perm = tuple(range(1, len(cols) + 1)) + (0,)
        part = emit.transpose(part, permutation=perm) if cols else part
        part = emit.reshape(part, new_sizes=cols + a.shape, dimensions=None)
        blocks.append(part)
        offset += n
    return blocks


def jacfwd_emit(fn, primals, active):
    """Forward-mode Jacobian blocks J[i][j] = d out_i / d in_j for active inputs j."""
    in_avals = [v.aval for v, a in zip(fn.invars, active) if a]
    out_avals = [v.aval for v in fn.outvars]
    n = sum(_size(a) for a in in_avals)

    def body(k):
        pieces = iter(_basis_pieces(k, in_avals, lambda a: a.dtype))
        tangents = [next(pieces) if a else None for a in active]
        _, touts = jvp_emit(fn, primals, tangents)
        return [emit.zeros(a) if t is None else t for t, a in zip(touts, out_avals)]
    stacked = _loop(n, body)
    # stacked[i]: (N, *out_i.shape) -> blocks out_i.shape + in_j.shape
    return [_unstack(s, in_avals, a.shape) for s, a in zip(stacked, out_avals)]


def jacrev_emit(fn, primals, active):
    """Reverse-mode Jacobian blocks J[i][j] (the forward section is emitted once)."""
    in_avals = [v.aval for v, a in zip(fn.invars, active) if a]
    out_avals = [v.aval for v in fn.outvars]
    state = vjp_forward(fn, primals, active)
    m = sum(_size(a) for a in out_avals)
    act_idx = [i for i, a in enumerate(active) if a]

    def body(k):
        cts = _basis_pieces(k, out_avals, lambda a: a.dtype)
        cts = [c if has_tangent(a) else None for c, a in zip(cts, out_avals)]
        grads = vjp_backward(state, cts)
        return [emit.zeros(in_avals[j]) if grads[i] is None else grads[i]
                for j, i in enumerate(act_idx)]
    stacked = _loop(m, body)
    # stacked[j]: (M, *in_j.shape); block (i, j) = rows of out_i -> out_i.shape + in_j.shape
    blocks = [[None] * len(in_avals) for _ in out_avals]
    for j, s in enumerate(stacked):
        offset = 0
        for i, a in enumerate(out_avals):
            rows = _size(a)
            cols = in_avals[j].shape
            part = emit.slice_(s, start_indices=(offset,) + (0,) * len(cols),
                               limit_indices=(offset + rows,) + cols, strides=None)
            blocks[i][j] = emit.reshape(part, new_sizes=a.shape + cols, dimensions=None)
            offset += rows
    return [blocks[i] for i in range(len(out_avals))], state.outs
