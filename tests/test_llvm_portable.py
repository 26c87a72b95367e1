"""Portable native code: the runtime library's compiler-rt builtins, the check for unresolved
symbols, and `KILN_CPU`.

Every float16 conversion is forced through compiled code, on the host CPU and on the baseline
targets (x86-64-v2 has no F16C, so every float16 operation calls a builtin there; x86-64-v3 is
an AVX2 machine such as Zen 1), and its result bits are compared with NumPy's for all 65536
float16 patterns and for float32/float64 values at every rounding boundary (halfway cases and
their neighbours, subnormals, overflow, NaNs), plus hypothesis's. NaNs are not compared with
NumPy (NumPy keeps a signalling NaN's payload without quieting it, the hardware quiets it): a
NaN must stay a NaN of the same sign, with the payload bits below the quiet bit that
compiler-rt's rule gives (the top bits when narrowing, all of them when widening), and the
builtins called directly must match compiler-rt's rule bit for bit, quiet bit included.
"""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln._random
from kiln.compiler.backends.llvm import builtins, executable, object_symbols, rtlib, target
from kiln.compiler.errors import CompileError
from kiln.compiler.ir.parser import from_source

TARGETS = ("native", "x86-64-v2", "x86-64-v3")
BITS = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
SIGNIFICAND = {np.float16: 10, np.float32: 23, np.float64: 52}
SETTINGS = settings(max_examples=25, deadline=None)


# ------------------------------------------------------------------------------ values

def all_halves():
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def boundaries(dtype):
    """`dtype` (float32/float64) values at every float16 rounding boundary: each float16 value,
    the halfway point above it, and the neighbours of both in `dtype`; subnormals of `dtype`,
    the overflow threshold's neighbourhood, infinities and NaNs with assorted payloads."""
    bits = BITS[dtype]
    halves = all_halves()
    finite = halves[np.isfinite(halves)].astype(np.float64)
    finite = np.unique(finite)
    # the exact midpoints of consecutive float16 values, and of the largest and 2**16 (overflow)
    upper = np.append(finite[1:], 65536.0)
    midpoints = (finite + upper) / 2   # exact in float32 and float64
    centres = np.concatenate([finite, midpoints]).astype(dtype)
    up = (centres.view(bits) + 1).view(dtype)
    down = (centres.view(bits) - 1).view(dtype)
    tiny = np.array([1, 2, 3, (1 << SIGNIFICAND[dtype]) - 1, 1 << SIGNIFICAND[dtype]],
                    bits).view(dtype)
    exponent_bits = 8 * np.dtype(dtype).itemsize - 1 - SIGNIFICAND[dtype]
    infinity = ((1 << exponent_bits) - 1) << SIGNIFICAND[dtype]
    quiet = 1 << (SIGNIFICAND[dtype] - 1)
    nans = np.array([infinity | 1, infinity | quiet, infinity | quiet | 1,
                     infinity | (1 << (SIGNIFICAND[dtype] - 2)), infinity | (quiet - 1),
                     infinity | (2 * quiet - 1)], bits).view(dtype)
    special = np.array([np.inf, 65504, 65519.99, 65520, 1e30], dtype)
    values = np.concatenate([centres, up, down, tiny, nans, special])
    return np.concatenate([values, -values])


def expected_bits(x, dtype, quiet_agnostic=False):
    """The bits of `x` converted to `dtype`: NumPy's for numbers; for NaNs compiler-rt's rule
    (the sign, the quiet bit set when narrowing and kept when widening, the payload's top bits
    or all of them). `quiet_agnostic`: the quiet bit of NaN results set in any case (the
    hardware's conversions quiet signalling NaNs)."""
    src, dst = x.dtype.type, np.dtype(dtype).type
    src_bits = x.view(BITS[src]).astype(np.uint64)
    with np.errstate(over="ignore", invalid="ignore"):
        dst_bits = x.astype(dst).view(BITS[dst]).astype(np.uint64)
    s, d = SIGNIFICAND[src], SIGNIFICAND[dst]
    width_src, width_dst = 8 * np.dtype(src).itemsize, 8 * np.dtype(dst).itemsize
    sign = (src_bits >> np.uint64(width_src - 1)) << np.uint64(width_dst - 1)
    dst_inf = np.uint64(((1 << (width_dst - 1 - d)) - 1) << d)
    dst_quiet = np.uint64(1 << (d - 1))
    if d < s:
        payload = (src_bits & np.uint64((1 << (s - 1)) - 1)) >> np.uint64(s - d)
        nan = sign | dst_inf | dst_quiet | payload
    else:
        nan = sign | dst_inf | ((src_bits & np.uint64((1 << s) - 1)) << np.uint64(d - s))
    if quiet_agnostic:
        nan |= dst_quiet
    return np.where(np.isnan(x), nan, dst_bits)


def assert_bits(got, x, dtype, quiet_agnostic=False):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype)
    bits = got.view(BITS[np.dtype(dtype).type]).astype(np.uint64)
    if quiet_agnostic:
        bits = np.where(np.isnan(x), bits | np.uint64(1 << (SIGNIFICAND[np.dtype(dtype).type] - 1)),
                        bits)
    want = expected_bits(x, dtype, quiet_agnostic)
    wrong = np.flatnonzero(bits != want)
    assert wrong.size == 0, (
        f"{wrong.size} wrong: {x[wrong[:5]].view(BITS[x.dtype.type])} -> "
        f"{bits[wrong[:5]]} (expected {want[wrong[:5]]})")


# ------------------------------------------------------------------ the builtins, directly

_ELEMENTS = {"i128": 16, "half": 2, "float": 4, "double": 8, "i32": 4}
_WRAPPERS = {}   # wrapper name (builtin and KILN_CPU) -> its ctypes function


def call_over_arrays(builtin, ret, params, *arrays):
    """`builtin` (LLVM signature `ret (params)`; a parameter "ptr" gets a pointer to the
    element of an i32 output array) applied elementwise to `arrays` (one per parameter, each
    of `n` elements: i128 values as (n, 2) uint64 arrays), by compiled code that calls it as
    LLVM's libcalls do, loaded into the JIT after the runtime library provided the builtins;
    the results (and the i32 outputs) as arrays."""
    name = f"kiln_test_{builtin}_{target.jit_cpu()[0]}"
    n = len(arrays[0])
    lines, args = [], []
    for k, param in enumerate(params):
        ty = "i32" if param == "ptr" else param
        lines += [f"  %o{k} = mul i64 %i, {_ELEMENTS[ty]}",
                  f"  %p{k} = getelementptr i8, ptr %a{k}, i64 %o{k}"]
        if param == "ptr":
            args.append(f"ptr %p{k}")
        else:
            lines.append(f"  %x{k} = load {ty}, ptr %p{k}, align 4")
            args.append(f"{ty} %x{k}")
    body = "".join(line + "\n" for line in lines)
    text = f"""
define void @"{name}"({", ".join(f"ptr %a{k}" for k in range(len(params)))}, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
{body}  %y = call {ret} @"{builtin}"({", ".join(args)})
  %oo = mul i64 %i, {_ELEMENTS[ret]}
  %q = getelementptr i8, ptr %out, i64 %oo
  store {ret} %y, ptr %q, align 4
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
declare {ret} @"{builtin}"({", ".join(params)})
"""
    if name not in _WRAPPERS:
        data = target.object_code(target.parse(text, name))
        rtlib.provide([data])
        loaded = target.load_object(name, data, entry=False)
        _WRAPPERS[name] = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(params) + 1),
                                           ctypes.c_int64)(loaded.function_address(name))
    out = np.zeros((n, 2), np.uint64) if ret == "i128" else np.zeros(n, _NUMPY_TYPE[ret])
    arrays = [np.ascontiguousarray(a) for a in arrays]
    _WRAPPERS[name](*[a.ctypes.data for a in arrays], out.ctypes.data, n)
    return out


_NUMPY_TYPE = {"half": np.float16, "float": np.float32, "double": np.float64}


def builtin_over_array(builtin, x):
    """`builtin` (a float16 conversion of builtins.NAMES) applied to each element of `x`."""
    src, dst = (builtins.TRUNCATIONS | builtins.EXTENSIONS)[builtin]
    src_type, dst_type = (str(fmt.float) for fmt in (src, dst))
    return call_over_arrays(builtin, dst_type, [src_type], x.astype(_NUMPY_TYPE[src_type]))


@pytest.fixture(params=TARGETS)
def cpu(request, monkeypatch):
    """KILN_CPU set to each target in turn."""
    monkeypatch.setenv("KILN_CPU", request.param)
    return request.param


@pytest.mark.parametrize("builtin", sorted(builtins.EXTENSIONS))
def test_widening_builtins_exact_on_every_half(builtin, cpu):
    x = all_halves()
    assert_bits(builtin_over_array(builtin, x), x,
                _NUMPY_TYPE[str(builtins.EXTENSIONS[builtin][1].float)])


@pytest.mark.parametrize("builtin", sorted(builtins.TRUNCATIONS))
def test_narrowing_builtins_round_once(builtin, cpu):
    source = _NUMPY_TYPE[str(builtins.TRUNCATIONS[builtin][0].float)]
    x = boundaries(source)
    assert_bits(builtin_over_array(builtin, x), x, np.float16)


@SETTINGS
@given(st.sampled_from(sorted(builtins.TRUNCATIONS)), st.data())
def test_narrowing_builtins_on_any_value(builtin, data):
    source = _NUMPY_TYPE[str(builtins.TRUNCATIONS[builtin][0].float)]
    x = data.draw(hnp.arrays(source, 64, elements=st.floats(width=np.finfo(source).bits)))
    assert_bits(builtin_over_array(builtin, x), x, np.float16)


def test_narrowing_builtins_do_not_round_twice():
    """A double just above a float16 halfway point that float rounds onto it: rounding through
    float would go to even, the correct rounding goes up."""
    halfway = np.float64(1 + 2 ** -11)          # between 1 and the next float16, 1 + 2**-10
    just_above = np.nextafter(halfway, 2)        # rounds to 1 + 2**-11 in float32
    assert np.float32(just_above) == halfway
    out = builtin_over_array("__truncdfhf2", np.array([just_above]))
    assert out[0] == np.float16(1 + 2 ** -10) == np.float16(just_above)


# ---------------------------------------------------- 128-bit integers and powi

_MASK = (1 << 64) - 1


def to_i128(values):
    return np.array([[v & _MASK, (v >> 64) & _MASK] for v in values], np.uint64).reshape(-1, 2)


def from_i128(array, signed):
    values = [int(lo) | (int(hi) << 64) for lo, hi in array]
    return [v - (1 << 128) if signed and v >> 127 else v for v in values]


def int128_values(signed):
    """Edge values (0, +-1, powers of two and their neighbours, the extremes) and
    pseudo-random ones of every width."""
    rng = np.random.default_rng(7)
    powers = [1 << k for k in range(0, 128)]
    values = {0, 1, 2, 3, (1 << 64) - 1, (1 << 127) - 1, (1 << 128) - 1}
    values |= {p + d for p in powers for d in (-1, 0, 1)}
    values |= {int(rng.integers(0, 1 << 62)) << int(rng.integers(0, 66)) |
               int(rng.integers(0, 1 << 62)) for _ in range(300)}
    values = sorted(v % (1 << 128) for v in values)
    return [v - (1 << 128) if signed and v >> 127 else v for v in values]


def pairs(values):
    rng = np.random.default_rng(11)
    a = [values[int(k)] for k in rng.integers(0, len(values), 1500)]
    b = [values[int(k)] for k in rng.integers(0, len(values), 1500)]
    return a + values, b + values[::-1]


def test_int128_division_and_remainder(cpu):
    for signed in (False, True):
        a, b = pairs(int128_values(signed))
        a, b = zip(*[(x, y) for x, y in zip(a, b) if y != 0])
        quotient = "__divti3" if signed else "__udivti3"
        remainder = "__modti3" if signed else "__umodti3"
        got_q = from_i128(call_over_arrays(quotient, "i128", ["i128", "i128"], to_i128(a),
                                           to_i128(b)), signed)
        got_r = from_i128(call_over_arrays(remainder, "i128", ["i128", "i128"], to_i128(a),
                                           to_i128(b)), signed)
        # C's division truncates towards zero; the remainder has the dividend's sign
        want_q = [abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a, b)]
        want_q = [q if -(1 << 127) <= q < (1 << 127) or not signed else q - (1 << 128)
                  for q in want_q]
        want_r = [x - y * q if signed else x % y for x, y, q in zip(a, b, want_q)]
        assert got_q == want_q
        assert got_r == want_r


def test_int128_multiply_with_overflow(cpu):
    a, b = pairs(int128_values(True))
    flags = np.full(len(a), 7, np.int32)
    got = from_i128(call_over_arrays("__muloti4", "i128", ["i128", "i128", "ptr"],
                                     to_i128(a), to_i128(b), flags), True)
    exact = [x * y for x, y in zip(a, b)]
    wrapped = [(p % (1 << 128)) - (1 << 128) if (p % (1 << 128)) >> 127 else p % (1 << 128)
               for p in exact]
    assert got == wrapped
    assert flags.tolist() == [int(not -(1 << 127) <= p < (1 << 127)) for p in exact]


def nearest_float(value, significand_bits):
    """`value` rounded to `significand_bits` significant bits, to nearest even."""
    magnitude = abs(value)
    extra = magnitude.bit_length() - significand_bits
    if extra > 0:
        q, r = divmod(magnitude, 1 << extra)
        half = 1 << (extra - 1)
        q += r > half or (r == half and q & 1)
        magnitude = q << extra
    return -magnitude if value < 0 else magnitude


@pytest.mark.parametrize("ret, bits, dtype", [("float", 24, np.float32),
                                              ("double", 53, np.float64)])
def test_int128_to_float_rounds_once(ret, bits, dtype, cpu):
    suffix = "sf" if ret == "float" else "df"
    for signed in (False, True):
        values = int128_values(signed)
        # halfway cases: a value between two floats, and its neighbours
        values += [((1 << 100) + (1 << (100 - bits))) + d for d in (-1, 0, 1)]
        values += [((1 << 70) + (3 << (70 - bits))) + d for d in (-1, 0, 1)]
        name = f"__float{'' if signed else 'un'}ti{suffix}"
        got = call_over_arrays(name, ret, ["i128"], to_i128(values))
        with np.errstate(over="ignore"):   # (2**128 is no float32: infinity)
            want = np.array([float(nearest_float(v, bits)) for v in values]).astype(dtype)
        np.testing.assert_array_equal(got.view(BITS[dtype]), want.view(BITS[dtype]))


@pytest.mark.parametrize("ret, dtype", [("float", np.float32), ("double", np.float64)])
def test_float_to_int128_truncates_and_saturates(ret, dtype, cpu):
    suffix = "sf" if ret == "float" else "df"
    rng = np.random.default_rng(3)
    with np.errstate(over="ignore"):   # (2**128 and beyond are infinities in float32)
        x = np.concatenate([boundaries(dtype)[:4000],
                            rng.standard_normal(2000) * 2.0 ** rng.integers(-10, 140, 2000),
                            [2.0 ** 127, -2.0 ** 127, 2.0 ** 128, -2.0 ** 128, 2.0 ** 126,
                             np.inf, -np.inf, np.nan, -np.nan, 0.5, -0.5, -1.0]]).astype(dtype)
    for signed in (False, True):
        name = f"__fix{'' if signed else 'uns'}{suffix}ti"
        got = from_i128(call_over_arrays(name, "i128", [ret], x), signed)
        want = []
        for value in x.tolist():
            negative = np.signbit(value)
            if np.isnan(value) or np.isinf(value) or abs(value) >= 2.0 ** 128:
                saturate = (-(1 << 127) if negative else (1 << 127) - 1) if signed else \
                    (0 if negative else (1 << 128) - 1)
                want.append(saturate)
            elif not signed and (negative or value <= -1):
                want.append(0)
            else:
                exact = int(value)   # truncates towards zero
                want.append((exact + (1 << 127)) % (1 << 128) - (1 << 127) if signed else exact)
        assert got == want


@pytest.mark.parametrize("name, ret, dtype", [("__powisf2", "float", np.float32),
                                             ("__powidf2", "double", np.float64)])
def test_powi_is_repeated_squaring(name, ret, dtype, cpu):
    rng = np.random.default_rng(5)
    base = np.concatenate([rng.standard_normal(500) * 3, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                         1.0, -1.0, 2.0, 0.5]]).astype(dtype)
    exponent = rng.integers(-70, 71, base.size).astype(np.int32)
    exponent[:6] = [0, 1, -1, np.iinfo(np.int32).min, np.iinfo(np.int32).max, 2]
    got = call_over_arrays(name, ret, [ret, "i32"], base, exponent)
    want = []
    with np.errstate(all="ignore"):
        for a, n in zip(base, exponent.tolist()):
            r, k, recip = dtype(1), n, n < 0     # compiler-rt's loop, in the same precision
            while True:
                if k & 1:
                    r = dtype(r * a)
                k = int(k / 2)
                if k == 0:
                    break
                a = dtype(a * a)
            want.append(dtype(1) / r if recip else r)
    np.testing.assert_array_equal(got.view(BITS[dtype]), np.array(want, dtype).view(BITS[dtype]))


# ------------------------------------------------------------ conversions under kiln.jit

def jit_astype(dtype):
    """A fresh jitted `x.astype(dtype)` (a new function, so it compiles for KILN_CPU now)."""
    return kiln.jit(lambda x: x.astype(dtype), backend="llvm")


@pytest.mark.parametrize("dst", [np.float32, np.float64])
def test_jit_widens_every_half(dst, cpu, x64):
    x = all_halves()
    assert_bits(jit_astype(dst)(x), x, dst, quiet_agnostic=True)


@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_jit_narrows_at_every_boundary(src, cpu, x64):
    x = boundaries(src)
    assert_bits(jit_astype(np.float16)(x), x, np.float16)


@pytest.mark.parametrize("cpu_name", TARGETS)
@SETTINGS
@given(src=st.sampled_from([np.float32, np.float64]), data=st.data())
def test_jit_narrows_any_value(cpu_name, src, data):
    x = data.draw(hnp.arrays(src, 16, elements=st.floats(width=np.finfo(src).bits)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KILN_CPU", cpu_name)
        kiln.config.update("jax_enable_x64", True)
        try:
            assert_bits(jit_astype(np.float16)(x), x, np.float16)
        finally:
            kiln.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("src", [np.int16, np.uint16, np.int64])
def test_jit_integers_to_half(src, cpu, x64):
    info = np.iinfo(src)
    x = np.arange(info.min, info.max + 1, dtype=np.int64).astype(src) if info.bits == 16 else \
        np.array([info.min, -65520, -65519, -2049, 2049, 4097, 65504, 65519, 65520, info.max],
                 src)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.asarray(jit_astype(np.float16)(x)).view(np.uint16).tolist() == \
        want.view(np.uint16).tolist()


@pytest.mark.parametrize("dst", [np.int32, np.uint8, np.bool_])
def test_jit_half_to_integers_as_reference(dst, cpu):
    x = all_halves()
    want = kiln.jit(lambda x: x.astype(dst), backend="reference")(x)
    np.testing.assert_array_equal(np.asarray(jit_astype(dst)(x)), np.asarray(want))


def _fma(a, b, c):
    return kiln._random._fma(a, b, c)


def test_half_fma_rounds_once(cpu):
    """float16 fma is computed in double and rounded once (__truncdfhf2 on x86), bit for bit
    the reference's exact emulation; the addends cancel the rounded product, leaving only its
    rounding error."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(4096).astype(np.float16) for _ in range(2))
    c = np.concatenate([-(a[:2048] * b[:2048]), rng.standard_normal(2048).astype(np.float16)])
    got = kiln.jit(_fma, backend="llvm")(a, b, c)
    want = kiln.jit(_fma, backend="reference")(a, b, c)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(want).view(np.uint16))


def test_exponential_float16_under_jit(cpu):
    key = kiln.random.PRNGKey(0)
    got = kiln.jit(lambda k: kiln.random.exponential(k, (64,), dtype="float16"))(key)
    want = kiln.random.exponential(key, (64,), dtype="float16")
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                  np.asarray(want).view(np.uint16))


# --------------------------------------------------------------- unresolved symbols

_CALLS_UNKNOWN = """
declare i64 @kiln_test_no_such_function(i64)
define i64 @"{name}"(i64 %x) {{
  %y = call i64 @kiln_test_no_such_function(i64 %x)
  ret i64 %y
}}
"""


def test_unresolved_symbol_is_a_compile_error_not_an_abort():
    name = "kiln_test_calls_unknown"
    data = target.object_code(target.parse(_CALLS_UNKNOWN.format(name=name), name))
    defined, undefined = object_symbols.symbols(data)
    assert name in defined and "kiln_test_no_such_function" in undefined
    with pytest.raises(object_symbols.UnresolvedSymbolError) as error:
        target.load_object(name, data, entry=False)
    assert isinstance(error.value, CompileError)
    message = str(error.value)
    assert "kiln_test_no_such_function" in message and f"module {name}" in message
    assert "backend='reference'" in message and "KILN_CPU" in message
    # nothing was added: the engine still loads and runs code
    f = kiln.jit(lambda x: x * 2 + 1, backend="llvm")
    assert np.asarray(f(np.arange(3.0, dtype=np.float32))).tolist() == [1.0, 3.0, 5.0]


_LAZY_BUILTINS = """
import numpy as np
import kiln
from kiln.compiler.backends.llvm import rtlib, target
kiln.config.update("jax_enable_x64", True)
print(kiln.jit(lambda x: x * 2)(np.ones(3, np.float32)).tolist(), len(rtlib._LOADED_BUILTINS))
half = kiln.jit(lambda x: x.astype(np.float16))(np.array([1 + 2 ** -11 + 2 ** -40]))
print(half.tolist(), len(rtlib._LOADED_BUILTINS))
print(sorted(set(rtlib.builtins.NAMES) - target._DEFINED))
"""


def test_builtins_are_loaded_for_the_first_code_that_calls_one(tmp_path):
    """The builtins object is compiled and loaded only once compiled code calls a builtin
    (double -> float16 on every CPU without AVX512-FP16), and then defines every one."""
    script = tmp_path / "lazy.py"
    script.write_text(_LAZY_BUILTINS)
    env = {**os.environ, "KILN_CACHE_DIR": "off", "KILN_CPU": "x86-64-v3"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, check=True).stdout.splitlines()
    assert out == ["[2.0, 2.0, 2.0] 0", f"[{float(np.float16(1 + 2 ** -10))}] 1", "[]"]


# ------------------------------------------------------------------------------ KILN_CPU

_SSA = """
def halve(x: 'f16[8]') -> 'f16[8]':
    y = mul(x, float16(0.5))
    return y
"""


def test_kiln_cpu_is_part_of_the_cache_key(monkeypatch):
    fn = from_source(_SSA)
    keys = {}
    for name in ("native", "x86-64-v2", "x86-64-v3", "znver1"):
        monkeypatch.setenv("KILN_CPU", name)
        keys[name] = executable.cache_key(fn)
    assert len(set(keys.values())) == len(keys), keys
    monkeypatch.setenv("KILN_CPU", "x86-64-v3")
    assert executable.cache_key(fn) == keys["x86-64-v3"]   # and stable


_NARROW = """
define half @narrow(float %x) {
  %y = fptrunc float %x to half
  ret half %y
}
"""


@pytest.mark.parametrize("cpu_name, instruction", [
    ("generic", "__truncsfhf2"), ("x86-64-v2", "__truncsfhf2"), ("x86-64-v3", "vcvtps2ph"),
    ("znver1", "vcvtps2ph"), ("skylake-avx512", "vcvtps2ph")])
def test_kiln_cpu_picks_the_target_machine(cpu_name, instruction, monkeypatch):
    """float -> float16 is an instruction with F16C (x86-64-v3 and later), a call to the
    runtime library's builtin without."""
    monkeypatch.setenv("KILN_CPU", cpu_name)
    assert target.jit_cpu()[0] == cpu_name
    assert instruction in target.assembly(target.parse(_NARROW, "narrow"))


def test_kiln_cpu_native_is_the_host(monkeypatch):
    monkeypatch.delenv("KILN_CPU", raising=False)
    assert target.jit_cpu() == target.host_cpu()
    monkeypatch.setenv("KILN_CPU", "native")
    assert target.jit_cpu() == target.host_cpu()


def test_unknown_kiln_cpu_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("KILN_CPU", "pentium-9000")
    with pytest.raises(target.UnknownCPUError) as error:
        kiln.jit(lambda x: x - 1, backend="llvm")(np.ones(2, np.float32))
    message = str(error.value)
    assert "KILN_CPU='pentium-9000'" in message and "not a CPU LLVM" in message
    assert "x86-64-v3" in message and "native" in message


# ------------------------------------------------------------- kiln compile libraries

def widen_half(h):
    return h.astype(np.float32), h.astype(np.float64)


def narrow_to_half(x32, x64):
    return x32.astype(np.float16), x64.astype(np.float16)


def test_compiled_library_links_the_builtins(tmp_path, x64):
    """A library for the portable CPU level (x86-64-v2: no F16C) calls the builtins for every
    float16 conversion; its kiln_runtime.o defines them, hidden (not exported)."""
    import kiln.aot
    from kiln.cli.aot import compile_library
    from kiln.compiler.aot import Target
    halves = all_halves()
    x32, x64_values = boundaries(np.float32), boundaries(np.float64)
    n = min(x32.size, x64_values.size)
    x32, x64_values = x32[:n], x64_values[:n]
    compile_library([Target(widen_half, (halves,)),
                     Target(narrow_to_half, (x32, x64_values))],
                    tmp_path / "lib", name="portable", cpu="generic")
    lib = kiln.aot.load(tmp_path / "lib")
    wide32, wide64 = lib.widen_half(halves)
    assert_bits(wide32, halves, np.float32)   # the builtin: signalling NaNs stay signalling
    assert_bits(wide64, halves, np.float64, quiet_agnostic=True)
    narrow32, narrow64 = lib.narrow_to_half(x32, x64_values)
    assert_bits(narrow32, x32, np.float16)
    assert_bits(narrow64, x64_values, np.float16)
    shared = ctypes.CDLL(str(next((tmp_path / "lib").glob("*.so"))))
    for name in builtins.NAMES:
        with pytest.raises(AttributeError):
            getattr(shared, name)
