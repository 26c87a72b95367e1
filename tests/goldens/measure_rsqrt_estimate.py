"""Measure the host CPU's `vrsqrtps` estimate, which seeds XLA's float32 reciprocal square root.

XLA's CPU compiler computes `rsqrt(x)` for a positive normal float32 x as two Newton steps,
`y <- fma(y * -0.5, fma(x * y, y, -1), y)`, from the 12-bit hardware estimate of
`vrsqrtps` (`llvm.x86.avx.rsqrt.ps.256`). `kiln.random` reproduces that (its `_rsqrt`), so it
needs the estimate: this script runs the instruction through llvmlite on every float32 in
[1, 4), checks that the result depends only on the exponent's parity and the top 10 mantissa
bits (and scales by 2**-k when x scales by 4**k), and prints the table in the form
`runtime/random.py` stores (`_RSQRT_ESTIMATE`). Run it with kiln's interpreter on an x86-64
CPU with AVX:

    .venv/bin/python tests/goldens/measure_rsqrt_estimate.py

The table recorded in kiln was measured on an Intel Xeon; AMD processors have other estimates
(and JAX gives other bits there).
"""
import ctypes

import llvmlite.binding as llvm
import numpy as np

IR = r"""
declare <8 x float> @llvm.x86.avx.rsqrt.ps.256(<8 x float>)
define void @estimate(ptr %x, ptr %y, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, ptr %x, i64 %i
  %v = load <8 x float>, ptr %px, align 4
  %r = call <8 x float> @llvm.x86.avx.rsqrt.ps.256(<8 x float> %v)
  %py = getelementptr float, ptr %y, i64 %i
  store <8 x float> %r, ptr %py, align 4
  %next = add i64 %i, 8
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""


def hardware_estimate():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(IR), machine)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("estimate"))

    def estimate(x):
        x = np.concatenate([np.asarray(x, np.float32), np.ones(-len(x) % 8, np.float32)])
        y = np.empty_like(x)
        run(x.ctypes.data, y.ctypes.data, len(x))
        return y[:len(x)].view(np.uint32)
    estimate.engine = engine  # keeps the code alive
    return estimate


def table(estimate):
    """12-bit mantissas of the estimates (all in [0.5, 1)), for parity p = (e - 127) % 2 and
    the top 10 mantissa bits of x, checked on every float32 in [1, 4) and sampled others."""
    mantissas = np.arange(2**23, dtype=np.uint32)
    out = []
    for p in (0, 1):
        y = estimate(((np.uint32(127 + p) << 23) | mantissas).view(np.float32))
        assert (y & 0x7FF == 0).all() and (y >> 23 == 126).all()
        top = y[::2**13]
        assert (y == np.repeat(top, 2**13)).all(), "not a function of the top 10 bits"
        out.append((top >> 11) & 0xFFF)
    sample = np.random.default_rng(0).integers(0, 2**23, 4096, dtype=np.uint32)
    for e in range(1, 255):
        p = (e - 127) % 2
        base = (0x3F000000 | (out[p][sample >> 13] << 11)).astype(np.int64)
        want = base - ((e - 127 - p) // 2 << 23)
        got = estimate(((np.uint32(e) << 23) | sample).view(np.float32))
        assert (got == want).all(), f"exponent {e} does not scale"
    return np.concatenate(out)


def encode(values):
    """The first value of each parity, then each step down as a digit."""
    parts = []
    for half in (values[:1024], values[1024:]):
        steps = -np.diff(half)
        assert ((steps >= 0) & (steps <= 9)).all()
        parts.append(f"{half[0]}:" + "".join(map(str, steps)))
    return parts


if __name__ == "__main__":
    for part in encode(table(hardware_estimate())):
        print(repr(part))
