"""The runtime library's FFT kernels: `kiln_fft_complex64` and `kiln_fft_complex128`.

    kiln_fft_<dtype>(in, out, outer, inner, n, len_in, len_out, mode, scale, work)

transforms every line of a row-major array [outer, len_in, inner] (`in`) along its middle
axis into the lines of [outer, len_out, inner] (`out`; it may be `in`): the line (o, i)
starts at element o * len * inner + i and its elements are `inner` apart. `mode` is one of
MODES: a complex transform, forward or inverse (len_in = len_out = n); a real line of n
(`in` holds float32/float64) to its first n // 2 + 1 coefficients (NumPy's rfft); or the
first n // 2 + 1 coefficients of a Hermitian line to its n real values (irfft: the rest of
the line is the conjugate mirror of the first half, and the imaginary parts of the zero
(and the n / 2) coefficient are ignored, as NumPy does; coefficients past len_in are zeros,
those past n // 2 unused: NumPy's padding and cropping). Results are multiplied by `scale`.
`work` holds 3 n complex numbers for a power of two n, 4 m + n otherwise (m below):
two line buffers A and B of length L (n, or m), the twiddle table, and for Bluestein's
algorithm the chirp and the transformed filter.

Each line is gathered into A (converted to complex, mirrored, and conjugated for an inverse
transform: ifft(x) = conj(fft(conj(x))), so only the forward transform exists), transformed,
and scattered from whichever buffer holds the result (conjugated back, scaled, the real part
for irfft). The transform:
- n a power of two: the Stockham autosort algorithm (no bit reversal; each pass reads one
  buffer and writes the other), radix 4 with one radix-2 pass last when log2(n) is odd. A
  pass with stride s (1, 4, 16, ...) over sub-transforms of length L = n / s, m = L / 4:
      for p < m, q < s:  a, b, c, d = x[q + s (p + j m)]  (j = 0..3)
        y[q + s 4p]       = (a + c) + (b + d)
        y[q + s (4p + 1)] = w^p    ((a - c) - i (b - d))
        y[q + s (4p + 2)] = w^2p   ((a + c) - (b + d))
        y[q + s (4p + 3)] = w^3p   ((a - c) + i (b - d))        w = exp(-2 pi i / L)
  where w^(j p) = W^(j p s) is read from the table W^k = exp(-2 pi i k / n), k < 3n/4.
  The first pass (s = 1) runs one loop over p; the others loop over p, then q (contiguous);
- any other n: Bluestein's algorithm. With the chirp c[j] = exp(-pi i j^2 / n),
  X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]), a circular convolution of length m (the
  power of two >= 2n - 1), computed by the Stockham transform of length m: forward, times
  the transformed filter conj(c), inverse. The chirp and filter are computed once per call.
The table is computed on entry, in double (mathlib's sin and cos), then rounded: O(L) per
call (L / 8 sines and cosines and exact symmetries), beside the O(outer inner L log L) of
the transform.
"""
import math

import llvmlite.ir as ir
import numpy as np

from . import externs, mathlib
from . import ltypes as T
from .calls import intrinsic
from .loops import counted_loop

F64 = ir.DoubleType()
DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))
NAMES = {dtype: f"kiln_fft_{dtype.name}" for dtype in DTYPES}
# mode -> (input is real, output is real, inverse)
MODES = {"forward": 0, "inverse": 1, "real_forward": 2, "real_inverse": 3}
FUNCTION_TYPE = ir.FunctionType(T.VOID, [T.PTR, T.PTR, T.I64, T.I64, T.I64, T.I64, T.I64,
                                         T.I64, F64, T.PTR])


def emit_call(builder, dtype, src, dst, outer, inner, n, len_in, len_out, mode, scale, work):
    """Call the runtime library's kernel for complex `dtype` (see the module docstring)."""
    args = [src, dst, T.i64(outer), T.i64(inner), T.i64(n), T.i64(len_in), T.i64(len_out),
            T.i64(MODES[mode]), ir.Constant(F64, float(scale)), work]
    externs.call(builder, NAMES[np.dtype(dtype)], FUNCTION_TYPE, args)


def work_bytes(dtype, n):
    """Bytes of `work` for transforms of length n."""
    size = np.dtype(dtype).itemsize
    if n & (n - 1) == 0:
        return 3 * n * size
    return (4 * bluestein_length(n) + n) * size


def bluestein_length(n):
    """The power of two Bluestein's convolution of a length-n transform has: >= 2n - 1."""
    return 1 << (2 * n - 2).bit_length()


def emit(module):
    """Define `kiln_fft_complex64` and `kiln_fft_complex128` (external) in `module`."""
    for dtype, name in NAMES.items():
        _Kernel(ir.Function(module, FUNCTION_TYPE, name), dtype).emit()


class _Kernel:
    def __init__(self, fn, dtype):
        self.fn = fn
        self.part = T.reg_type(np.dtype(dtype.char.lower()))

    # ------------------------------------------------------------------ complex values
    def at(self, b, base, index):
        """Pointer to the real part of complex element `index` of `base`."""
        return b.gep(base, [b.shl(index, T.i64(1))], inbounds=True, source_etype=self.part)

    def load(self, b, base, index):
        p = self.at(b, base, index)
        q = b.gep(p, [T.i64(1)], inbounds=True, source_etype=self.part)
        return b.load(p, typ=self.part), b.load(q, typ=self.part)

    def store(self, b, base, index, z):
        p = self.at(b, base, index)
        b.store(z[0], p)
        b.store(z[1], b.gep(p, [T.i64(1)], inbounds=True, source_etype=self.part))

    def real(self, b, base, index):
        return b.load(b.gep(base, [index], inbounds=True, source_etype=self.part), typ=self.part)

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

    # ------------------------------------------------------------------ the function
    def emit(self):
        fn = self.fn
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        src, dst, outer, inner, n, len_in, len_out, mode, scale, work = fn.args
        self.n = n
        self.pow2 = b.icmp_unsigned("==", b.and_(n, b.sub(n, T.i64(1))), T.i64(0))
        # Bluestein's length: the power of two m >= 2n - 1 (for n >= 3)
        m = b.shl(T.i64(1), b.sub(T.i64(64), intrinsic(
            b, "ctlz", [b.sub(b.add(n, n), T.i64(2)), ir.Constant(T.I1, 0)])))
        self.length = length = b.select(self.pow2, n, m)
        self.a = work
        self.b = self.at(b, work, length)
        self.table = self.at(b, work, b.add(length, length))
        self.chirp = self.at(b, work, b.mul(length, T.i64(3)))
        self.filter = self.at(b, self.chirp, n)
        self.scale = b.fptrunc(scale, self.part) if self.part != F64 else scale
        self.inverse = b.icmp_unsigned("==", b.and_(mode, T.i64(1)), T.i64(1))
        self.emit_table(b)
        self.branch_on(b, [(self.pow2, lambda b: None), (None, self.bluestein_setup)])

        def line(b, o, _):
            def column(b, i, _):
                base_in = b.add(b.mul(b.mul(o, len_in), inner), i)
                base_out = b.add(b.mul(b.mul(o, len_out), inner), i)
                self.gather(b, src, base_in, inner, mode, len_in)
                result = self.transform(b)
                self.scatter(b, result, dst, base_out, inner, len_out, mode)
                return []
            counted_loop(b, inner, column, name="col")
            return []
        counted_loop(b, outer, line, name="line")
        b.ret_void()

    def emit_table(self, b):
        """table[k] = exp(-2 pi i k / L), k < 3L/4, L the power of two the Stockham passes
        transform (n, or Bluestein's m). For L >= 8 only k <= L/8 are computed; the rest
        follow by symmetry, exactly:
        W^(L/4 - k) = (sin, -cos) of k's angle, W^(k + L/4) = -i W^k, W^(k + L/2) = -W^k."""
        n = self.length
        step = b.fdiv(ir.Constant(F64, -2 * math.pi), b.sitofp(n, F64))

        def cos_sin(b, k):
            angle = b.fmul(b.sitofp(k, F64), step)
            z = [mathlib.emit(b, f, [angle], F64) for f in ("cos", "sin")]
            return [b.fptrunc(v, self.part) for v in z] if self.part != F64 else z

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
                return []
            counted_loop(b, quarter, rotate, name="tw4")

        self.branch_on(b, [(b.icmp_unsigned(">=", n, T.i64(8)), symmetric),
                           (None, lambda b: every(b, b.lshr(b.mul(n, T.i64(3)), T.i64(2))))])

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

    def gather(self, b, src, base, stride, mode, len_in):
        """A = the line at `base` as complex numbers (mirrored for irfft, whose coefficients
        past `len_in` are zeros), conjugated for an inverse transform."""
        n = self.n

        def finish(b, j, z):
            z = (z[0], b.select(self.inverse, b.fneg(z[1]), z[1]))
            self.store(b, self.a, j, z)

        def complex_line(b):
            counted_loop(b, n, lambda b, j, _: finish(
                b, j, self.load(b, src, b.add(base, b.mul(j, stride)))) or [], name="ld")

        def real_line(b):
            zero = ir.Constant(self.part, 0.0)
            counted_loop(b, n, lambda b, j, _: finish(
                b, j, (self.real(b, src, b.add(base, b.mul(j, stride))), zero)) or [],
                name="ldr")

        def hermitian_line(b):
            half = b.add(b.lshr(n, T.i64(1)), T.i64(1))

            def element(b, j, _):
                mirror = b.icmp_signed(">=", j, half)
                k = b.select(mirror, b.sub(n, j), j)
                present = b.icmp_signed("<", k, len_in)
                k = b.select(present, k, T.i64(0))
                re, im = self.load(b, src, b.add(base, b.mul(k, stride)))
                zero = ir.Constant(self.part, 0.0)
                re, im = b.select(present, re, zero), b.select(present, im, zero)
                finish(b, j, (re, b.select(mirror, b.fneg(im), im)))
                return []
            counted_loop(b, n, element, name="ldh")

        self.branch_on(b, [(b.icmp_unsigned("==", mode, T.i64(MODES["real_forward"])), real_line),
                           (b.icmp_unsigned("==", mode, T.i64(MODES["real_inverse"])),
                            hermitian_line),
                           (None, complex_line)])

    def scatter(self, b, result, dst, base, stride, count, mode):
        def value(b, k):
            re, im = self.load(b, result, k)
            im = b.select(self.inverse, b.fneg(im), im)
            return b.fmul(re, self.scale), b.fmul(im, self.scale)

        def complex_line(b):
            counted_loop(b, count, lambda b, k, _: self.store(
                b, dst, b.add(base, b.mul(k, stride)), value(b, k)) or [], name="st")

        def real_line(b):
            def element(b, k, _):
                p = b.gep(dst, [b.add(base, b.mul(k, stride))], inbounds=True,
                          source_etype=self.part)
                b.store(value(b, k)[0], p)
                return []
            counted_loop(b, count, element, name="str")

        self.branch_on(b, [(b.icmp_unsigned("==", mode, T.i64(MODES["real_inverse"])),
                            real_line), (None, complex_line)])

    # ------------------------------------------------------------------ transforms
    def transform(self, b):
        """Transform A (its first n elements); the buffer (A or B) that holds the result."""
        slot = externs.stack_slot(b, self.a)
        self.branch_on(b, [(self.pow2, lambda b: b.store(self.stockham(b), slot)),
                           (None, lambda b: b.store(self.bluestein(b), slot))])
        return b.load(slot, typ=T.PTR)

    def bluestein_setup(self, b):
        """chirp[j] = exp(-pi i j^2 / n) (j^2 reduced mod 2n, exactly, before the angle), and
        filter = the length-m transform of conj(chirp) laid out circularly, zeros between."""
        n, m = self.n, self.length
        step = b.fdiv(ir.Constant(F64, -math.pi), b.sitofp(n, F64))
        zero = ir.Constant(self.part, 0.0)
        counted_loop(b, m, lambda b, j, _: self.store(b, self.a, j, (zero, zero)) or [],
                     name="bz")

        def entry(b, j, _):
            angle = b.fmul(b.sitofp(b.urem(b.mul(j, j), b.add(n, n)), F64), step)
            z = [mathlib.emit(b, f, [angle], F64) for f in ("cos", "sin")]
            z = [b.fptrunc(v, self.part) for v in z] if self.part != F64 else z
            self.store(b, self.chirp, j, z)
            self.store(b, self.a, j, self.conj(b, z))
            self.store(b, self.a, b.urem(b.sub(m, j), m), self.conj(b, z))
            return []
        counted_loop(b, n, entry, name="chirp")
        result = self.stockham(b)
        counted_loop(b, m, lambda b, k, _: self.store(
            b, self.filter, k, self.load(b, result, k)) or [], name="filt")

    def bluestein(self, b):
        """X[k] = chirp[k] sum_j (x[j] chirp[j]) conj(chirp[k - j]): a circular convolution
        of length m, by two transforms of length m (the inverse one as conj(fft(conj)))."""
        n, m = self.n, self.length
        zero = ir.Constant(self.part, 0.0)

        def weigh(b, j, _):
            inside = b.icmp_signed("<", j, n)
            jj = b.select(inside, j, T.i64(0))
            x = self.mul(b, self.load(b, self.a, jj), self.load(b, self.chirp, jj))
            self.store(b, self.a, j, (b.select(inside, x[0], zero),
                                      b.select(inside, x[1], zero)))
            return []
        counted_loop(b, m, weigh, name="bw")
        first = self.stockham(b)

        def product(b, k, _):
            self.store(b, self.a, k, self.conj(b, self.mul(b, self.load(b, first, k),
                                                          self.load(b, self.filter, k))))
            return []
        counted_loop(b, m, product, name="bp")
        second = self.stockham(b)
        inv_m = b.fdiv(ir.Constant(self.part, 1.0), b.uitofp(m, self.part))

        def finish(b, k, _):
            y = self.conj(b, self.load(b, second, k))
            y = self.mul(b, y, self.load(b, self.chirp, k))
            self.store(b, second, k, (b.fmul(y[0], inv_m), b.fmul(y[1], inv_m)))
            return []
        counted_loop(b, n, finish, name="bf")
        return second

    def stockham(self, b):
        """Transform A (length L): radix-4 passes then at most one radix-2 pass; the buffer
        (A or B) holding the result."""
        n = self.length
        log2 = intrinsic(b, "cttz", [n, ir.Constant(T.I1, 0)])
        passes4 = b.lshr(log2, T.i64(1))

        def radix4(b, _, carried):
            s, x, y = carried
            m = b.udiv(n, b.shl(s, T.i64(2)))
            self.branch_on(b, [(b.icmp_unsigned("==", s, T.i64(1)),
                                lambda b: self.pass4_first(b, x, y, m)),
                               (None, lambda b: self.pass4(b, x, y, s, m))])
            return [b.shl(s, T.i64(2)), y, x]
        s, x, y = counted_loop(b, passes4, radix4, [T.i64(1), self.a, self.b], name="pass")
        odd = b.icmp_unsigned("==", b.and_(log2, T.i64(1)), T.i64(1))
        slot = externs.stack_slot(b, x)

        def radix2(b):
            def q_loop(b, q, _):
                u = self.load(b, x, q)
                v = self.load(b, x, b.add(q, s))
                self.store(b, y, q, self.add(b, u, v))
                self.store(b, y, b.add(q, s), self.sub(b, u, v))
                return []
            counted_loop(b, s, q_loop, name="r2")
            b.store(y, slot)
        self.branch_on(b, [(odd, radix2), (None, lambda b: None)])
        return b.load(slot, typ=T.PTR)

    def butterfly(self, b, x, y, s, m, p, q, twiddles):
        sp = b.mul(s, p)
        sm = b.mul(s, m)
        i0 = b.add(q, sp)
        a, bb, c, d = (self.load(b, x, b.add(i0, b.mul(sm, T.i64(j)))) for j in range(4))
        apc, amc = self.add(b, a, c), self.sub(b, a, c)
        bpd, jbmd = self.add(b, bb, d), self.times_i(b, self.sub(b, bb, d))
        o0 = b.add(q, b.shl(sp, T.i64(2)))
        w1, w2, w3 = twiddles
        self.store(b, y, o0, self.add(b, apc, bpd))
        self.store(b, y, b.add(o0, s), self.mul(b, w1, self.sub(b, amc, jbmd)))
        self.store(b, y, b.add(o0, b.mul(s, T.i64(2))), self.mul(b, w2, self.sub(b, apc, bpd)))
        self.store(b, y, b.add(o0, b.mul(s, T.i64(3))), self.mul(b, w3, self.add(b, amc, jbmd)))

    def twiddles(self, b, ps):
        return [self.load(b, self.table, b.mul(ps, T.i64(j))) for j in (1, 2, 3)]

    def pass4_first(self, b, x, y, m):
        one = T.i64(1)

        def p_loop(b, p, _):
            self.butterfly(b, x, y, one, m, p, T.i64(0), self.twiddles(b, p))
            return []
        counted_loop(b, m, p_loop, name="p1")

    def pass4(self, b, x, y, s, m):
        def p_loop(b, p, _):
            w = self.twiddles(b, b.mul(p, s))

            def q_loop(b, q, _):
                self.butterfly(b, x, y, s, m, p, q, w)
                return []
            counted_loop(b, s, q_loop, name="q")
            return []
        counted_loop(b, m, p_loop, name="p")
