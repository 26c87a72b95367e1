"""JAX's type promotion, checked against tables recorded from JAX 0.10.2.

`PROMOTION` is `jnp.add(a, b)`'s dtype and weak type for every pair of (bool, int8, int16,
int32, uint8, uint16, uint32, float16, float32, complex64) arrays and weak Python int, float and
complex scalars (`i*`, `f*`, `c*`), with x64 off. `PROMOTE_TYPES` is `jnp.promote_types` over
all strong dtypes (no canonicalisation). Both check `kiln.compiler.ir.dtypes`; the dtype
classes and utilities of `kiln.numpy` are checked against values recorded from JAX as well.
"""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.ir import dtypes as D

NAMES = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32",
         "complex64", "i*", "f*", "c*"]

# jnp.add(row, column) with x64 off: short dtype name, `*` when weakly typed (JAX 0.10.2).
PROMOTION = """
b1   i8   i16  i32  u8   u16  u32  f16  f32  c64  i32* f32* c64*
i8   i8   i16  i32  i16  i32  i32  f16  f32  c64  i8   f32* c64*
i16  i16  i16  i32  i16  i32  i32  f16  f32  c64  i16  f32* c64*
i32  i32  i32  i32  i32  i32  i32  f16  f32  c64  i32  f32* c64*
u8   i16  i16  i32  u8   u16  u32  f16  f32  c64  u8   f32* c64*
u16  i32  i32  i32  u16  u16  u32  f16  f32  c64  u16  f32* c64*
u32  i32  i32  i32  u32  u32  u32  f16  f32  c64  u32  f32* c64*
f16  f16  f16  f16  f16  f16  f16  f16  f32  c64  f16  f16  c64
f32  f32  f32  f32  f32  f32  f32  f32  f32  c64  f32  f32  c64
c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64
i32* i8   i16  i32  u8   u16  u32  f16  f32  c64  i32* f32* c64*
f32* f32* f32* f32* f32* f32* f32* f16  f32  c64  f32* f32* c64*
c64* c64* c64* c64* c64* c64* c64* c64  c64  c64  c64* c64* c64*
"""

STRONG = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]

# jnp.promote_types(row, column) (JAX 0.10.2).
PROMOTE_TYPES = """
b1   i8   i16  i32  i64  u8   u16  u32  u64  f16  f32  f64  c64  c128
i8   i8   i16  i32  i64  i16  i32  i32  f64  f16  f32  f64  c64  c128
i16  i16  i16  i32  i64  i16  i32  i32  f64  f16  f32  f64  c64  c128
i32  i32  i32  i32  i64  i32  i32  i32  f64  f16  f32  f64  c64  c128
i64  i64  i64  i64  i64  i64  i64  i64  f64  f16  f32  f64  c64  c128
u8   i16  i16  i32  i64  u8   u16  u32  u64  f16  f32  f64  c64  c128
u16  i32  i32  i32  i64  u16  u16  u32  u64  f16  f32  f64  c64  c128
u32  i32  i32  i32  i64  u32  u32  u32  u64  f16  f32  f64  c64  c128
u64  f64  f64  f64  f64  u64  u64  u64  u64  f16  f32  f64  c64  c128
f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f64  c64  c128
f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64  c64  c128
f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  c128 c128
c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c128 c64  c128
c128 c128 c128 c128 c128 c128 c128 c128 c128 c128 c128 c128 c128 c128
"""

# (row, column) -> jnp.add's result with enable_x64 on (JAX 0.10.2).
X64_CASES = {
    ("int32", "uint32"): "i64", ("i*", "i*"): "i64*", ("f*", "i*"): "f64*",
    ("int8", "uint64"): "f64*", ("uint64", "i*"): "u64", ("float32", "f*"): "f32",
    ("int64", "f*"): "f64*", ("uint32", "int8"): "i64", ("bool", "i*"): "i64*",
    ("c*", "f*"): "c128*", ("float16", "int64"): "f16", ("float32", "int64"): "f32",
    ("complex64", "float64"): "c128",
}


def _table(text, names):
    rows = [line.split() for line in text.strip().splitlines()]
    return {(a, b): rows[i][j] for i, a in enumerate(names) for j, b in enumerate(names)}


def _pair(name):
    """(dtype, weak_type) of a table entry under the current x64 setting."""
    if name.endswith("*"):
        return D.python_scalar_dtype({"i*": 1, "f*": 1.0, "c*": 1j}[name])
    return np.dtype(name), False


def _short(dtype, weak=False):
    return D.short_name(dtype).replace("bool", "b1") + ("*" if weak else "")


@pytest.mark.parametrize("a", NAMES)
def test_result_type_matches_jax_table(a):
    expected = _table(PROMOTION, NAMES)
    got = {b: _short(*D.result_type(_pair(a), _pair(b))) for b in NAMES}
    assert got == {b: expected[a, b] for b in NAMES}


def test_result_type_is_symmetric_and_idempotent():
    for a in NAMES:
        assert D.result_type(_pair(a)) == (_pair(a)[0], _pair(a)[1])
        for b in NAMES:
            assert D.result_type(_pair(a), _pair(b)) == D.result_type(_pair(b), _pair(a))
            for c in ("int8", "f*", "uint16"):
                left = D.result_type(D.result_type(_pair(a), _pair(b)), _pair(c))
                assert D.result_type(_pair(a), _pair(b), _pair(c))[0] == left[0]


@pytest.mark.parametrize("a", STRONG)
def test_promote_types_matches_jax_table(a):
    expected = _table(PROMOTE_TYPES, STRONG)
    assert {b: _short(D.promote_types(a, b)) for b in STRONG} == \
        {b: expected[a, b] for b in STRONG}


def test_promote_types_python_types_are_weak():
    # JAX 0.10.2: jnp.promote_types(int, int8) is int8; float/int are weak float/int.
    assert D.promote_types(int, np.int8) == np.int8
    assert D.promote_types("uint8", int) == np.uint8
    assert D.promote_types("float16", float) == np.float16
    assert D.promote_types(int, float) == np.float64
    assert D.promote_types(complex, np.float32) == np.complex64


def test_kiln_numpy_promote_and_result_type_use_the_same_lattice():
    for a in STRONG:
        for b in STRONG:
            assert jnp.promote_types(a, b) == D.promote_types(a, b)
    assert jnp.result_type(jnp.int8, 1) == np.int8
    assert jnp.result_type(1, 1.0) == np.float32
    assert jnp.result_type(np.ones(2, np.int8), 2.0) == np.float32
    assert jnp.result_type(np.float64(1)) == np.float32
    assert jnp.result_type(int) == np.int32
    # Python's types are weak, as JAX reads them
    assert jnp.result_type(np.float16, float) == np.float16
    assert jnp.result_type(np.int8, int) == np.int8
    assert jnp.result_type(np.float16, complex) == np.complex64
    assert jnp.result_type(np.uint32, np.int32) == np.int32
    assert jnp.result_type(np.uint32, np.int8) == np.int32


def test_x64_cases(x64):
    for (a, b), expected in X64_CASES.items():
        assert _short(*D.result_type(_pair(a), _pair(b))) == expected, (a, b)
    assert D.canonicalize(np.float64) == np.float64
    # x64 on: u32 x i32 forms int64 (with x64 off it stays int32, see PROMOTE_TYPES).
    assert D.promote_types(np.int32, np.uint32) == np.int64
    assert D.promote_types(np.int8, np.uint32) == np.int64
    assert D.python_scalar_dtype(1) == (np.dtype(np.int64), True)


def test_x64_is_restored_and_narrows_again():
    assert not D.x64_enabled()
    assert _short(*D.result_type(_pair("int32"), _pair("uint32"))) == "i32"
    assert D.canonicalize(np.float64) == np.float32
    assert D.canonicalize(np.uint64) == np.uint32
    assert D.python_scalar_dtype(1.0) == (np.dtype(np.float32), True)
    assert D.python_scalar_dtype(True) == (np.dtype(np.bool_), False)


def test_config_update_accepts_jax_names(x64):
    kiln.config.update("jax_enable_x64", False)
    assert not D.x64_enabled()
    kiln.config.update("jax_enable_x64", True)
    assert D.x64_enabled()


def test_canonicalize_rejects_non_numeric_dtypes():
    with pytest.raises(TypeError, match="not a valid kiln array type"):
        D.canonicalize(np.dtype("U3"))


# ------------------------------------------------------------------ kiln.numpy dtype classes

@pytest.mark.parametrize("ctor,arg,dtype,value", [
    (jnp.float32, 3, np.float32, 3.0),
    (jnp.float32, 3.7, np.float32, np.float32(3.7)),
    (jnp.int32, 3.7, np.int32, 3),
    (jnp.bool_, 2, np.bool_, True),
    (jnp.complex64, 1 + 2j, np.complex64, 1 + 2j),
    (jnp.float64, 1, np.float32, 1.0),   # x64 off: narrowed, as JAX (with a warning there)
    (jnp.int64, 1, np.int32, 1),
])
def test_scalar_type_constructors(ctor, arg, dtype, value):
    out = ctor(arg)
    assert isinstance(out, kiln.Array)
    assert out.dtype == dtype and not out.weak_type and out.shape == ()
    assert out.item() == value


def test_scalar_type_constructor_on_sequences_and_arrays():
    out = jnp.float32([1, 2])
    assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0]
    out = jnp.float16(np.arange(3))
    assert out.dtype == np.float16 and out.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("ctor,arg", [(jnp.int8, 300), (jnp.uint8, -1)])
def test_scalar_type_constructor_overflow(ctor, arg):
    with pytest.raises(OverflowError, match=f"Python integer {arg} out of bounds"):
        ctor(arg)


def test_scalar_types_are_dtypes():
    assert np.dtype(jnp.float32) == np.float32
    assert jnp.float32.dtype == np.dtype(np.float32)
    assert jnp.float32 == np.float32
    assert isinstance(np.float32(1), jnp.float32)
    assert jnp.dtype("float32") == np.float32
    assert jnp.zeros(2, jnp.int8).dtype == np.int8


def test_python_types_as_dtypes_like_jax():
    assert np.dtype(jnp.int_) == np.int64
    assert jnp.dtype(int) == np.int64
    assert jnp.dtype(float) == np.float64


def test_promote_types_with_python_types_like_jax():
    assert jnp.promote_types(int, jnp.int8) == np.int8
    assert jnp.promote_types(int, float) == np.float64


def test_result_type_without_arguments():
    with pytest.raises(ValueError, match="at least one array or dtype is required"):
        jnp.result_type()


@pytest.mark.parametrize("a,b,expected", [
    (jnp.float32, jnp.floating, True), (jnp.int8, jnp.integer, True),
    (jnp.uint8, jnp.signedinteger, False), (jnp.bool_, jnp.number, False),
    (jnp.complex64, jnp.inexact, True), ("float32", jnp.float32, True),
    (np.float32, jnp.float32, True), (jnp.float16, jnp.float32, False),
    (np.dtype("int32"), jnp.integer, True), (float, jnp.floating, True),
    (int, jnp.integer, True),
])
def test_issubdtype(a, b, expected):
    assert jnp.issubdtype(a, b) is expected


# finfo(dtype): bits, eps, max, tiny, nmant, nexp, maxexp, minexp, precision, resolution (JAX).
FINFO = {
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 10, 5, 16, -14, 3,
                0.0010004043579101562),
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 23,
                8, 128, -126, 6, 9.999999974752427e-07),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308, 52,
                11, 1024, -1022, 15, 1e-15),
}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo(name):
    fi = jnp.finfo(getattr(jnp, name))
    got = (fi.bits, float(fi.eps), float(fi.max), float(fi.tiny), fi.nmant, fi.nexp, fi.maxexp,
           fi.minexp, fi.precision, float(fi.resolution))
    assert got == FINFO[name]
    assert float(fi.min) == -float(fi.max) and float(fi.smallest_normal) == float(fi.tiny)
    assert fi.dtype == np.dtype(name)


def test_finfo_of_complex_and_errors():
    assert jnp.finfo(jnp.complex64).dtype == np.float32
    with pytest.raises(ValueError, match="not inexact"):
        jnp.finfo(jnp.int32)


def test_iinfo():
    assert (jnp.iinfo(jnp.int8).min, jnp.iinfo(jnp.int8).max) == (-128, 127)
    assert (jnp.iinfo("uint32").min, jnp.iinfo("uint32").max) == (0, 4294967295)
