"""The runtime library's FFT kernels: `kiln_fft_complex64` and `kiln_fft_complex128`.

    kiln_fft_<dtype>(in, out, outer, inner, n, len_in, len_out, mode, scale, work,
                     lanes, slots, out_row, out_stride, twist)

transforms every line of a row-major array [outer, len_in, inner] (`in`) along its middle
axis into lines of `out` (it may be `in`): the line (o, i) starts at element
o * len_in * inner + i of `in` and its elements are `inner` apart; in `out` it starts at
o * out_row + i and its elements are out_stride apart (for [outer, len_out, inner]:
out_row = len_out * inner, out_stride = inner; other values write lines transposed).
`mode` is one of MODES: a complex transform, forward or inverse (len_in = len_out = n); a
real line of n (`in` holds float32/float64) to its first n // 2 + 1 coefficients (NumPy's
rfft); the first n // 2 + 1 coefficients of a Hermitian line to its n real values (irfft:
the rest of the line is the conjugate mirror of the first half, and the imaginary parts of
the zero (and the n / 2) coefficient are ignored, as NumPy does; coefficients past len_in
are zeros, those past n // 2 unused: NumPy's padding and cropping); or real_split, which
turns rows of half-length transforms into an rfft's coefficients in place (`real_split`).
Results are multiplied by `scale`. `twist` (0 or N = n inner) multiplies element k of
column j by W_N^(k j) before the conjugation back: the middle step of a four-step transform
(lower_fft.py). `work` holds `work_bytes`: the twiddle table (L complex numbers, L = n or
Bluestein's m), Bluestein's chirp and transformed filter, the twist's table, then `slots`
pairs of line buffers A and B of lanes * L complex numbers each.

Lines are transformed `lanes` at a time (`plan`): adjacent columns (i, i + 1, ...) when
inner > 1, else adjacent rows. A group is gathered into A interleaved (element j of lane v
at v + lanes j) and split into planes (real parts, then imaginary parts), so every pass is
a plain vector loop over lanes and sub-transforms (explicit vectors of VECTOR_BYTES when
lanes * s fills them). A whole group of complex lines, lanes a multiple of the vector width
w, moves as vectors (`gather_blocks`, `scatter_blocks`): adjacent columns' element j as one
load or store, rows as w x w blocks (w elements of w rows) transposed in registers. Other
groups move element by element: rows one after the other, columns element by element. Groups are dealt to `slots` tasks on
the thread pool (pool.py: kiln_run_tasks), task t taking groups t, t + slots, ..., with
its own A and B; the tables are shared, computed once per call before the tasks.

Each line is gathered (converted to complex, mirrored, and conjugated for an inverse
transform: ifft(x) = conj(fft(conj(x))), so only the forward transform exists),
transformed, and scattered from whichever buffer holds the result (times the twist,
conjugated back, scaled, the real part for irfft). The transform:
- n a power of two: the Stockham autosort algorithm (no bit reversal; each pass reads one
  buffer and writes the other), radix 4 with one radix-2 pass last when log2(n) is odd. A
  pass with stride s (1, 4, 16, ...) over sub-transforms of length L = n / s, m = L / 4:
      for p < m, q < s:  a, b, c, d = x[q + s (p + j m)]  (j = 0..3)
        y[q + s 4p]       = (a + c) + (b + d)
        y[q + s (4p + 1)] = w^p    ((a - c) - i (b - d))
        y[q + s (4p + 2)] = w^2p   ((a + c) - (b + d))
        y[q + s (4p + 3)] = w^3p   ((a - c) + i (b - d))        w = exp(-2 pi i / L)
  where w^(j p) = W^(j p s) is read from the table W^k = exp(-2 pi i k / n). With lanes
  interleaved lines, q runs over lanes s (the lanes of one q are adjacent). A single line's
  first pass (s = 1) runs one loop over p; the others are `emit_pass`'s function, whose
  buffers are noalias, so that its loops vectorise without overlap checks;
- any other n: Bluestein's algorithm. With the chirp c[j] = exp(-pi i j^2 / n),
  X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]), a circular convolution of length m (the
  power of two >= 2n - 1), computed by the Stockham transform of length m: forward, times
  the transformed filter conj(c), inverse. The chirp and filter are computed once per call.
The table is computed on entry, in double (mathlib's sin and cos), then rounded: O(L) per
call (L / 8 sines and cosines and exact symmetries), beside the O(outer inner L log L) of
the transform. The chirp and real_split's twiddles are products of two tables of about
sqrt(count) sines and cosines each (`unit_tables`); the twist's W_N^e, e = e_hi inner + e_lo,
is the table's W_n^e_hi times a table of inner sines and cosines, W_N^e_lo.
"""
import math

import llvmlite.ir as ir
import numpy as np

from . import externs, mathlib
from . import ltypes as T
from .calls import intrinsic
from .loops import counted_loop
from .pool import RUN_TASKS, TASK_TYPE

F64 = ir.DoubleType()
DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))
NAMES = {dtype: f"kiln_fft_{dtype.name}" for dtype in DTYPES}
# the kernel's modes (module docstring)
MODES = {"forward": 0, "inverse": 1, "real_forward": 2, "real_inverse": 3, "real_split": 4}
FUNCTION_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.I64, T.I64, T.I64, T.I64, T.I64,
                                         T.I64, F64, T.PTR, T.I64, T.I64, T.I64, T.I64,
                                         T.I64])
_ENV = ir.LiteralStructType(FUNCTION_TYPE.args)
# x, y, table, wide, m, s, plane (_Kernel.pass4)
_PASS_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.PTR, T.I64, T.I64, T.I64, T.I64])
MAX_LANES = 16          # lines transformed together
LANE_ELEMENTS = 1 << 14  # lanes * L at most (two buffers of 128 KiB for complex64: L2-resident)
VECTOR_BYTES = 64       # the passes' explicit vectors (one AVX-512 register, two AVX2 ones)
MAX_SLOTS = 16          # tasks (each with its own line buffers) a call is split into
SLOT_WORK = 1 << 16     # lines * L per task at least: smaller calls run on the caller alone


def emit_call(builder, dtype, src, dst, outer, inner, n, len_in, len_out, mode, scale, work,
              out_row=None, out_stride=None, twist=0):
    """Call the runtime library's kernel for complex `dtype` (see the module docstring), with
    the lanes and slots of `plan`; `work` must hold `work_bytes(dtype, outer, inner, n,
    twist)`. The output's rows and elements are `out_row` and `out_stride` apart (by default
    [outer, len_out, inner]'s)."""
    lanes, slots = plan(outer, inner, n)
    out_row = len_out * inner if out_row is None else out_row
    out_stride = inner if out_stride is None else out_stride
    args = [src, dst, T.i64(outer), T.i64(inner), T.i64(n), T.i64(len_in), T.i64(len_out),
            T.i64(MODES[mode]), ir.Constant(F64, float(scale)), work, T.i64(lanes),
            T.i64(slots), T.i64(out_row), T.i64(out_stride), T.i64(twist)]
    externs.call(builder, NAMES[np.dtype(dtype)], FUNCTION_TYPE, args)


def transform_length(n):
    """The power of two the Stockham passes of a length-n transform run on: n, or
    Bluestein's convolution length (>= 2n - 1)."""
    return n if n & (n - 1) == 0 else 1 << (2 * n - 2).bit_length()


def plan(outer, inner, n):
    """(lanes, slots) for the outer * inner lines of length n: lanes lines transformed
    together (adjacent columns when inner > 1, else adjacent rows), and the number of tasks
    (each with its own buffers) their groups are dealt to, one per SLOT_WORK of
    work (lines * L), at most MAX_SLOTS."""
    length = transform_length(n)
    lanes = max(1, min(MAX_LANES, LANE_ELEMENTS // length, inner if inner > 1 else outer))
    groups = outer * -(-inner // lanes) if inner > 1 else -(-outer // lanes)
    slots = max(1, min(MAX_SLOTS, groups, outer * inner * length // SLOT_WORK))
    return lanes, slots


def work_bytes(dtype, outer, inner, n, twist=0, mode="forward"):
    """Bytes of `work` for the outer * inner lines of length n (module docstring)."""
    if mode == "real_split":
        return 2 * _split_step(n) * np.dtype(dtype).itemsize
    length = transform_length(n)
    lanes, slots = plan(outer, inner, n)
    shared = (length if length == n else 2 * length + n) + (inner if twist else 0)
    return (shared + 2 * slots * lanes * length) * np.dtype(dtype).itemsize


def _split_step(n):
    """S, the power of two with S^2 >= n / 4 + 1 (the twiddles real_split needs): W^k =
    W^(S k_hi) W^k_lo."""
    return 1 << ((n // 4).bit_length() + 1) // 2


def _mask(indices):
    """A shufflevector mask."""
    indices = list(indices)
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), indices)


def emit(module):
    """Define `kiln_fft_complex64` and `kiln_fft_complex128` (external) in `module`, beside
    the thread pool's `kiln_run_tasks` (pool.py)."""
    for dtype, name in NAMES.items():
        _Kernel(module, name, dtype).emit()


class _Kernel:
    def __init__(self, module, name, dtype):
        self.module = module
        self.fn = ir.Function(module, FUNCTION_TYPE, name)
        self.task = ir.Function(module, TASK_TYPE, f"{name}.task")
        self.task.linkage = "internal"
        self.pass_fn = ir.Function(module, _PASS_TYPE, f"{name}.pass4")
        self.pass_fn.linkage = "internal"
        for arg in self.pass_fn.args[:2]:
            arg.add_attribute("noalias")
        self.part = T.reg_type(np.dtype(dtype.char.lower()))
        self.part_bytes = dtype.itemsize // 2
        domain = module.add_metadata([ir.MetaDataString(module, f"{name}.domain")])
        self.buffers_scope = module.add_metadata([module.add_metadata([
            ir.MetaDataString(module, f"{name}.buffers"), domain])])

    # ------------------------------------------------------------------ complex values
    def at(self, b, base, index):
        """Pointer to the real part of complex element `index` of `base`."""
        return b.gep(base, [b.shl(index, T.i64(1))], inbounds=True, source_etype=self.part)

    def tag(self, access, buffer):
        """Scoped alias metadata: the line buffers (A and B) never overlap anything else the
        kernel reads or writes (the arrays, the tables), so loops that move data between
        them vectorise without run-time overlap checks."""
        access.set_metadata("alias.scope" if buffer else "noalias", self.buffers_scope)
        return access

    def load(self, b, base, index):
        p = self.at(b, base, index)
        q = b.gep(p, [T.i64(1)], inbounds=True, source_etype=self.part)
        return tuple(self.tag(b.load(r, typ=self.part), False) for r in (p, q))

    def store(self, b, base, index, z):
        p = self.at(b, base, index)
        self.tag(b.store(z[0], p), False)
        self.tag(b.store(z[1], b.gep(p, [T.i64(1)], inbounds=True, source_etype=self.part)),
                 False)

    def bload(self, b, base, index, typ=None):
        """Element `index` of a line buffer: real parts first, then imaginary parts (planes
        `plane` apart), so that the passes' loops are plain vector loops. `typ`: a vector
        of adjacent elements instead of one."""
        return tuple(self.tag(b.load(b.gep(base, [i], inbounds=True, source_etype=self.part),
                                     typ=typ or self.part,
                                     align=self.part_bytes), True)
                     for i in (index, b.add(index, self.plane)))

    def bstore(self, b, base, index, z):
        for value, i in zip(z, (index, b.add(index, self.plane))):
            self.tag(b.store(value, b.gep(base, [i], inbounds=True, source_etype=self.part),
                             align=self.part_bytes), True)

    def real(self, b, base, index):
        return self.tag(b.load(b.gep(base, [index], inbounds=True, source_etype=self.part),
                               typ=self.part), False)

    @staticmethod
    def add(b, x, y):
        return b.fadd(x[0], y[0]), b.fadd(x[1], y[1])

    @staticmethod
    def sub(b, x, y):
        return b.fsub(x[0], y[0]), b.fsub(x[1], y[1])

    @staticmethod
    def mul(b, x, y):
        return (b.fsub(b.fmul(x[0], y[0]), b.fmul(x[1], y[1])),
                b.fadd(b.fmul(x[0], y[1]), b.fmul(x[1], y[0])))

    @staticmethod
    def conj(b, x):
        return x[0], b.fneg(x[1])

    @staticmethod
    def times_i(b, x):
        return b.fneg(x[1]), x[0]

    @staticmethod
    def nest(b, count, lanes, body, rows, name):
        """body(b, k, v) for k < count, v < lanes: k in the inner loop when `rows`."""
        def inner(b, i, _):
            counted_loop(b, count if rows else lanes, lambda b, j, _: body(
                b, *((j, i) if rows else (i, j))) or [], name=f"{name}.in")
            return []
        counted_loop(b, lanes if rows else count, inner, name=name)

    @staticmethod
    def lanes_loop(b, lanes, j, body, name):
        """for v < lanes: body(b, v, v + lanes * j), the index of lane v's element j."""
        row = b.mul(j, lanes)
        counted_loop(b, lanes, lambda b, v, _: body(b, v, b.add(row, v)) or [], name=name)

    # ------------------------------------------------------------------ the functions
    def bind(self, b, args):
        """The values both functions derive from the kernel's arguments."""
        self.args = args
        _, _, _, inner, n, _, _, mode, scale, work, lanes, _, _, _, twist = args
        self.n, self.lanes = n, lanes
        self.pow2 = b.icmp_unsigned("==", b.and_(n, b.sub(n, T.i64(1))), T.i64(0))
        # Bluestein's length: the power of two m >= 2n - 1 (for n >= 3)
        m = b.shl(T.i64(1), b.sub(T.i64(64), intrinsic(
            b, "ctlz", [b.sub(b.add(n, n), T.i64(2)), ir.Constant(T.I1, 0)])))
        self.length = length = b.select(self.pow2, n, m)
        self.table = work
        self.chirp = self.at(b, work, length)
        self.filter = self.at(b, self.chirp, n)
        shared = b.select(self.pow2, length, b.add(b.add(length, length), n))
        self.fine = self.at(b, work, shared)
        self.twisted = b.icmp_unsigned("!=", twist, T.i64(0))
        self.buffers = self.at(b, self.fine, b.select(self.twisted, inner, T.i64(0)))
        self.scale = b.fptrunc(scale, self.part) if self.part != F64 else scale
        self.inverse = b.icmp_unsigned("==", b.and_(mode, T.i64(1)), T.i64(1))
        self.width = VECTOR_BYTES // self.part_bytes
        width = T.i64(self.width)
        # lanes fill vectors of `width` (gather_blocks); rows also need n a multiple of it
        self.blocked = b.icmp_unsigned("==", b.urem(lanes, width), T.i64(0))
        self.whole_rows = b.icmp_unsigned("==", b.urem(n, width), T.i64(0))

    def use_slot(self, b, t):
        """A and B = task t's line buffers."""
        self.plane = size = b.mul(self.lanes, self.length)
        self.a = self.at(b, self.buffers, b.mul(t, b.add(size, size)))
        self.b = self.at(b, self.a, size)

    def emit(self):
        """The entry: the shared tables, then the groups of lines as `slots` tasks on the
        pool (on the caller alone for one)."""
        b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.bind(b, list(self.fn.args))
        split = self.fn.append_basic_block("real_split")
        lines = self.fn.append_basic_block("lines")
        b.cbranch(b.icmp_unsigned("==", self.args[7], T.i64(MODES["real_split"])), split, lines)
        b.position_at_end(split)
        self.real_split(b)
        b.ret_void()
        b.position_at_end(lines)
        self.use_slot(b, T.i64(0))
        self.emit_table(b)
        self.branch_on(b, [(self.pow2, lambda b: None), (None, self.bluestein_setup)])
        self.branch_on(b, [(self.twisted, self.emit_fine_table), (None, lambda b: None)])
        packed = ir.Constant(_ENV, ir.Undefined)
        for k, value in enumerate(self.fn.args):
            packed = b.insert_value(packed, value, k)
        env = externs.stack_slot(b, packed)
        slots = self.fn.args[11]
        self.branch_on(b, [(b.icmp_unsigned("==", slots, T.i64(1)),
                            lambda b: b.call(self.task, [env, T.i64(0)])),
                           (None, lambda b: b.call(self.module.globals[RUN_TASKS], [
                               self.task, env, slots, ir.Constant(T.I32, 0)]))])
        b.ret_void()
        self.emit_task()
        self.emit_pass()

    def real_split(self, b):
        """In place on the rows of `dst` (outer rows of len_out = n / 2 + 1 complex numbers),
        each holding Z, the transform of length h = n / 2 of a real line of n read as h
        complex numbers (x[2j] + i x[2j + 1]): the line's coefficients X[0..h]. With
        E = (Z[k] + conj Z[h - k]) / 2, O = (Z[k] - conj Z[h - k]) / 2, T = i W^k O
        (W = exp(-2 pi i / n)): X[k] = E - T and X[h - k] = conj(E + T), for k = 1..h/2;
        X[0] and X[h] are Re Z[0] +- Im Z[0]. W^k comes from `unit_tables`."""
        _, dst, outer, _, n, _, row, _, _, work, _, _, _, _, _ = self.args
        h = b.lshr(n, T.i64(1))
        twiddle = self.unit_tables(b, work, b.add(b.lshr(n, T.i64(2)), T.i64(1)),
                                   b.fdiv(ir.Constant(F64, -2 * math.pi), b.uitofp(n, F64)))
        half = ir.Constant(self.part, 0.5)
        zero = ir.Constant(self.part, 0.0)

        def line(b, o, _):
            base = self.at(b, dst, b.mul(o, row))
            re, im = self.load(b, base, T.i64(0))
            self.store(b, base, T.i64(0), (b.fadd(re, im), zero))
            self.store(b, base, h, (b.fsub(re, im), zero))

            def pair(b, i, _):
                k = b.add(i, T.i64(1))
                a, c = self.load(b, base, k), self.conj(b, self.load(b, base, b.sub(h, k)))
                e = [b.fmul(v, half) for v in self.add(b, a, c)]
                odd = [b.fmul(v, half) for v in self.sub(b, a, c)]
                t = self.times_i(b, self.mul(b, twiddle(b, k), odd))
                self.store(b, base, k, self.sub(b, e, t))
                self.store(b, base, b.sub(h, k), self.conj(b, self.add(b, e, t)))
                return []
            counted_loop(b, b.lshr(h, T.i64(1)), pair, name="split.k")
            return []
        counted_loop(b, outer, line, name="split.row")

    def unit_tables(self, b, base, count, step):
        """exp(i step e) for e < count as products of two tables at `base` (2 S complex
        numbers, S the power of two with S^2 >= count), computed in double (`unit`):
        exp(i step S e_hi) and exp(i step e_lo). Returns `w(b, e)`, e = S e_hi + e_lo."""
        shift = b.lshr(b.sub(T.i64(65), intrinsic(
            b, "ctlz", [b.sub(count, T.i64(1)), ir.Constant(T.I1, 0)])), T.i64(1))
        size = b.shl(T.i64(1), shift)
        low, high = base, self.at(b, base, size)

        def entry(b, k, _):
            for table, index in ((low, k), (high, b.mul(k, size))):
                self.store(b, table, k, self.unit(b, b.fmul(b.uitofp(index, F64), step)))
            return []
        counted_loop(b, size, entry, name="units")
        return lambda b, e: self.mul(b, self.load(b, high, b.lshr(e, shift)),
                                     self.load(b, low, b.and_(e, b.sub(size, T.i64(1)))))

    def emit_task(self):
        """Task t: the groups t, t + slots, ... of `lanes` lines each: adjacent columns of
        one row when inner > 1 (groups row by row), else adjacent rows."""
        env, t = self.task.args
        b = ir.IRBuilder(self.task.append_basic_block("entry"))
        args = [b.load(b.gep(env, [T.i64(0), ir.Constant(T.I32, k)], source_etype=_ENV),
                       typ=typ) for k, typ in enumerate(_ENV.elements)]
        self.bind(b, args)
        self.use_slot(b, t)
        src, dst, outer, inner, n, len_in, len_out, mode, _, _, lanes, slots, out_row, \
            out_stride, _ = args
        one = T.i64(1)
        wide = b.icmp_unsigned(">", inner, one)
        per_row = b.udiv(b.sub(b.add(inner, lanes), one), lanes)
        groups = b.select(wide, b.mul(outer, per_row),
                          b.udiv(b.sub(b.add(outer, lanes), one), lanes))
        mine = b.select(b.icmp_unsigned(">", groups, t),
                        b.udiv(b.sub(b.add(b.sub(groups, t), slots), one), slots), T.i64(0))

        def group(b, k, _):
            g = b.add(t, b.mul(k, slots))
            row, col = b.udiv(g, per_row), b.mul(b.urem(g, per_row), lanes)
            first = b.select(wide, row, b.mul(g, lanes))      # the first line's row
            col = b.select(wide, col, T.i64(0))
            left = b.select(wide, b.sub(inner, col), b.sub(outer, first))
            count = b.select(b.icmp_unsigned("<", left, lanes), left, lanes)
            base_in = b.add(b.mul(b.mul(first, len_in), inner), col)
            base_out = b.add(b.mul(first, out_row), col)
            # whole groups of complex lines move as blocks of vectors (`gather_blocks`)
            blocks = b.and_(b.and_(b.icmp_unsigned("==", count, lanes), self.blocked),
                            b.icmp_unsigned("<", mode, T.i64(MODES["real_forward"])))
            blocks_in = b.and_(blocks, b.or_(wide, self.whole_rows))
            rows_out = b.and_(b.and_(self.whole_rows, b.icmp_unsigned("==", out_stride, one)),
                              b.icmp_unsigned("!=", out_row, one))
            blocks_out = b.and_(b.and_(blocks, b.not_(self.twisted)), b.or_(wide, rows_out))
            # from one lane's line to the next's: 1 (a constant: contiguous loads and stores)
            # for adjacent columns, else the rows' distances
            self.branch_on(b, [(blocks_in, lambda b: self.gather_blocks(
                                   b, src, base_in, len_in, wide)),
                               (wide, lambda b: self.gather(b, src, base_in, one, count, mode,
                                                            len_in, False)),
                               (None, lambda b: self.gather(b, src, base_in, len_in, count,
                                                            mode, len_in, True))])
            result = self.transform(b, count)
            self.branch_on(b, [(blocks_out, lambda b: self.scatter_blocks(
                b, result, dst, base_out, out_row, out_stride, wide)),
                (wide, lambda b: self.scatter(
                b, result, dst, base_out, one, out_stride, count, len_out, mode, col, False)),
                # rows written transposed (four steps) are adjacent: element by element
                (b.icmp_unsigned("==", out_row, one), lambda b: self.scatter(
                    b, result, dst, base_out, one, out_stride, count, len_out, mode, col, False)),
                (None, lambda b: self.scatter(b, result, dst, base_out, out_row, out_stride,
                                              count, len_out, mode, col, True))])
            return []
        counted_loop(b, mine, group, name="group")
        b.ret_void()

    def emit_table(self, b):
        """table[k] = exp(-2 pi i k / L), k < L, L the power of two the Stockham passes
        transform (n, or Bluestein's m). For L >= 8 only k <= L/8 are computed; the rest
        follow by symmetry, exactly: W^(L/4 - k) = (sin, -cos) of k's angle,
        W^(k + L/4) = -i W^k, W^(k + L/2) = -W^k, W^(k + 3L/4) = i W^k."""
        n = self.length
        step = b.fdiv(ir.Constant(F64, -2 * math.pi), b.sitofp(n, F64))

        def cos_sin(b, k):
            return self.unit(b, b.fmul(b.sitofp(k, F64), step))

        def every(b, count):
            counted_loop(b, count, lambda b, k, _: self.store(
                b, self.table, k, cos_sin(b, k)) or [], name="tw")

        def symmetric(b):
            quarter = b.lshr(n, T.i64(2))

            def octant(b, k, _):
                c, s = cos_sin(b, k)          # s = -sin of the angle 2 pi k / n
                self.store(b, self.table, k, (c, s))
                self.store(b, self.table, b.sub(quarter, k), (b.fneg(s), b.fneg(c)))
                return []
            counted_loop(b, b.add(b.lshr(n, T.i64(3)), T.i64(1)), octant, name="tw8")

            def rotate(b, k, _):
                re, im = self.load(b, self.table, k)
                self.store(b, self.table, b.add(k, quarter), (im, b.fneg(re)))
                self.store(b, self.table, b.add(k, b.add(quarter, quarter)),
                           (b.fneg(re), b.fneg(im)))
                self.store(b, self.table, b.add(k, b.mul(quarter, T.i64(3))), (b.fneg(im), re))
                return []
            counted_loop(b, quarter, rotate, name="tw4")

        self.branch_on(b, [(b.icmp_unsigned(">=", n, T.i64(8)), symmetric),
                           (None, lambda b: every(b, n))])

    def branch_on(self, b, cases):
        """Emit `cases[key](b)` for the runtime i1 conditions `key`, first true wins, in a
        chain of branches: [(condition, emit), ..., (None, emit)]."""
        done = b.function.append_basic_block("case.done")
        for cond, body in cases:
            if cond is None:
                body(b)
                b.branch(done)
                break
            then = b.function.append_basic_block("case")
            other = b.function.append_basic_block("case.else")
            b.cbranch(cond, then, other)
            b.position_at_end(then)
            body(b)
            b.branch(done)
            b.position_at_end(other)
        b.position_at_end(done)

    def gather(self, b, src, base, step, lanes, mode, len_in, rows):
        """A = the `lanes` lines at base, base + step, ... interleaved (element j of lane v at
        v + lanes j) as complex numbers (mirrored for irfft, whose coefficients past `len_in`
        are zeros), conjugated for an inverse transform. Elements are `inner` apart. `rows`:
        one line after the other, else element by element (`nest`)."""
        n, stride = self.n, self.args[3]
        zero = ir.Constant(self.part, 0.0)

        def lines(b, element, name):
            """A's element j of lane v = `element(b, j, at)`, `at(k)` the index in src of the
            lane's element k."""
            def put(b, j, v):
                z = element(b, j, lambda k: b.add(b.add(base, b.mul(k, stride)), b.mul(v, step)))
                z = (z[0], b.select(self.inverse, b.fneg(z[1]), z[1]))
                self.bstore(b, self.a, b.add(b.mul(j, lanes), v), z)
            self.nest(b, n, lanes, put, rows, name)

        def hermitian(b, j, at):
            mirror = b.icmp_signed(">=", j, b.add(b.lshr(n, T.i64(1)), T.i64(1)))
            k = b.select(mirror, b.sub(n, j), j)
            present = b.icmp_signed("<", k, len_in)
            re, im = self.load(b, src, at(b.select(present, k, T.i64(0))))
            re, im = b.select(present, re, zero), b.select(present, im, zero)
            return re, b.select(mirror, b.fneg(im), im)

        self.branch_on(b, [(b.icmp_unsigned("==", mode, T.i64(MODES["real_forward"])),
                            lambda b: lines(b, lambda b, j, at: (
                                self.real(b, src, at(j)), zero), "ldr")),
                           (b.icmp_unsigned("==", mode, T.i64(MODES["real_inverse"])),
                            lambda b: lines(b, hermitian, "ldh")),
                           (None, lambda b: lines(b, lambda b, j, at: self.load(
                               b, src, at(j)), "ld"))])

    def scatter(self, b, result, dst, base, step, stride, lanes, count, mode, col, rows):
        """The first `count` elements of each of the `lanes` lines in `result` to the lines
        at base, base + step, ... of `dst` (elements `stride` apart): times the twist's
        twiddles, conjugated back, scaled, the real part for irfft. `rows`: one line after
        the other (each line's stores contiguous when stride is 1), else element by
        element (adjacent columns: each element's stores contiguous)."""
        def value(b, z):
            im = b.select(self.inverse, b.fneg(z[1]), z[1])
            return b.fmul(z[0], self.scale), b.fmul(im, self.scale)

        def lines(b, put, name, twist=False):
            def element(b, k, v):
                z = self.bload(b, result, b.add(b.mul(k, lanes), v))
                put(b, b.add(b.add(base, b.mul(k, stride)), b.mul(v, step)),
                    value(b, self.twist(b, z, k, b.add(col, v)) if twist else z))
            self.nest(b, count, lanes, element, rows, name)

        def complex_line(b, twist=False):
            lines(b, lambda b, p, z: self.store(b, dst, p, z), "st", twist)

        def real_line(b):
            def put(b, p, z):
                self.tag(b.store(z[0], b.gep(dst, [p], inbounds=True, source_etype=self.part)),
                         False)
            lines(b, put, "str")

        self.branch_on(b, [(b.icmp_unsigned("==", mode, T.i64(MODES["real_inverse"])),
                            real_line),
                           (self.twisted, lambda b: complex_line(b, True)),
                           (None, complex_line)])

    # ------------------------------------------------------------------ blocks of vectors
    def vload(self, b, base, index):
        """The `width` complex elements of an array from `index` on as two vectors (real
        parts, imaginary parts)."""
        pair = b.load(self.at(b, base, index), typ=ir.VectorType(self.part, 2 * self.width),
                      align=self.part_bytes)
        self.tag(pair, False)
        return tuple(b.shuffle_vector(pair, pair, _mask(range(part, 2 * self.width, 2)))
                     for part in (0, 1))

    def vstore(self, b, base, index, z):
        w = self.width
        pair = b.shuffle_vector(z[0], z[1], _mask(k // 2 + w * (k % 2) for k in range(2 * w)))
        self.tag(b.store(pair, self.at(b, base, index), align=self.part_bytes), False)

    def transpose(self, b, rows):
        """The `width` x `width` matrix of vectors `rows`, transposed: the off-diagonal
        d x d blocks of every 2d x 2d block swapped, for d = width / 2, ..., 1."""
        rows, w, d = list(rows), self.width, self.width // 2
        while d:
            for i in (i for i in range(w) if not i & d):
                low, high = rows[i], rows[i + d]
                rows[i] = b.shuffle_vector(low, high, _mask(
                    c if not c & d else w + c - d for c in range(w)))
                rows[i + d] = b.shuffle_vector(low, high, _mask(
                    c + d if not c & d else w + c for c in range(w)))
            d //= 2
        return rows

    def over_blocks(self, b, wide, columns, rows, name):
        """columns(b, j, lb) for elements j < n, or rows(b, jb, lb) for blocks of `width`
        elements jb < n / width, and blocks of `width` lanes lb < lanes / width."""
        w = T.i64(self.width)

        def each(body, tag):
            def outer(b, j, _):
                counted_loop(b, b.udiv(self.lanes, w), lambda b, lb, _: body(b, j, lb) or [],
                             name=f"{name}{tag}b")
                return []
            return outer
        self.branch_on(b, [(wide, lambda b: counted_loop(
                                b, self.n, each(columns, "v"), name=f"{name}v") and None),
                           (None, lambda b: counted_loop(
                                b, b.udiv(self.n, w), each(rows, "r"), name=f"{name}r") and None)])

    def gather_blocks(self, b, src, base, len_in, wide):
        """`gather` for a whole group of complex lines (lanes a multiple of `width`), by
        vectors of `width` elements: adjacent columns' element j is one vector load; rows
        are read `width` elements of `width` rows at a time and transposed in registers."""
        w, lanes = self.width, self.lanes

        def put(b, index, z):
            self.bstore(b, self.a, index, (z[0], b.select(self.inverse, b.fneg(z[1]), z[1])))

        def columns(b, j, lb):
            at = b.add(b.mul(j, lanes), b.mul(lb, T.i64(w)))
            put(b, at, self.vload(b, src, b.add(b.add(base, b.mul(j, self.args[3])),
                                               b.mul(lb, T.i64(w)))))

        def rows(b, jb, lb):
            first = b.add(base, b.mul(b.mul(lb, T.i64(w)), len_in))
            z = [self.vload(b, src, b.add(b.add(first, b.mul(T.i64(v), len_in)),
                                          b.mul(jb, T.i64(w)))) for v in range(w)]
            re, im = (self.transpose(b, [c[part] for c in z]) for part in (0, 1))
            for j in range(w):
                at = b.add(b.mul(b.add(b.mul(jb, T.i64(w)), T.i64(j)), lanes),
                           b.mul(lb, T.i64(w)))
                put(b, at, (re[j], im[j]))
        self.over_blocks(b, wide, columns, rows, "ldb")

    def scatter_blocks(self, b, result, dst, base, out_row, out_stride, wide):
        """`scatter` for a whole group of complex lines, untwisted, by vectors (the inverse
        of `gather_blocks`): rows are transposed back in registers."""
        w, lanes = self.width, self.lanes
        vector = ir.VectorType(self.part, w)

        def value(b, z):
            im = b.select(self.inverse, b.fneg(z[1]), z[1])
            scale = self.splat(b, self.scale, vector)
            return b.fmul(z[0], scale), b.fmul(im, scale)

        def columns(b, k, lb):
            z = self.bload(b, result, b.add(b.mul(k, lanes), b.mul(lb, T.i64(w))), vector)
            self.vstore(b, dst, b.add(b.add(base, b.mul(k, out_stride)), b.mul(lb, T.i64(w))),
                        value(b, z))

        def rows(b, kb, lb):
            z = [self.bload(b, result, b.add(b.mul(b.add(b.mul(kb, T.i64(w)), T.i64(j)),
                                                   lanes), b.mul(lb, T.i64(w))), vector)
                 for j in range(w)]
            re, im = (self.transpose(b, [c[part] for c in z]) for part in (0, 1))
            first = b.add(base, b.mul(b.mul(lb, T.i64(w)), out_row))
            for v in range(w):
                self.vstore(b, dst, b.add(b.add(first, b.mul(T.i64(v), out_row)),
                                          b.mul(kb, T.i64(w))), value(b, (re[v], im[v])))
        self.over_blocks(b, wide, columns, rows, "stb")

    def twist(self, b, z, k, j):
        """z W_N^(k j), N = twist = L inner (k < L, j < inner): W_N^e for e = e_hi inner
        + e_lo is W_L^e_hi (the table) times W_N^e_lo (the fine table)."""
        e = b.mul(k, j)
        inner = self.args[3]
        shift = intrinsic(b, "cttz", [inner, ir.Constant(T.I1, 1)])
        w = self.mul(b, self.load(b, self.table, b.lshr(e, shift)),
                     self.load(b, self.fine, b.and_(e, b.sub(inner, T.i64(1)))))
        return self.mul(b, z, w)

    def emit_fine_table(self, b):
        """fine[e] = exp(-2 pi i e / twist), e < inner, in double, then rounded."""
        step = b.fdiv(ir.Constant(F64, -2 * math.pi), b.uitofp(self.args[14], F64))

        counted_loop(b, self.args[3], lambda b, e, _: self.store(
            b, self.fine, e, self.unit(b, b.fmul(b.uitofp(e, F64), step))) or [], name="fine")

    def unit(self, b, angle):
        """(cos, sin) of the double `angle` (mathlib's), rounded to the dtype's parts."""
        z = [mathlib.emit(b, f, [angle], F64) for f in ("cos", "sin")]
        return [b.fptrunc(v, self.part) for v in z] if self.part != F64 else z

    # ------------------------------------------------------------------ transforms
    def transform(self, b, lanes):
        """Transform the `lanes` interleaved lines of A; the buffer (A or B) that holds the
        result, interleaved the same way."""
        slot = externs.stack_slot(b, self.a)
        self.branch_on(b, [(self.pow2, lambda b: b.store(self.stockham(b, lanes), slot)),
                           (None, lambda b: b.store(self.bluestein(b, lanes), slot))])
        return b.load(slot, typ=T.PTR)

    def bluestein_setup(self, b):
        """chirp[j] = exp(-pi i j^2 / n) (j^2 reduced mod 2n, exactly, then `unit_tables`,
        held in B until the transform), and filter = the length-m transform of conj(chirp)
        laid out circularly, zeros between."""
        n, m = self.n, self.length
        two_n = b.add(n, n)
        chirp = self.unit_tables(b, self.b, two_n,
                                 b.fdiv(ir.Constant(F64, -math.pi), b.sitofp(n, F64)))
        zero = ir.Constant(self.part, 0.0)
        counted_loop(b, m, lambda b, j, _: self.bstore(b, self.a, j, (zero, zero)) or [],
                     name="bz")

        def entry(b, j, _):
            z = chirp(b, b.urem(b.mul(j, j), two_n))
            self.store(b, self.chirp, j, z)
            self.bstore(b, self.a, j, self.conj(b, z))
            self.bstore(b, self.a, b.urem(b.sub(m, j), m), self.conj(b, z))
            return []
        counted_loop(b, n, entry, name="chirp")
        result = self.stockham(b, T.i64(1))
        counted_loop(b, m, lambda b, k, _: self.store(
            b, self.filter, k, self.bload(b, result, k)) or [], name="filt")

    def bluestein(self, b, lanes):
        """X[k] = chirp[k] sum_j (x[j] chirp[j]) conj(chirp[k - j]): a circular convolution
        of length m, by two transforms of length m (the inverse one as conj(fft(conj))), on
        every lane."""
        n, m = self.n, self.length
        zero = ir.Constant(self.part, 0.0)

        def weigh(b, j, _):
            inside = b.icmp_signed("<", j, n)
            c = self.load(b, self.chirp, b.select(inside, j, T.i64(0)))

            def lane(b, _, index):
                x = self.mul(b, self.bload(b, self.a, index), c)
                self.bstore(b, self.a, index, (b.select(inside, x[0], zero),
                                              b.select(inside, x[1], zero)))
            self.lanes_loop(b, lanes, j, lane, "bwv")
            return []
        counted_loop(b, m, weigh, name="bw")
        first = self.stockham(b, lanes)

        def product(b, k, _):
            f = self.load(b, self.filter, k)
            self.lanes_loop(b, lanes, k, lambda b, _, index: self.bstore(
                b, self.a, index, self.conj(b, self.mul(b, self.bload(b, first, index), f))),
                "bpv")
            return []
        counted_loop(b, m, product, name="bp")
        second = self.stockham(b, lanes)
        inv_m = b.fdiv(ir.Constant(self.part, 1.0), b.uitofp(m, self.part))

        def finish(b, k, _):
            c = self.load(b, self.chirp, k)

            def lane(b, _, index):
                y = self.mul(b, self.conj(b, self.bload(b, second, index)), c)
                self.bstore(b, second, index, (b.fmul(y[0], inv_m), b.fmul(y[1], inv_m)))
            self.lanes_loop(b, lanes, k, lane, "bfv")
            return []
        counted_loop(b, n, finish, name="bf")
        return second

    def stockham(self, b, lanes):
        """Transform the `lanes` interleaved lines of A (length L each): radix-4 passes then
        at most one radix-2 pass; the buffer (A or B) holding the result. Lane v of a pass
        with stride s is the element q = v + lanes q' of a pass with stride lanes s."""
        n = self.length
        log2 = intrinsic(b, "cttz", [n, ir.Constant(T.I1, 0)])
        passes4 = b.lshr(log2, T.i64(1))

        def radix4(b, _, carried):
            s, x, y = carried
            m = b.udiv(n, b.shl(s, T.i64(2)))
            wide = b.mul(s, lanes)
            self.branch_on(b, [(b.icmp_unsigned("==", wide, T.i64(1)),
                                lambda b: self.pass4_first(b, x, y, m)),
                               (None, lambda b: self.pass4(b, x, y, wide, m, s))])
            return [b.shl(s, T.i64(2)), y, x]
        s, x, y = counted_loop(b, passes4, radix4, [T.i64(1), self.a, self.b], name="pass")
        s = b.mul(s, lanes)
        odd = b.icmp_unsigned("==", b.and_(log2, T.i64(1)), T.i64(1))
        slot = externs.stack_slot(b, x)

        def radix2(b):
            def q_loop(b, q, _):
                u = self.bload(b, x, q)
                v = self.bload(b, x, b.add(q, s))
                self.bstore(b, y, q, self.add(b, u, v))
                self.bstore(b, y, b.add(q, s), self.sub(b, u, v))
                return []
            counted_loop(b, s, q_loop, name="r2")
            b.store(y, slot)
        self.branch_on(b, [(odd, radix2), (None, lambda b: None)])
        return b.load(slot, typ=T.PTR)

    def butterfly(self, b, x, y, s, m, p, q, twiddles, typ=None):
        sp = b.mul(s, p)
        sm = b.mul(s, m)
        i0 = b.add(q, sp)
        a, bb, c, d = (self.bload(b, x, b.add(i0, b.mul(sm, T.i64(j))), typ)
                       for j in range(4))
        apc, amc = self.add(b, a, c), self.sub(b, a, c)
        bpd, jbmd = self.add(b, bb, d), self.times_i(b, self.sub(b, bb, d))
        o0 = b.add(q, b.shl(sp, T.i64(2)))
        w1, w2, w3 = twiddles
        self.bstore(b, y, o0, self.add(b, apc, bpd))
        self.bstore(b, y, b.add(o0, s), self.mul(b, w1, self.sub(b, amc, jbmd)))
        self.bstore(b, y, b.add(o0, b.mul(s, T.i64(2))), self.mul(b, w2, self.sub(b, apc, bpd)))
        self.bstore(b, y, b.add(o0, b.mul(s, T.i64(3))), self.mul(b, w3, self.add(b, amc, jbmd)))

    def twiddles(self, b, ps):
        return [self.load(b, self.table, b.mul(ps, T.i64(j))) for j in (1, 2, 3)]

    def pass4_first(self, b, x, y, m):
        one = T.i64(1)

        def p_loop(b, p, _):
            self.butterfly(b, x, y, one, m, p, T.i64(0), self.twiddles(b, p))
            return []
        counted_loop(b, m, p_loop, name="p1")

    def pass4(self, b, x, y, wide, m, s):
        """A pass over `lanes` lines: stride `wide` = lanes s in the buffers, twiddles of
        stride s; a call of `emit_pass`'s function."""
        b.call(self.pass_fn, [x, y, self.table, wide, m, s, self.plane])

    def emit_pass(self):
        """The function of `pass4`, whose buffers are `noalias` arguments (they are distinct),
        so that its loops vectorise without checks for overlap."""
        b = ir.IRBuilder(self.pass_fn.append_basic_block("entry"))
        x, y, self.table, wide, m, s, self.plane = self.pass_fn.args
        width = self.width = VECTOR_BYTES // self.part_bytes
        vector = ir.VectorType(self.part, width)

        def scalar(b, p, w):
            counted_loop(b, wide, lambda b, q, _: self.butterfly(
                b, x, y, wide, m, p, q, w) or [], name="q")

        def vectors(b, p, w):
            w = [tuple(self.splat(b, part, vector) for part in z) for z in w]
            counted_loop(b, b.udiv(wide, T.i64(width)), lambda b, q, _: self.butterfly(
                b, x, y, wide, m, p, b.mul(q, T.i64(width)), w, vector) or [], name="qv")

        whole = b.icmp_unsigned("==", b.urem(wide, T.i64(width)), T.i64(0))

        def p_loop(b, p, _):
            w = self.twiddles(b, b.mul(p, s))
            self.branch_on(b, [(whole, lambda b: vectors(b, p, w)),
                               (None, lambda b: scalar(b, p, w))])
            return []
        counted_loop(b, m, p_loop, name="p")
        b.ret_void()

    @staticmethod
    def splat(b, value, vector):
        """`value` in every element of a `vector`."""
        one = b.insert_element(ir.Constant(ir.VectorType(value.type, 1), ir.Undefined), value,
                               T.i64(0))
        return b.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32),
                                                                    vector.count), 0))
