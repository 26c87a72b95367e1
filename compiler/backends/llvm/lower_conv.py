"""conv_general_dilated: tiles of im2col patches fed to kiln's packed matrix kernel.

The convolution is a matrix product per group: the patch matrix (one row per output position
(batch, spatial...), one column per (window position, input feature), window-major) times the
kernel as a (window x input features) by (output features) matrix. `plan` decides everything
from the static shapes; the emitted code then runs tasks on the thread pool, one per tile of
TM rows and group:

    gather the tile's patches into a stack buffer (TM x K), zeros where a window reaches the
      padding or a hole of lhs dilation; the innermost loop copies the input features of one
      window position (contiguous in channels-last layouts: vector loads)
    C = patches @ W[group]            kiln_gemm_<dtype> (gemm_packed.py), run-time sizes
    C is the result in place when its output features are contiguous and its rows (batch,
      spatial...) have one stride (NHWC, NWC, NDHWC); else a stack tile scattered into it

The kernel is read in place when its (spatial..., input feature) axes flatten to one stride
(HWIO and every "...IO" layout); otherwise it is first packed into the workspace as
(group, window, input feature, output feature). Layouts, strides, both dilations, padding
(negative too) and both kinds of groups are index arithmetic in the gather, so every
dimension_numbers runs this one path.

Long rows (window x input features past what a tile of SPLIT_ROWS rows holds) change the
plan. Few of them (a tile holds every row for MIN_DEPTH terms: the kernel gradient, rows
(kernel position, input feature), a sum over batch x positions) take the *transposed* plan:
each task gathers, block by block of `depth` terms of the sum, every row transposed (a row
per term, the batch axis innermost: the forward input's contiguous features), and adds
tile^T @ W[terms] (W read in place when its (input feature, window) or (window, input
feature) axes flatten) into its chunk's partial result; the chunks (CHUNK_TASKS tasks with
the groups) are summed at the end. Many long rows split the sum into chunks of window
positions instead (`Plan.chunks`), each task a tile of SPLIT_ROWS rows. Float32 and float64 operands of one dtype (the result's)
take it; other dtypes are a BackendUnsupportedError (the reference backend has them).
Measured: docs/conv.md.
"""
import math
from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from ...errors import BackendUnsupportedError
from ...primitives import PRIMITIVES
from ...primitives.core import LLVM, LLVM_SCRATCH
from . import gemm, gemm_packed, parallel, pool, winograd
from . import ltypes as T
from .loops import affine_offset, contiguous_strides, counted_loop, emit_nest, unravel
from .lower_fused import fill
from .lower_linalg import TASK_FLOPS, flat_group
from .lower_windows import window_offset

TILE_BYTES = 256 * 1024      # a task's patch tile (on its stack)
OUT_TILE_BYTES = 128 * 1024  # a task's result tile when C is not the result in place
MAX_ROWS = 256
RELAYOUT_FEATURES = 4        # strided input features, at least this many: copied first
SPLIT_ROWS = 64              # fewer rows than this per tile: the sum is split (`Plan.chunks`)
MIN_DEPTH = 32               # the transposed plan: a tile holds every row for this many terms
CHUNK_TASKS = 16             # the transposed plan: tasks (chunks x groups) it aims at


class Plan(NamedTuple):
    dtype: np.dtype
    rows: int                # M: batch x output positions
    k: int                   # K: window positions x input features per group
    groups: int              # feature groups x batch groups
    og: int                  # output features per group
    tm: int                  # rows per task
    positions: int           # window positions per task (its patch columns / features)
    chunks: int              # tasks per row tile and group, each summing `positions` (the
                             # transposed plan: `per_chunk` blocks of `depth` terms)
    transposed: bool         # the tile is the patch matrix transposed (`_gather_transposed`)
    depth: int               # the transposed plan: terms of the sum per tile
    per_chunk: int           # the transposed plan: tiles per chunk
    features_first: bool     # the transposed plan: the sum runs over (input feature,
                             # window position), not (window position, input feature)
    lhs_strides: tuple       # element strides of the input as the gather reads it (batch,
                             # feature, spatial...)
    lhs_group: int           # element offset between groups' inputs
    relayout: bool           # the input is first copied features-last into the workspace
    packed: bool             # the kernel is packed into the workspace first
    w_strides: tuple         # (k, n) element strides of the kernel matrix
    w_group: int             # element offset between groups' kernels
    direct: bool             # C is the result in place
    ldc: int
    out_group: int           # element offset between groups' results


def plan(lhs, rhs, out, *, window_strides, padding, lhs_dilation, rhs_dilation,
         dimension_numbers, feature_group_count, batch_group_count, **_):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    ls, rs, os_ = (contiguous_strides(a.shape) for a in (lhs, rhs, out))
    n_out = out.shape[out_spec[0]]
    win = [rhs.shape[a] for a in rhs_spec[2:]]
    i = rhs.shape[rhs_spec[1]]
    o = rhs.shape[rhs_spec[0]]
    groups = feature_group_count * batch_group_count
    og = o // groups
    rows = n_out * math.prod(out.shape[a] for a in out_spec[2:])
    k = i * math.prod(win)
    itemsize = out.dtype.itemsize
    window = math.prod(win)
    tm = max(1, min(MAX_ROWS, TILE_BYTES // max(1, k * itemsize), rows))
    positions, chunks, depth, per_chunk = window, 1, 0, 0
    long = tm < min(rows, SPLIT_ROWS)
    transposed = long and rows * itemsize * MIN_DEPTH <= TILE_BYTES
    if transposed:   # few long rows: tiles of every row for `depth` terms of the sum
        tm = rows
        depth = min(k, TILE_BYTES // (rows * itemsize))
        blocks = -(-k // depth)
        per_chunk = -(-blocks // min(blocks, max(1, CHUNK_TASKS // groups)))
        chunks = -(-blocks // per_chunk)
    elif long:   # many long rows: split the sum into chunks of positions
        tm = min(rows, SPLIT_ROWS)
        positions = max(1, TILE_BYTES // (tm * i * itemsize))
        chunks = -(-window // positions)
    in_sp = [lhs.shape[a] for a in lhs_spec[2:]]
    inner = 0 if transposed else 1   # the gather's innermost axis: batch or input feature
    relayout = ls[lhs_spec[inner]] != 1 and lhs.shape[lhs_spec[inner]] >= RELAYOUT_FEATURES
    if relayout:   # the inner axis last, the other first
        cs = contiguous_strides([lhs.shape[lhs_spec[1 - inner]]] + in_sp
                                + [lhs.shape[lhs_spec[inner]]])
        lhs_strides = ((1, cs[0]) if transposed else (cs[0], 1)) + tuple(cs[1:-1])
    else:
        lhs_strides = tuple(ls[a] for a in lhs_spec)
    lhs_group = (i * lhs_strides[1] if feature_group_count > 1 else n_out * lhs_strides[0])
    features_first = False
    size, kstride = flat_group(rhs.shape, rs, list(rhs_spec[2:]) + [rhs_spec[1]])
    if transposed and kstride is None:
        size, kstride = flat_group(rhs.shape, rs, [rhs_spec[1]] + list(rhs_spec[2:]))
        features_first = kstride is not None
    packed = kstride is None
    if packed:
        w_strides, w_group = (og, 1), k * og
    else:
        w_strides, w_group = (kstride, rs[rhs_spec[0]]), og * rs[rhs_spec[0]]
    _, row_stride = flat_group(out.shape, os_, [out_spec[0]] + list(out_spec[2:]))
    o_c = os_[out_spec[1]]
    direct = row_stride is not None and (o_c == 1 or o == 1)
    if not direct and not transposed:
        tm = max(1, min(tm, OUT_TILE_BYTES // max(1, og * itemsize)))
    ldc = (row_stride or o) if direct else og
    if chunks > 1 or transposed:
        direct, ldc = False, og
    return Plan(out.dtype, rows, k, groups, og, tm, positions, chunks, transposed, depth,
                per_chunk, features_first, lhs_strides, lhs_group, relayout, packed, w_strides,
                w_group, direct, ldc, og * o_c)


def _round(nbytes):
    return -(-nbytes // 64) * 64


def workspace(pl, lhs, wp=None):
    """Byte offsets in the workspace of (the packed kernel, the relaid input, the chunks'
    partial results) and its size; with a Winograd plan `wp`, (its transformed kernel, the
    relaid input) and the size."""
    if wp is not None:
        kernel = _round(winograd.workspace_bytes(wp, pl.dtype))
        copy = _round(lhs.size * pl.dtype.itemsize) if wp.relayout else 0
        return 0, kernel, kernel + copy
    kernel = _round(pl.k * pl.og * pl.groups * pl.dtype.itemsize) if pl.packed else 0
    copy = _round(lhs.size * pl.dtype.itemsize) if pl.relayout else 0
    partials = (pl.chunks * pl.groups * pl.rows * pl.og * pl.dtype.itemsize
                if pl.chunks > 1 or pl.transposed else 0)
    return 0, kernel, kernel + copy, kernel + copy + partials


def _pack_kernel(ctx, pl, rhs, spec):
    """The kernel into the workspace as (group, window..., input feature, output feature)."""
    b = ctx.builder
    rs = contiguous_strides(rhs.aval.shape)
    win = [rhs.aval.shape[a] for a in spec[2:]]
    shape = [pl.groups] + win + [rhs.aval.shape[spec[1]], pl.og]
    src = [pl.og * rs[spec[0]]] + [rs[a] for a in spec[2:]] + [rs[spec[1]], rs[spec[0]]]
    dst = contiguous_strides(shape)
    element = T.mem_type(pl.dtype)

    def body(b, index, carried):
        v = b.load(b.gep(rhs.ptr, [affine_offset(b, 0, src, index)], source_etype=element),
                   typ=element)
        b.store(v, b.gep(ctx.scratch, [affine_offset(b, 0, dst, index)], source_etype=element))
        return carried
    emit_nest(b, shape, body, name="wpack")


def _relayout(ctx, pl, lhs, spec, dst):
    """The input copied to `dst` as (batch, spatial..., feature), read in its own order."""
    shape = lhs.aval.shape
    strides = [0] * len(shape)
    strides[spec[0]], strides[spec[1]] = pl.lhs_strides[0], pl.lhs_strides[1]
    for a, st in zip(spec[2:], pl.lhs_strides[2:]):
        strides[a] = st
    src = contiguous_strides(shape)
    element = T.mem_type(pl.dtype)

    def body(b, index, carried):
        v = b.load(b.gep(lhs.ptr, [affine_offset(b, 0, src, index)], source_etype=element),
                   typ=element)
        b.store(v, b.gep(dst, [affine_offset(b, 0, strides, index)], source_etype=element))
        return carried
    emit_nest(ctx.builder, shape, body, name="relayout")


def _copy_run(b, pl, x, geo, o, kidx, off, stride, dst, at, count, name):
    """dst[at + j] = x[off + j * stride + the offset of window element `kidx` of output
    position `o`] for j in [0, count), zeros where that element is padding or a hole."""
    element = T.mem_type(pl.dtype)
    zero = T.const(pl.dtype, 0)
    _, _, l_sp, in_sp, _, _, strides, pads, ldil, rdil, _ = geo
    valid, off = window_offset(b, o, kidx, strides, rdil, pads, ldil, in_sp, l_sp, off)
    off = b.select(valid, off, T.i64(0))

    def copy(b, j, carried):
        v = b.load(b.gep(x, [b.add(off, b.mul(j, T.i64(stride)))], source_etype=element),
                   typ=element)
        b.store(b.select(valid, v, zero), b.gep(dst, [b.add(at, j)], source_etype=element))
        return carried
    counted_loop(b, count, copy, (), name)


def _gather(b, pl, x, patch, start, nrows, first, npos, geo):
    """patch[r, (window position, feature)] for rows [start, start + nrows) and window
    positions [first, first + npos) (a row of the tile holds `positions` of them)."""
    l_n, l_c, _, _, out_sp, win, _, _, _, _, feats = geo

    def row(b, r, carried):
        n, *o = unravel(b, b.add(start, r), [0] + out_sp)
        base = b.mul(r, T.i64(pl.positions * feats))

        def position(b, q, carried):
            kidx = unravel(b, b.add(first, q), win)
            _copy_run(b, pl, x, geo, o, kidx, b.mul(n, T.i64(l_n)), l_c, patch,
                      b.add(base, b.mul(q, T.i64(feats))), feats, "feat")
            return carried
        counted_loop(b, npos, position, (), "win")
        return carried
    counted_loop(b, nrows, row, (), "row")


def _gather_transposed(b, pl, x, tile, first, nterms, geo):
    """tile[t, r] for the terms [first, first + nterms) of the sum (t: (input feature, window
    position) or (window position, input feature), `Plan.features_first`) and every row r
    (output position..., batch): the patch matrix transposed, the batch innermost (the
    kernel gradient's: the forward input's features, contiguous in channels-last layouts)."""
    l_n, l_c, _, _, out_sp, win, _, _, _, _, feats = geo
    spots = math.prod(out_sp)
    batch = pl.rows // spots
    order = [feats] + win if pl.features_first else win + [feats]

    def term(b, t, carried):
        index = unravel(b, b.add(first, t), order)
        c, kidx = (index[0], index[1:]) if pl.features_first else (index[-1], index[:-1])
        base = b.mul(t, T.i64(pl.rows))

        def spot(b, s, carried):
            _copy_run(b, pl, x, geo, unravel(b, s, out_sp), kidx, b.mul(c, T.i64(l_c)), l_n,
                      tile, b.add(base, b.mul(s, T.i64(batch))), batch, "batch")
            return carried
        counted_loop(b, spots, spot, (), "spot")
        return carried
    counted_loop(b, nterms, term, (), "term")


def _transposed_task(ctx, pl, geo):
    """`task(env, i)`: chunk i % chunks of the sum, of group i // chunks: its tiles of
    `depth` terms gathered transposed, C (every row) += tile^T @ W[terms], C its partial
    result (row order: output position..., batch)."""
    module = ctx.module
    task = ir.Function(module, pool.TASK_TYPE, module.get_unique_name(f"{ctx.function.name}.conv"))
    task.linkage = "internal"
    b = ir.IRBuilder(task.append_basic_block("entry"))
    element = T.mem_type(pl.dtype)
    tile = b.alloca(element, size=T.i64(pl.depth * pl.rows))
    tile.align = 64
    env, i = task.args
    x, w, _, partial = parallel.unpack_env(b, env, [T.PTR] * 4)
    chunk, g = b.urem(i, T.i64(pl.chunks)), b.udiv(i, T.i64(pl.chunks))
    x = b.gep(x, [b.mul(g, T.i64(pl.lhs_group))], source_etype=element)
    w = b.gep(w, [b.mul(g, T.i64(pl.w_group))], source_etype=element)
    c = b.gep(partial, [b.mul(b.add(b.mul(chunk, T.i64(pl.groups)), g),
                              T.i64(pl.rows * pl.og))], source_etype=element)
    blocks = -(-pl.k // pl.depth)
    first_block = b.mul(chunk, T.i64(pl.per_chunk))

    def block(b, j, carried):
        first = b.mul(b.add(first_block, j), T.i64(pl.depth))
        nterms = _min(b, b.sub(T.i64(pl.k), first), T.i64(pl.depth))
        _gather_transposed(b, pl, x, tile, first, nterms, geo)
        wj = b.gep(w, [b.mul(first, T.i64(pl.w_strides[0]))], source_etype=element)
        gemm_packed.emit_packed_gemm(b, pl.dtype, pl.rows, pl.og, nterms, tile, (1, pl.rows),
                                     wj, pl.w_strides, c, pl.og,
                                     b.zext(b.icmp_signed(">", j, T.i64(0)), T.I64))
        return carried
    counted_loop(b, _min(b, T.i64(pl.per_chunk), b.sub(T.i64(blocks), first_block)), block, (),
                 "block")
    b.ret_void()
    return task


def _store_rows(b, pl, value, out, start, nrows, out_rows, row_strides, o_c):
    """out[row start + r, feature j] = value(b, r, j) for the rows of a tile and a group."""
    element = T.mem_type(pl.dtype)

    def row(b, r, carried):
        index = unravel(b, b.add(start, r), out_rows)
        base = affine_offset(b, 0, row_strides, index)

        def col(b, j, carried):
            b.store(value(b, r, j), b.gep(out, [b.add(base, b.mul(j, T.i64(o_c)))],
                                          source_etype=element))
            return carried
        counted_loop(b, pl.og, col, (), "col")
        return carried
    counted_loop(b, nrows, row, (), "srow")


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _task(ctx, pl, geo, out_rows, row_strides, o_c):
    """`task(env, i)`: chunk i % chunks of the window, of group i // chunks % groups, of the
    tile i // (chunks * groups) of the rows."""
    module = ctx.module
    task = ir.Function(module, pool.TASK_TYPE, module.get_unique_name(f"{ctx.function.name}.conv"))
    task.linkage = "internal"
    b = ir.IRBuilder(task.append_basic_block("entry"))
    element = T.mem_type(pl.dtype)
    feats = geo[-1]
    patch = b.alloca(element, size=T.i64(pl.tm * pl.positions * feats))
    patch.align = 64
    ctile = None
    if not pl.direct and pl.chunks == 1:
        ctile = b.alloca(element, size=T.i64(pl.tm * pl.og))
        ctile.align = 64
    env, i = task.args
    x, w, out, partial = parallel.unpack_env(b, env, [T.PTR] * 4)
    chunk = b.urem(i, T.i64(pl.chunks))
    rest = b.udiv(i, T.i64(pl.chunks))
    tile, g = b.udiv(rest, T.i64(pl.groups)), b.urem(rest, T.i64(pl.groups))
    start = b.mul(tile, T.i64(pl.tm))
    nrows = _min(b, b.sub(T.i64(pl.rows), start), T.i64(pl.tm))
    first = b.mul(chunk, T.i64(pl.positions))
    npos = _min(b, b.sub(T.i64(pl.k // feats), first), T.i64(pl.positions))
    x = b.gep(x, [b.mul(g, T.i64(pl.lhs_group))], source_etype=element)
    w = b.gep(w, [b.add(b.mul(g, T.i64(pl.w_group)),
                        b.mul(b.mul(first, T.i64(feats)), T.i64(pl.w_strides[0])))],
              source_etype=element)
    out = b.gep(out, [b.mul(g, T.i64(pl.out_group))], source_etype=element)
    _gather(b, pl, x, patch, start, nrows, first, npos, geo)
    if pl.direct:
        c = b.gep(out, [b.mul(start, T.i64(pl.ldc))], source_etype=element)
    elif pl.chunks > 1:   # partial[chunk][group][row][feature]
        c = b.gep(partial, [b.mul(b.add(b.mul(b.add(b.mul(chunk, T.i64(pl.groups)), g),
                                              T.i64(pl.rows)), start), T.i64(pl.og))],
                  source_etype=element)
    else:
        c = ctile
    gemm_packed.emit_packed_gemm(b, pl.dtype, nrows, pl.og, b.mul(npos, T.i64(feats)), patch,
                                 (pl.positions * feats, 1), w, pl.w_strides, c, pl.ldc)
    if ctile is not None:
        _store_rows(b, pl, lambda b, r, j: b.load(
            b.gep(ctile, [b.add(b.mul(r, T.i64(pl.og)), j)], source_etype=element),
            typ=element), out, start, nrows, out_rows, row_strides, o_c)
    b.ret_void()
    return task


def _sum_chunks(ctx, pl, out, partial, out_rows, row_strides, o_c):
    """out = the sum of the chunks' partial results, group by group."""
    b = ctx.builder
    element = T.mem_type(pl.dtype)

    def group(b, g, carried):
        dst = b.gep(out.ptr, [b.mul(g, T.i64(pl.out_group))], source_etype=element)

        def value(b, r, j):
            def add(b, ch, acc):
                at = b.add(b.mul(b.add(b.mul(b.add(b.mul(ch, T.i64(pl.groups)), g),
                                             T.i64(pl.rows)), r), T.i64(pl.og)), j)
                v = b.load(b.gep(partial, [at], source_etype=element), typ=element)
                return [b.fadd(acc[0], v)]
            return counted_loop(b, pl.chunks, add, [T.const(pl.dtype, 0)], "chunk")[0]
        _store_rows(b, pl, value, dst, T.i64(0), T.i64(pl.rows), out_rows, row_strides, o_c)
        return carried
    counted_loop(b, pl.groups, group, (), "group")


def _conv(ctx, outs, ins, **params):
    lhs, rhs = ins
    out = outs[0]
    dtype = out.aval.dtype
    if dtype not in gemm.DTYPES or lhs.aval.dtype != dtype or rhs.aval.dtype != dtype:
        raise BackendUnsupportedError(
            f"the LLVM backend computes conv_general_dilated on float32 or float64 operands of "
            f"the result's dtype, not {lhs.aval.dtype} x {rhs.aval.dtype} -> {dtype}; convert "
            f"the operands (x.astype(jnp.float32)) or run it with backend='reference'",
            ctx.eqn.info)
    pl = plan(lhs.aval, rhs.aval, out.aval, **params)
    if pl.rows * pl.og * pl.groups == 0:
        return
    if pl.k == 0:
        fill(ctx.builder, out, T.const(dtype, 0))
        return
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    os_ = contiguous_strides(out.aval.shape)
    geo = (pl.lhs_strides[0], pl.lhs_strides[1], pl.lhs_strides[2:],
           [lhs.aval.shape[a] for a in lhs_spec[2:]], [out.aval.shape[a] for a in out_spec[2:]],
           [rhs.aval.shape[a] for a in rhs_spec[2:]], params["window_strides"],
           [lo for lo, _ in params["padding"]], params["lhs_dilation"], params["rhs_dilation"],
           rhs.aval.shape[rhs_spec[1]])
    row_axes = [out_spec[0]] + list(out_spec[2:])
    if pl.transposed:
        row_axes = row_axes[1:] + row_axes[:1]
    out_rows = [out.aval.shape[a] for a in row_axes]
    row_strides = [os_[a] for a in row_axes]
    o_c = os_[out_spec[1]]
    b = ctx.builder
    wp = winograd.plan(lhs.aval, rhs.aval, out.aval, **params)
    if wp is not None:
        x = lhs.ptr
        if wp.relayout:
            x = b.gep(ctx.scratch, [T.i64(workspace(pl, lhs.aval, wp)[1])], source_etype=T.I8)
            _relayout(ctx, pl._replace(lhs_strides=(wp.in_strides[0], 1) + wp.in_strides[1:]),
                      lhs, lhs_spec, x)
        winograd.emit(ctx, wp, dtype, x, rhs.ptr, ctx.scratch, out.ptr)
        return
    w, x, partial = rhs.ptr, lhs.ptr, out.ptr
    at_kernel, at_input, at_partials, _ = workspace(pl, lhs.aval)
    if pl.packed:
        _pack_kernel(ctx, pl, rhs, rhs_spec)
        w = ctx.scratch
    if pl.relayout:
        x = b.gep(ctx.scratch, [T.i64(at_input)], source_etype=T.I8)
        _relayout(ctx, pl, lhs, lhs_spec, x)
    if pl.chunks > 1 or pl.transposed:
        partial = b.gep(ctx.scratch, [T.i64(at_partials)], source_etype=T.I8)
    if pl.transposed:
        task = _transposed_task(ctx, pl, geo)
    else:
        task = _task(ctx, pl, geo, out_rows, row_strides, o_c)
    env = parallel.pack_env(b, [x, w, out.ptr, partial])
    tasks = -(-pl.rows // pl.tm) * pl.groups * pl.chunks
    if tasks > 1 and pl.rows * pl.k * pl.og * pl.groups >= TASK_FLOPS:
        pool.emit_run_tasks(b, task, env, tasks, False)
    else:
        def run(b, i, carried):
            b.call(task, [env, i])
            return carried
        counted_loop(b, tasks, run, (), "tile")
    if pl.chunks > 1 or pl.transposed:
        _sum_chunks(ctx, pl, out, partial, out_rows, row_strides, o_c)


def _scratch(eqn):
    lhs, rhs = eqn.invars
    pl = plan(lhs.aval, rhs.aval, eqn.outvars[0].aval, **eqn.params)
    wp = winograd.plan(lhs.aval, rhs.aval, eqn.outvars[0].aval, **eqn.params)
    return workspace(pl, lhs.aval, wp)[-1]


LLVM[PRIMITIVES["conv_general_dilated"]] = _conv
LLVM_SCRATCH[PRIMITIVES["conv_general_dilated"]] = _scratch
