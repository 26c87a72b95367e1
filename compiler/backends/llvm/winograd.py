"""Winograd minimal filtering F(4x4, 3x3) for 3x3, stride-1, undilated convolutions.

Forward form (`plan`): a tile of m x m result positions (m = 4) comes from an input tile of
a x a positions (a = m + 2) as Y = A^T [U (.) V] A per pair of input and output features,
summed over the input features, where U = G g G^T is the transformed kernel and V = B^T d B
the transformed input tile. The sum over input features is, for each of the a^2 transformed
positions p, a matrix product M[p] (tiles x out features) = V[p] (tiles x in features) @ U[p]
(in x out features), which kiln's packed kernel computes (gemm_packed.py): 36 products for 16
positions where the direct form has 9 per position, 4x fewer multiplications.

    U[p][ci][co] = (G g[co, ci] G^T)[p]     once, into the workspace, the kernel in any layout
    tasks on the thread pool, one per block of `tb` tiles (`tb` from BLOCK_BYTES):
      for each tile: V[p][tile][:] = (B^T d B)[p], d read in place as vectors of input
        features (a pointer to a zero vector where d reaches the padding)
      M[p] = V[p] @ U[p] for each p                            kiln_gemm_<dtype>
      for each tile: Y = A^T M A, vectors of output features, stored in place (features
        contiguous in the result) or through a small stack tile

Kernel-gradient form (`gradient_plan`): the kernel gradient of a 3x3 convolution is itself a
convolution with a 3x3 result and a window the size of the image: dW[i, j] = sum over (y, x)
of d[y + i, x + j] c[y, x]. Tiling the window (y, x) m x m gives F(3x3, m x m) with the same
matrices transposed: dW = G^T [sum over tiles of (B^T d B) (.) (A c A^T)] G. Each task sums a
chunk of the tiles (blocks of `tb`) into its own partial result, one product per transformed
position: partial[p] (+)= V[p]^T (in features x tiles) @ C[p] (tiles x out features); the
CHUNKS partial results are summed and transformed at the end, vectors of output features.

`plan` says whether a convolution takes one of the forms (`Wino`, or None): two spatial axes,
stride 1, no dilation, no groups, a 3x3 kernel (forward) or a 3x3 result (gradient), at
least MIN_FEATURES input and output features; the gradient form needs the features it
vectorises contiguous (NHWC), the forward form copies a strided input features-last first.
F(4x4, 3x3) rounds more than the direct sum (float32: about 1e-5 of the result's largest
magnitude against 5e-7): docs/conv.md has the measured errors and times.
"""
from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from . import gemm_packed, pool
from . import ltypes as T
from .externs import opaque
from .gemm import (CONTRACT, VECTOR_BYTES, lane_mask, masked_load,
                   masked_store)
from .lower_windows import window_offset
from .loops import contiguous_strides, counted_loop, unravel
from . import parallel

# F(4x4, 3x3): the points 0, +-1, +-2 and infinity
B_T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
       [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
G = [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
     [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
A_T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
TILE = len(A_T)             # m of F(m x m, 3 x 3)
MIN_FEATURES = 16           # fewer input or output features: the patch tiles are faster
BLOCK_BYTES = 640 * 1024    # a task's V and M (on its stack)
CHUNKS = 8                  # the gradient's partial sums (tasks)


class Wino(NamedTuple):
    gradient: bool           # the kernel-gradient form (`gradient_plan`)
    m: int                   # output tile side (forward); tile side of the window (gradient)
    alpha: int               # input tile side, m + 2
    batch: int               # images: the result's batch (forward), the sum's (gradient)
    tiles_sp: tuple          # tiles along each spatial axis of the result (of the window)
    tiles: int               # batch x tiles_sp
    tb: int                  # tiles per block (a task's, or one step of a gradient chunk)
    cin: int                 # input features (forward); the result's batch axis (gradient)
    cout: int                # output features
    cpad: int                # cin and cout rounded up to whole vectors (the stack buffers'
    opad: int                # rows)
    out_sp: tuple            # the result's spatial sizes (forward); the window's (gradient)
    in_sp: tuple             # the input's spatial sizes
    in_strides: tuple        # element strides of the input as read (image, spatial...); the
                             # vectors' axis (features, the gradient's batch) is contiguous
    relayout: bool           # the input is first copied features-last into the workspace
    lows: tuple              # padding before each spatial axis
    out_strides: tuple       # element strides of the result (batch, feature, spatial...)
    w_strides: tuple         # element strides of the kernel (forward) or of the cotangent
                             # (gradient): (out feature, in feature, spatial...)
    chunks: int              # the gradient's partial sums, each `per_chunk` blocks
    per_chunk: int


def _shared(lhs, rhs, out, dimension_numbers, window_strides, lhs_dilation, rhs_dilation,
            feature_group_count, batch_group_count):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    return (len(rhs_spec) == 4 and tuple(window_strides) == (1, 1)
            and set(lhs_dilation) | set(rhs_dilation) == {1} and feature_group_count == 1
            and batch_group_count == 1 and 0 not in lhs.shape + rhs.shape + out.shape)


def _blocking(alpha, cin, cout, tiles, dtype):
    lanes = VECTOR_BYTES // dtype.itemsize
    cpad, opad = (-(-c // lanes) * lanes for c in (cin, cout))
    tb = max(1, BLOCK_BYTES // (alpha * alpha * (cpad + opad) * dtype.itemsize))
    return cpad, opad, min(tiles, tb if tb < 8 else tb // 8 * 8)


def plan(lhs, rhs, out, *, window_strides, padding, lhs_dilation, rhs_dilation,
         dimension_numbers, feature_group_count, batch_group_count, precision=None, **_):
    """The Winograd plan of a convolution (`gradient_plan`'s where the forward form does not
    apply), or None where lower_conv's patch tiles stay: always for precision "highest",
    which asks for the direct sum's rounding."""
    if precision == "highest" or not _shared(lhs, rhs, out, dimension_numbers, window_strides, lhs_dilation,
                   rhs_dilation, feature_group_count, batch_group_count):
        return None
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if [rhs.shape[a] for a in rhs_spec[2:]] != [3, 3]:
        return gradient_plan(lhs, rhs, out, padding, dimension_numbers)
    cin, cout = rhs.shape[rhs_spec[1]], rhs.shape[rhs_spec[0]]
    if min(cin, cout) < MIN_FEATURES:
        return None
    m = TILE
    out_sp = tuple(out.shape[a] for a in out_spec[2:])
    batch = out.shape[out_spec[0]]
    tiles_sp = tuple(-(-s // m) for s in out_sp)
    tiles = batch * tiles_sp[0] * tiles_sp[1]
    cpad, opad, tb = _blocking(m + 2, cin, cout, tiles, out.dtype)
    os_, rs, ls = (contiguous_strides(a.shape) for a in (out, rhs, lhs))
    in_sp = tuple(lhs.shape[a] for a in lhs_spec[2:])
    in_strides = tuple(ls[a] for a in (lhs_spec[0],) + tuple(lhs_spec[2:]))
    relayout = ls[lhs_spec[1]] != 1
    if relayout:   # (batch, spatial..., feature)
        cs = contiguous_strides((batch,) + in_sp + (cin,))
        in_strides = cs[:-1]
    return Wino(False, m, m + 2, batch, tiles_sp, tiles, tb, cin, cout, cpad, opad, out_sp,
                in_sp, tuple(in_strides), relayout, tuple(lo for lo, _ in padding),
                tuple(os_[a] for a in out_spec), tuple(rs[a] for a in rhs_spec), 1, 1)


def gradient_plan(lhs, rhs, out, padding, dimension_numbers):
    """The kernel gradient of a 3x3 convolution: a 3x3 result, sum_{n, y, x} lhs[b, n, y + i,
    x + j] cot[f, n, y, x] over the window (y, x) tiled m x m: F(3x3, m x m), the forward's
    matrices transposed (module docstring). Needs the result's batch axis contiguous in the
    input and its feature axis in the cotangent (NHWC)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    ls, rs, os_ = (contiguous_strides(a.shape) for a in (lhs, rhs, out))
    cin, cout = lhs.shape[lhs_spec[0]], rhs.shape[rhs_spec[0]]
    if ([out.shape[a] for a in out_spec[2:]] != [3, 3] or ls[lhs_spec[0]] != 1
            or rs[rhs_spec[0]] != 1 or min(cin, cout) < MIN_FEATURES):
        return None
    m = TILE
    batch = lhs.shape[lhs_spec[1]]
    win = tuple(rhs.shape[a] for a in rhs_spec[2:])
    tiles_sp = tuple(-(-s // m) for s in win)
    tiles = batch * tiles_sp[0] * tiles_sp[1]
    cpad, opad, tb = _blocking(m + 2, cin, cout, tiles, out.dtype)
    blocks = -(-tiles // tb)
    per_chunk = -(-blocks // min(blocks, CHUNKS))
    return Wino(True, m, m + 2, batch, tiles_sp, tiles, tb, cin, cout, cpad, opad, win,
                tuple(lhs.shape[a] for a in lhs_spec[2:]),
                tuple(ls[a] for a in (lhs_spec[1],) + tuple(lhs_spec[2:])), False,
                tuple(lo for lo, _ in padding), tuple(os_[a] for a in out_spec),
                tuple(rs[a] for a in rhs_spec), -(-blocks // per_chunk), per_chunk)


def workspace_bytes(wp, dtype):
    """Bytes of the workspace the plan needs first: the transformed kernel U (forward) or
    the chunks' partial sums (gradient); a relaid input follows."""
    a2 = wp.alpha * wp.alpha
    return a2 * wp.cin * wp.cout * wp.chunks * np.dtype(dtype).itemsize


def _combine(b, row, values, constant):
    """sum(c * v for c, v in zip(row, values)), the zero terms left out."""
    total = None
    for c, v in zip(row, values):
        if c == 0:
            continue
        if c in (1, -1):
            term, negative = v, c < 0
        else:
            term, negative = b.fmul(v, constant(abs(c)), flags=CONTRACT), c < 0
        if total is None:
            total = b.fneg(term) if negative else term
        else:
            total = (b.fsub if negative else b.fadd)(total, term, flags=CONTRACT)
    return total


def sandwich(b, matrix, grid, constant):
    """matrix @ grid @ matrix^T for a grid (lists of rows) of IR values."""
    left = [[_combine(b, row, [grid[k][j] for k in range(len(grid))], constant)
             for j in range(len(grid[0]))] for row in matrix]
    return [[_combine(b, row, left[i], constant) for row in matrix] for i in range(len(matrix))]


class _Vectors:
    """Vectors of `lanes` elements of a dtype along the features (or batch) axis."""

    def __init__(self, b, dtype):
        self.b, self.dtype = b, np.dtype(dtype)
        self.element = T.mem_type(dtype)
        self.lanes = VECTOR_BYTES // self.dtype.itemsize
        self.vector = ir.VectorType(T.reg_type(dtype), self.lanes)

    def constant(self, c):
        return ir.Constant(self.vector, [float(np.asarray(c, self.dtype))] * self.lanes)

    def stack(self, count):
        buffer = self.b.alloca(self.element, size=T.i64(count))
        buffer.align = 64
        return opaque(buffer)

    def at(self, pointer, offset):
        return self.b.gep(pointer, [offset], source_etype=self.element)

    def load(self, buffer, offset):
        """A vector of a stack buffer (aligned)."""
        return self.b.load(self.at(buffer, offset), typ=self.vector, align=64)

    def store(self, value, buffer, offset):
        self.b.store(value, self.at(buffer, offset), align=64)

    def read(self, pointer, f, count):
        """The elements [f, f + lanes) at `pointer`, those past `count` zeros."""
        b = self.b
        if count % self.lanes == 0:
            return b.load(self.at(pointer, f), typ=self.vector, align=self.dtype.itemsize)
        return masked_load(b, self.at(pointer, f), self.vector,
                           lane_mask(b, b.sub(T.i64(count), f), self.lanes), self.dtype.itemsize)

    def write(self, value, pointer, f, count):
        """Store the elements [f, f + lanes) of `value` at `pointer`, not those past `count`."""
        b = self.b
        if count % self.lanes == 0:
            b.store(value, self.at(pointer, f), align=self.dtype.itemsize)
        else:
            masked_store(b, value, self.at(pointer, f),
                         lane_mask(b, b.sub(T.i64(count), f), self.lanes), self.dtype.itemsize)

    def each(self, count, body):
        """body(f) for the offsets f of the vectors of `count` elements."""
        counted_loop(self.b, -(-count // self.lanes),
                     lambda b, v, c: body(b.mul(v, T.i64(self.lanes))) or c, (), "vec")


def _transform_kernel(b, wp, dtype, w, u):
    """u[p][ci][co] = (G w[co, ci] G^T)[p], element by element."""
    element = T.mem_type(dtype)
    so, si, sh, sw = wp.w_strides
    plane = wp.cin * wp.cout

    def pair(b, f, carried):
        ci, co = unravel(b, f, [wp.cin, wp.cout])
        base = b.add(b.mul(co, T.i64(so)), b.mul(ci, T.i64(si)))
        grid = [[b.load(b.gep(w, [b.add(base, T.i64(i * sh + j * sw))], source_etype=element),
                        typ=element) for j in range(3)] for i in range(3)]
        values = sandwich(b, G, grid, lambda c: T.const(dtype, c))
        for p in range(wp.alpha * wp.alpha):
            b.store(values[p // wp.alpha][p % wp.alpha],
                    b.gep(u, [b.add(T.i64(p * plane), f)], source_etype=element))
        return carried
    counted_loop(b, plane, pair, (), "wpair")


def _task_function(ctx):
    module = ctx.module
    task = ir.Function(module, pool.TASK_TYPE,
                       module.get_unique_name(f"{ctx.function.name}.winograd"))
    task.linkage = "internal"
    return task, ir.IRBuilder(task.append_basic_block("entry"))


def _tile(b, wp, term):
    """(image, origin of the tile) of tile number `term`."""
    n, ty, tx = unravel(b, term, [wp.batch, *wp.tiles_sp])
    return n, [b.mul(ty, T.i64(wp.m)), b.mul(tx, T.i64(wp.m))]


def _places(b, wp, n, origin, strides):
    """(inside, offset) of the m x m positions of the tile at `origin` of image n in an array
    of `wp.out_sp` positions with element strides (image, feature, spatial...)."""
    places = []
    for q in range(wp.m * wp.m):
        row, col = b.add(origin[0], T.i64(q // wp.m)), b.add(origin[1], T.i64(q % wp.m))
        inside = b.and_(b.icmp_signed("<", row, T.i64(wp.out_sp[0])),
                        b.icmp_signed("<", col, T.i64(wp.out_sp[1])))
        places.append((inside, b.add(b.add(b.mul(n, T.i64(strides[0])),
                                           b.mul(row, T.i64(strides[2]))),
                                     b.mul(col, T.i64(strides[3])))))
    return places


def _input_tile(vec, wp, x, n, origin, zeros, v, t):
    """V[p][t][:] = (B^T d B)[p] for the input tile d at `origin` of image n (zeros in the
    padding), vectors along the input's contiguous axis."""
    b, a = vec.b, wp.alpha
    at_n = b.mul(n, T.i64(wp.in_strides[0]))
    sources = []
    for p in range(a * a):
        valid, offset = window_offset(b, origin, [T.i64(p // a), T.i64(p % a)], (1, 1), (1, 1),
                                      wp.lows, (1, 1), wp.in_sp, wp.in_strides[1:], at_n)
        sources.append(b.select(valid, vec.at(x, offset), zeros))

    def features(f):
        grid = [[vec.read(sources[r * a + s], f, wp.cin) for s in range(a)] for r in range(a)]
        values = sandwich(b, B_T, grid, vec.constant)
        for p in range(a * a):
            vec.store(values[p // a][p % a], v,
                      b.add(b.mul(b.add(T.i64(p * wp.tb), t), T.i64(wp.cpad)), f))
    vec.each(wp.cin, features)


def _forward_task(ctx, wp, dtype):
    """`task(env, i)`: the tiles [i * tb, (i + 1) * tb) of the result."""
    task, b = _task_function(ctx)
    vec = _Vectors(b, dtype)
    a, m, tb = wp.alpha, wp.m, wp.tb
    zeros, v, mm = vec.stack(wp.cpad), vec.stack(a * a * tb * wp.cpad), \
        vec.stack(a * a * tb * wp.opad)
    y = vec.stack(m * m * wp.opad)
    b.store(ir.Constant(ir.ArrayType(vec.element, wp.cpad), None), zeros)
    env, i = task.args
    x, u, out = parallel.unpack_env(b, env, [T.PTR] * 3)
    first = b.mul(i, T.i64(tb))
    count = _min(b, b.sub(T.i64(wp.tiles), first), T.i64(tb))

    def transform_input(b, t, carried):
        _input_tile(vec, wp, x, *_tile(b, wp, b.add(first, t)), zeros, v, t)
        return carried
    counted_loop(b, count, transform_input, (), "tin")

    def product(b, p, carried):
        gemm_packed.emit_packed_gemm(
            b, dtype, count, wp.cout, wp.cin, vec.at(v, b.mul(p, T.i64(tb * wp.cpad))),
            (wp.cpad, 1), vec.at(u, b.mul(p, T.i64(wp.cin * wp.cout))), (wp.cout, 1),
            vec.at(mm, b.mul(p, T.i64(tb * wp.opad))), wp.opad)
        return carried
    counted_loop(b, a * a, product, (), "pos")
    sc = wp.out_strides[1]

    def transform_output(b, t, carried):
        places = _places(b, wp, *_tile(b, wp, b.add(first, t)), wp.out_strides)
        # contiguous features: vectors stored in place (those of positions outside the result
        # into the stack tile); otherwise through the stack tile, copied out element by element
        targets = [b.select(inside, vec.at(out, base), y)
                   for inside, base in places] if sc == 1 else None

        def features(f):
            grid = [[vec.load(mm, b.add(b.mul(b.add(T.i64((r * a + s) * tb), t),
                                              T.i64(wp.opad)), f))
                     for s in range(a)] for r in range(a)]
            values = sandwich(b, A_T, grid, vec.constant)
            for q in range(m * m):
                if targets is None:
                    vec.store(values[q // m][q % m], y, b.add(T.i64(q * wp.opad), f))
                else:
                    vec.write(values[q // m][q % m], targets[q], f, wp.cout)
        vec.each(wp.cout, features)
        for q, (inside, base) in enumerate(places if targets is None else ()):
            with b.if_then(inside):
                def copy(b, c, carried):
                    value = b.load(vec.at(y, b.add(T.i64(q * wp.opad), c)), typ=vec.element)
                    b.store(value, vec.at(out, b.add(base, b.mul(c, T.i64(sc)))))
                    return carried
                counted_loop(b, wp.cout, copy, (), "yout")
        return carried
    counted_loop(b, count, transform_output, (), "tout")
    b.ret_void()
    return task


def _gradient_task(ctx, wp, dtype):
    """`task(env, i)`: chunk i of the sum: its blocks of tiles (input tiles and cotangent
    tiles transformed), partial[i][p] (+)= V[p]^T @ C[p] for each transformed position p."""
    task, b = _task_function(ctx)
    vec = _Vectors(b, dtype)
    a, m, tb = wp.alpha, wp.m, wp.tb
    expand = [list(column) for column in zip(*A_T)]   # A: a x m
    zeros, v, cm = vec.stack(max(wp.cpad, wp.opad)), vec.stack(a * a * tb * wp.cpad), \
        vec.stack(a * a * tb * wp.opad)
    b.store(ir.Constant(ir.ArrayType(vec.element, max(wp.cpad, wp.opad)), None), zeros)
    env, i = task.args
    x, g, partial = parallel.unpack_env(b, env, [T.PTR] * 3)
    plane = wp.cin * wp.cout
    partial = vec.at(partial, b.mul(i, T.i64(a * a * plane)))
    blocks = -(-wp.tiles // tb)
    image_first = (wp.w_strides[1], wp.w_strides[0]) + wp.w_strides[2:]
    first_block = b.mul(i, T.i64(wp.per_chunk))

    def block(b, j, carried):
        first = b.mul(b.add(first_block, j), T.i64(tb))
        count = _min(b, b.sub(T.i64(wp.tiles), first), T.i64(tb))

        def transform(b, t, carried):
            n, origin = _tile(b, wp, b.add(first, t))
            _input_tile(vec, wp, x, n, origin, zeros, v, t)
            sources = [b.select(inside, vec.at(g, base), zeros)
                       for inside, base in _places(b, wp, n, origin, image_first)]

            def features(f):
                grid = [[vec.read(sources[r * m + s], f, wp.cout) for s in range(m)]
                        for r in range(m)]
                values = sandwich(b, expand, grid, vec.constant)
                for p in range(a * a):
                    vec.store(values[p // a][p % a], cm,
                              b.add(b.mul(b.add(T.i64(p * tb), t), T.i64(wp.opad)), f))
            vec.each(wp.cout, features)
            return carried
        counted_loop(b, count, transform, (), "tin")

        def product(b, p, carried):
            gemm_packed.emit_packed_gemm(
                b, dtype, wp.cin, wp.cout, count, vec.at(v, b.mul(p, T.i64(tb * wp.cpad))),
                (1, wp.cpad), vec.at(cm, b.mul(p, T.i64(tb * wp.opad))), (wp.opad, 1),
                vec.at(partial, b.mul(p, T.i64(plane))), wp.cout,
                b.zext(b.icmp_signed(">", j, T.i64(0)), T.I64))
            return carried
        counted_loop(b, a * a, product, (), "pos")
        return carried
    counted_loop(b, _min(b, T.i64(wp.per_chunk), b.sub(T.i64(blocks), first_block)), block, (),
                 "block")
    b.ret_void()
    return task


def _finish_gradient(b, wp, dtype, partial, out):
    """out[ci, co] = G^T (the sum of the chunks' partial[p][ci][co]) G, vectors along co."""
    vec = _Vectors(b, dtype)
    a, plane = wp.alpha, wp.cin * wp.cout
    shrink = [list(column) for column in zip(*G)]   # G^T: 3 x a
    sb, sf, sh, sw = wp.out_strides

    def row(b, ci, carried):
        def features(f):
            def total(p):
                def add(b, c, acc):
                    at = b.add(b.mul(c, T.i64(a * a * plane)),
                               b.add(T.i64(p * plane), b.mul(ci, T.i64(wp.cout))))
                    return [b.fadd(acc[0], vec.read(vec.at(partial, at), f, wp.cout))]
                return counted_loop(b, wp.chunks, add, [vec.constant(0)], "chunk")[0]
            values = sandwich(b, shrink, [[total(r * a + s) for s in range(a)]
                                          for r in range(a)], vec.constant)
            for i in range(3):
                for j in range(3):
                    value = values[i][j]
                    place = vec.at(out, b.add(b.mul(ci, T.i64(sb)), T.i64(i * sh + j * sw)))
                    if sf == 1:
                        vec.write(value, place, f, wp.cout)
                        continue
                    for lane in range(vec.lanes):   # strided features: element by element
                        column = b.add(f, T.i64(lane))
                        with b.if_then(b.icmp_signed("<", column, T.i64(wp.cout))):
                            b.store(b.extract_element(value, T.I32(lane)),
                                    vec.at(place, b.mul(column, T.i64(sf))))
        vec.each(wp.cout, features)
        return carried
    counted_loop(b, wp.cin, row, (), "grow")


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def emit(ctx, wp, dtype, x, w, work, out):
    """The convolution by Winograd's method (`work`: the workspace, `workspace_bytes`)."""
    b = ctx.builder
    if wp.gradient:
        task = _gradient_task(ctx, wp, dtype)
        tasks = wp.chunks
    else:
        _transform_kernel(b, wp, dtype, w, work)
        task = _forward_task(ctx, wp, dtype)
        tasks = -(-wp.tiles // wp.tb)
    env = parallel.pack_env(b, [x, w, work] if wp.gradient else [x, work, out])
    if tasks > 1:
        pool.emit_run_tasks(b, task, env, tasks, False)
    else:
        b.call(task, [env, T.i64(0)])
    if wp.gradient:
        _finish_gradient(b, wp, dtype, work, out)
