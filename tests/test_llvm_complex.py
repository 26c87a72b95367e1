"""Complex numbers (complex64, complex128) in the LLVM backend, against the reference backend.

Every primitive that accepts complex operands and has a complex lowering
(compiler/backends/llvm/lower_complex.py) runs natively on hypothesis-drawn operands (shapes
with 0- and 1-sized axes, rank-0 operands broadcast, infinities, NaNs, signed zeros, tiny and
huge magnitudes) and is compared with the reference: NaN where it has NaN, the same infinities,
finite parts within a tolerance relative to the number's magnitude (exact arithmetic, a few
ulps for transcendental functions, summation order for sums and products). Special values of
the transcendental functions are checked on the full grid of C99's cases. End-to-end programs
(polynomials, matrix products through cgemm/zgemm, abs/angle, gradients, holomorphic Jacobians,
control flow) are compiled with `backend="cpu"`, which raises instead of falling back to the
reference backend, so they prove the code ran natively.
"""
import re
import warnings

import numpy as np
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.ssa import Eqn, Function, Var
from kiln.compiler.ir.verify import verify
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function

SETTINGS = settings(max_examples=25, deadline=None)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
COMPLEX = [C64, C128]
PART = {C64: np.dtype(np.float32), C128: np.dtype(np.float64)}
# Relative tolerances (to the result's magnitude): arithmetic, transcendental functions.
EXACT = {C64: 1e-6, C128: 1e-15}
ULPS = {C64: 3e-6, C128: 2e-13}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, 3e38, 1e-42]


# --------------------------------------------------------------------------- helpers

def program(in_avals, steps):
    """An SSA Function of inputs `in_avals`: `steps` are (primitive, operand indices into the
    inputs and earlier results, params); every result is an output (in order)."""
    values = [Var(f"a{i}", a) for i, a in enumerate(in_avals)]
    invars, eqns = list(values), []
    for k, (name, operands, params) in enumerate(steps):
        prim = PRIMITIVES[name]
        args = [values[i] for i in operands]
        out = prim.abstract_eval(*[a.aval for a in args], **params)
        outs = [Var(f"t{k}_{j}", a) for j, a in
                enumerate(out if prim.multiple_results else [out])]
        eqns.append(Eqn(outs, prim, args, params))
        values += outs
    return verify(Function("f", invars, eqns, values[len(invars):]))


def run_both(fn, *args):
    """(native results, reference results) of `fn` on `args`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = reference.compile_function(fn)(*args)
    return compile_function(fn)(*args), want


def assert_close(got, want, rtol, label="", scale=None):
    """NaN parts where the reference has them, the same infinities, finite parts within `rtol`
    of the number's magnitude (`scale`: another magnitude per element)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (label, got.dtype, want.dtype)
    if want.dtype.kind != "c" and want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=label)
        return
    parts = [(np.real(got), np.real(want)), (np.imag(got), np.imag(want))]
    magnitude = np.zeros(want.shape)
    for _, w in parts:
        w = w.astype(np.float64)
        magnitude = np.maximum(magnitude, np.where(np.isfinite(w), np.abs(w), 0))
    if scale is not None:
        magnitude = np.maximum(magnitude, np.where(np.isfinite(scale), np.abs(scale), 0))
    for g, w in parts:
        g, w = g.astype(np.float64), w.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{label}: NaNs")
        inf = np.isinf(w)
        np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"{label}: infinities")
        finite = np.isfinite(w)
        with np.errstate(invalid="ignore"):
            err = np.abs(g - w)[finite]
        bound = (rtol * magnitude + np.finfo(np.float64).tiny)[finite]
        assert np.all(err <= bound), (label, np.asarray(got)[finite][err > bound][:5],
                                      np.asarray(want)[finite][err > bound][:5])


def part_values(dtype, lo=-4.0, hi=4.0, specials=True):
    """Floats for one part of a complex `dtype`: a range, and C99's special values."""
    width = PART[dtype].itemsize * 8
    finite = st.floats(lo, hi, width=width)
    if not specials:
        return finite
    special = [float(PART[dtype].type(v)) for v in SPECIAL]
    return st.one_of(finite, st.sampled_from(special))


@st.composite
def complex_arrays(draw, dtype, shape, **kw):
    z = np.empty(shape, dtype)   # (re + 1j * im would turn an infinite im into a NaN re)
    z.real = draw(hnp.arrays(PART[dtype], shape, elements=part_values(dtype, **kw)))
    z.imag = draw(hnp.arrays(PART[dtype], shape, elements=part_values(dtype, **kw)))
    return z


def shapes(max_dims=3, max_side=4):
    return hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)


def aval(x):
    return ShapedArray(np.shape(x), np.asarray(x).dtype)


def check(steps, args, tolerances, default):
    """Run the program of `steps` on `args` natively and on the reference; compare each result
    with its step's tolerance."""
    fn = program([aval(a) for a in args], steps)
    got, want = run_both(fn, *args)
    for (name, _, _), g, w in zip(steps, got, want):
        # atan2's results are angles: their rounding error is absolute (a true 0 comes out as
        # the reference's 5e-8 noise), so they are judged against a magnitude of at least 1
        scale = np.ones(np.shape(w)) if name in _ANGLES else None
        assert_close(g, w, tolerances.get(name, default), name, scale)


_ANGLES = {"atan2"}


# ------------------------------------------------------------------- elementwise: unary

UNARY_EXACT = ["neg", "conj", "real", "imag", "square", "copy", "stop_gradient", "abs"]
UNARY_MATH = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
              "expm1", "log1p", "exp2", "logistic", "sign", "asin", "acos", "atan", "asinh",
              "acosh", "atanh"]


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), shape=shapes(), data=st.data())
def test_unary(dtype, shape, data):
    z = data.draw(complex_arrays(dtype, shape))
    steps = [(n, [0], {}) for n in UNARY_EXACT + UNARY_MATH]
    steps += [("integer_pow", [0], {"y": y}) for y in (-3, 0, 2, 5)]
    fn = program([aval(z)], steps)
    got, want = run_both(fn, z)
    with np.errstate(all="ignore"):
        # expm1's terms cancel; NumPy's log1p, log|1 + z|, has an absolute error of an ulp
        scales = {"expm1": np.abs(np.exp(z.astype(np.complex128))), "log1p": np.ones(z.shape)}
    for (name, _, params), g, w in zip(steps, got, want):
        rtol = (EXACT if name in UNARY_EXACT else ULPS)[dtype]
        if name == "integer_pow":
            rtol = 8 * EXACT[dtype]
        assert_close(g, w, rtol, name, scales.get(name))


def test_special_values_of_every_function():
    """C99's special cases (glibc's choices, which NumPy returns) for every pair of parts
    from signed zeros, infinities, NaN, tiny, huge and ordinary values."""
    values = [0.0, -0.0, 1.5, -1.5, 0.3, 1e-30, 3e38, 1e300, 1e-310, 800.0, -800.0, 60.0,
              200.0, np.inf, -np.inf, np.nan]
    for dtype in COMPLEX:
        with np.errstate(all="ignore"):
            z = np.array([complex(a, b) for a in values for b in values], dtype)
        steps = [(n, [0], {}) for n in UNARY_EXACT + UNARY_MATH]
        check(steps, [z], {n: ULPS[dtype] for n in UNARY_MATH}, EXACT[dtype])


# ------------------------------------------------------------------ elementwise: binary

@st.composite
def binary_operands(draw, dtype, **kw):
    """Two operands of one shape, or one of them rank 0 (broadcast)."""
    shape = draw(shapes())
    a = draw(complex_arrays(dtype, shape, **kw))
    b = draw(complex_arrays(dtype, draw(st.sampled_from([shape, ()])), **kw))
    return (a, b) if draw(st.booleans()) else (b, a)


def _broadcast_steps(x, y):
    """Steps broadcasting a rank-0 operand to the other's shape (operands 0 and 1 become
    the last two values)."""
    if np.shape(x) == np.shape(y):
        return [], (0, 1)
    shape = np.shape(x) or np.shape(y)
    small = 0 if not np.shape(x) else 1
    step = ("broadcast_in_dim", [small], {"shape": shape, "broadcast_dimensions": ()})
    return [step], ((2, 1) if small == 0 else (0, 2))


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), data=st.data())
def test_binary(dtype, data):
    x, y = data.draw(binary_operands(dtype))
    prefix, (i, j) = _broadcast_steps(x, y)
    names = ["add", "sub", "mul", "div", "max", "min", "eq", "ne"]
    steps = prefix + [(n, [i, j], {}) for n in names]
    fn = program([aval(x), aval(y)], steps)
    got, want = run_both(fn, x, y)
    for (name, _, _), g, w in list(zip(steps, got, want))[len(prefix):]:
        assert_close(g, w, EXACT[dtype], name)


def test_binary_special_values():
    """Division, products and atan2 on every pair from a grid of signed zeros, infinities,
    NaN and ordinary parts."""
    values = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan]
    for dtype in COMPLEX:
        z = np.array([complex(a, b) for a in values for b in values], dtype)
        x, y = (np.ascontiguousarray(v.ravel()) for v in np.meshgrid(z, z))
        check([(n, [0, 1], {}) for n in ("mul", "div", "atan2")], [x, y], {}, ULPS[dtype])


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), data=st.data())
def test_pow_and_atan2(dtype, data):
    """pow with complex exponents, with integral ones (NumPy multiplies those out), zeros,
    and integer exponents; atan2; moderate magnitudes (both amplify rounding)."""
    x, y = data.draw(binary_operands(dtype, lo=-3.0, hi=3.0, specials=False))
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    x, y = np.broadcast_to(x, shape).copy(), np.broadcast_to(y, shape).copy()
    integral = data.draw(hnp.arrays(np.bool_, shape))
    y[integral] = np.round(y[integral].real)
    y.flat[:1] = 0
    x.flat[1:2] = 0
    n = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-5, 5)))
    steps = [("pow", [0, 1], {}), ("pow", [0, 2], {}), ("atan2", [0, 1], {})]
    check(steps, [x, y, n], {}, 1e-4 if dtype == C64 else 1e-11)


# ------------------------------------------------- construction, selection, conversion

@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), shape=shapes(), data=st.data())
def test_complex_conj_select_and_clamp(dtype, shape, data):
    part = PART[dtype]
    re = data.draw(hnp.arrays(part, shape, elements=part_values(dtype).map(float)))
    im = data.draw(hnp.arrays(part, shape, elements=part_values(dtype).map(float)))
    z = data.draw(complex_arrays(dtype, shape))
    which = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-1, 3)))
    pick = data.draw(hnp.arrays(np.bool_, shape))
    steps = [("complex", [0, 1], {}), ("conj", [0], {}), ("conj", [2], {}),
             ("select_n", [3, 2, 5, 7], {}), ("select_n", [4, 2, 5], {}),
             ("clamp", [6, 2, 5], {})]
    check(steps, [re, im, z, which, pick], {}, 0.0)


CONVERSIONS = [np.float32, np.float64, np.int32, np.uint8, np.bool_, np.complex64,
               np.complex128]


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), shape=shapes(), data=st.data())
def test_convert_element_type(dtype, shape, data):
    """complex -> anything through the real part (NaN -> 0 and saturation for integers);
    anything -> complex with a +0 imaginary part."""
    z = data.draw(complex_arrays(dtype, shape))
    f = data.draw(hnp.arrays(np.float32, shape, elements=part_values(C64).map(float)))
    i = data.draw(hnp.arrays(np.int16, shape))
    b = data.draw(hnp.arrays(np.bool_, shape))
    steps = [("convert_element_type", [0], {"new_dtype": np.dtype(t), "weak_type": False})
             for t in CONVERSIONS]
    steps += [("convert_element_type", [k], {"new_dtype": dtype, "weak_type": False})
              for k in (1, 2, 3)]
    check(steps, [z, f, i, b], {}, 0.0)


# ------------------------------------------------------------- reductions and scans

@st.composite
def reduction_cases(draw, dtype, specials=False):
    shape = draw(shapes())
    z = draw(complex_arrays(dtype, shape, specials=specials))
    axes = tuple(sorted(draw(st.sets(st.integers(0, max(len(shape) - 1, 0)),
                                     max_size=len(shape)))))
    return z, axes


def _sum_scale(z, axes):
    """The magnitude a sum's rounding is relative to: the sum of the terms' magnitudes."""
    return np.sum(np.abs(z.astype(np.complex128)), axis=axes)


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), data=st.data())
def test_reductions(dtype, data):
    z, axes = data.draw(reduction_cases(dtype))
    fn = program([aval(z)], [(n, [0], {"axes": axes}) for n in ("reduce_sum", "reduce_prod")])
    got, want = run_both(fn, z)
    rtol = 8 * EXACT[dtype]
    assert_close(got[0], want[0], rtol, "reduce_sum", _sum_scale(z, axes))
    prod_scale = np.prod(np.abs(z.astype(np.complex128)), axis=axes)
    assert_close(got[1], want[1], rtol * max(z.size, 1), "reduce_prod", prod_scale)


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), data=st.data())
def test_max_min_reductions_and_scans(dtype, data):
    """NumPy's lexicographic order, NaN parts winning, the empty reduction's identity, and a
    first element with an infinite real part."""
    z, axes = data.draw(reduction_cases(dtype, specials=True))
    steps = [(n, [0], {"axes": axes}) for n in ("reduce_max", "reduce_min")]
    if z.ndim:
        axis = data.draw(st.integers(0, z.ndim - 1))
        steps += [(n, [0], {"axis": axis, "reverse": r}) for n in ("cummax", "cummin")
                  for r in (False, True)]
    check(steps, [z], {}, 0.0)


@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), shape=shapes(), data=st.data())
def test_cumulative_sums_and_products(dtype, shape, data):
    z = data.draw(complex_arrays(dtype, shape, specials=False))
    if not z.ndim:
        z = z.reshape(1)
    axis = data.draw(st.integers(0, z.ndim - 1))
    reverse = data.draw(st.booleans())
    fn = program([aval(z)], [(n, [0], {"axis": axis, "reverse": reverse})
                             for n in ("cumsum", "cumprod")])
    got, want = run_both(fn, z)
    mags = np.abs(z.astype(np.complex128))
    flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    assert_close(got[0], want[0], 8 * EXACT[dtype], "cumsum",
                 flip(np.cumsum(flip(mags), axis=axis)))
    assert_close(got[1], want[1], 8 * EXACT[dtype] * z.shape[axis], "cumprod",
                 flip(np.cumprod(flip(mags), axis=axis)))


# ----------------------------------------------------------------------- dot_general

DOT_CASES = [  # (lhs shape, rhs shape, dimension numbers): BLAS (gemm/gemv) and loop nests
    ((16, 20), (20, 24), (((1,), (0,)), ((), ()))),
    ((20, 16), (20, 24), (((0,), (0,)), ((), ()))),
    ((16, 20), (24, 20), (((1,), (1,)), ((), ()))),
    ((64, 80), (80,), (((1,), (0,)), ((), ()))),
    ((80,), (80, 64), (((0,), (0,)), ((), ()))),
    ((2, 16, 20), (2, 20, 16), (((2,), (1,)), ((0,), (0,)))),
    ((3, 4), (4, 2), (((1,), (0,)), ((), ()))),
    ((3, 0), (0, 2), (((1,), (0,)), ((), ()))),
    ((1, 5), (5, 1), (((1,), (0,)), ((), ()))),
    ((3,), (4,), (((), ()), ((), ()))),
]


@settings(max_examples=20, deadline=None)
@given(case=st.sampled_from(DOT_CASES), dtype=st.sampled_from(COMPLEX), data=st.data())
def test_dot_general(case, dtype, data):
    ls, rs, dn = case
    a = data.draw(complex_arrays(dtype, ls, specials=False))
    b = data.draw(complex_arrays(dtype, rs, specials=False))
    fn = program([aval(a), aval(b)], [("dot_general", [0, 1], {"dimension_numbers": dn})])
    got, want = run_both(fn, a, b)
    scale = np.abs(lax.dot_general(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64),
                                   dn))
    assert_close(got[0], want[0], 16 * EXACT[dtype], "dot_general", np.asarray(scale))


def test_large_complex_products_call_cgemm_and_zgemm():
    for dtype, routine in ((C64, "cgemm"), (C128, "zgemm")):
        fn = program([ShapedArray((32, 48), dtype), ShapedArray((48, 40), dtype)],
                     [("dot_general", [0, 1], {"dimension_numbers": (((1,), (0,)), ((), ()))})])
        text = compile_function(fn).as_text("llvm-unoptimized")
        assert f"kiln_{routine}" in text


# --------------------------------------------------------------- moving complex values

@SETTINGS
@given(dtype=st.sampled_from(COMPLEX), shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4),
       data=st.data())
def test_shape_operations(dtype, shape, data):
    z = data.draw(complex_arrays(dtype, shape))
    pad_value = data.draw(complex_arrays(dtype, ()))
    rank = len(shape)
    steps = [
        ("transpose", [0], {"permutation": tuple(reversed(range(rank)))}),
        ("rev", [0], {"dimensions": (0,)}),
        ("slice", [0], {"start_indices": (0,) * rank, "limit_indices": shape,
                        "strides": (2,) * rank}),
        ("pad", [0, 1], {"padding_config": ((1, 2, 1),) + ((0, -min(shape[-1], 1), 0),) * (rank - 1)}),
        ("concatenate", [0, 0], {"dimension": 0}),
        ("broadcast_in_dim", [0], {"shape": (2,) + shape,
                                   "broadcast_dimensions": tuple(range(1, rank + 1))}),
        ("reshape", [0], {"new_sizes": (int(np.prod(shape)),), "dimensions": None}),
        ("reshape", [0], {"new_sizes": (int(np.prod(shape)),),
                          "dimensions": tuple(reversed(range(rank)))}),
        ("sort", [0], {"dimension": rank - 1, "is_stable": True, "num_keys": 1}),
    ]
    check(steps, [z, pad_value], {}, 0.0)


def test_iota_of_complex_dtype():
    for dtype in COMPLEX:
        check([("iota", [], {"dtype": dtype, "shape": (2, 5), "dimension": 1})], [], {}, 0.0)


def _index_program(z, idx, w):
    return (z[idx] * 2, z.at[idx].add(w), z.at[idx].multiply(w), z.at[idx].set(w),
            z.at[idx].max(w), z.at[idx].min(w),
            lax.dynamic_slice(z, (idx[0],), (2,)),
            lax.dynamic_update_slice(z, w[:2], (idx[-1],)))


@SETTINGS
@given(n=st.integers(2, 6), data=st.data())
def test_gather_scatter_and_dynamic_slices(n, data):
    z = data.draw(complex_arrays(C64, (n,)))
    idx = data.draw(hnp.arrays(np.int32, (3,), elements=st.integers(-n - 2, n + 2)))
    w = data.draw(complex_arrays(C64, (3,)))
    for g, want in zip(native(_index_program)(z, idx, w),
                       kiln.jit(_index_program, backend="reference")(z, idx, w)):
        assert_close(g, want, EXACT[C64])


# ------------------------------------------------------------- programs, end to end

def native(f):
    """`kiln.jit(f)` on the LLVM backend, asked for by name: it raises instead of falling back
    to the reference backend, so a result proves native code ran."""
    return kiln.jit(f, backend="cpu")


def compare(f, *args, rtol=EXACT[C64]):
    """`f` natively and on the reference backend; the native jitted function."""
    jf = native(f)
    got = kiln.tree_util.tree_leaves(jf(*args))
    want = kiln.tree_util.tree_leaves(kiln.jit(f, backend="reference")(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(np.asarray(g), np.asarray(w), rtol)
    return jf


def _horner(coeffs, z):
    acc = jnp.zeros_like(z)
    for c in coeffs:
        acc = acc * z + c
    return acc


def _poly_roots_residual(z):
    return jnp.abs(_horner([1.0, -2.0 + 1j, 3.0, -1j], z))


def _angle_and_abs(z):
    return jnp.angle(z), jnp.abs(z), jnp.real(z * jnp.conj(z))


def _matmul_chain(a, b):
    return jnp.tanh(a @ b) @ jnp.conj(b.T) + 1j


def test_polynomials_products_and_angles():
    rng = np.random.default_rng(0)
    z = (rng.standard_normal((64, 33)) + 1j * rng.standard_normal((64, 33))).astype(C64)
    b = (rng.standard_normal((33, 40)) + 1j * rng.standard_normal((33, 40))).astype(C64)
    compare(lambda z: _horner([1.0, -2.0 + 1j, 3.0, 0.5j], z), z, rtol=1e-5)
    compare(_poly_roots_residual, z, rtol=1e-5)
    compare(_angle_and_abs, z, rtol=3e-6)
    jf = compare(_matmul_chain, z, b, rtol=1e-5)
    assert "kiln_cgemm" in jf.lower(z, b).compile().as_text()


def _fused_chains(z, w, v):
    """Fusion groups mixing complex and real values, views and reductions; two flat chains of
    one structure and different sizes share a size-generic kernel."""
    t = jnp.exp(z * 0.5j) * jnp.conj(w.T) / (1 + jnp.abs(z))
    rows = jnp.sum(t * t, axis=1)
    cols = jnp.max(jnp.real(t), axis=0) + jnp.imag(jnp.prod(t[::-1], axis=0))
    u = jnp.sqrt(v) * 2 - v
    return rows, cols, jnp.sqrt(rows) * 2 - rows, u, jnp.cumsum(t, axis=0)


@SETTINGS
@given(m=st.integers(1, 5), n=st.integers(0, 5), data=st.data())   # (max over m)
def test_fused_programs_match_the_reference(m, n, data):
    z = data.draw(complex_arrays(C64, (m, n), specials=False))
    w = data.draw(complex_arrays(C64, (n, m), specials=False))
    v = data.draw(complex_arrays(C64, (n + 2,), specials=False))
    jf = compare(_fused_chains, z, w, v, rtol=2e-5)
    if m * n > 1:
        assert "fusion(" in jf.lower(z, w, v).as_text()


def _same_chain_twice(a, b):
    return jnp.sqrt(a) * 2 - a, jnp.sqrt(b) * 2 - b


def test_flat_chains_of_two_sizes_share_one_kernel():
    a = (np.arange(3000) * (1 + 0.5j)).astype(C64)
    b = (np.arange(1000) * (0.3 - 1j)).astype(C64)
    jf = compare(_same_chain_twice, a, b, rtol=ULPS[C64])
    text = jf.lower(a, b).compile().as_text("llvm-unoptimized")
    assert len(re.findall(r"define internal void .*i64 %\"size\"", text)) == 1


def _loss(z):
    return jnp.abs(jnp.sum(z * z)).real


def _holomorphic(z):
    return z * z * jnp.sin(z) + jnp.exp(z) / (1 + z * z)


def _real_loss(w, x, y):
    return jnp.sum(jnp.abs(x @ w - y) ** 2)


def test_gradients_and_holomorphic_jacobians():
    rng = np.random.default_rng(1)
    z = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(C64)
    compare(kiln.grad(_loss), z, rtol=1e-5)
    compare(kiln.jacfwd(_holomorphic, holomorphic=True), z, rtol=1e-5)
    compare(kiln.jacrev(_holomorphic, holomorphic=True), z, rtol=1e-5)
    compare(kiln.grad(lambda z: jnp.sum(_holomorphic(z)).real), z, rtol=1e-5)
    w = (rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))).astype(C64)
    x = (rng.standard_normal((7, 5)) + 1j * rng.standard_normal((7, 5))).astype(C64)
    y = (rng.standard_normal((7, 3)) + 1j * rng.standard_normal((7, 3))).astype(C64)
    compare(kiln.value_and_grad(_real_loss), w, x, y, rtol=1e-5)
    compare(kiln.vmap(_holomorphic), z.reshape(5, 1), rtol=1e-5)


def _fori_rotation(z):
    return lax.fori_loop(0, 10, lambda i, acc: acc * (0.9 + 0.1j) + z, z)


def _while_until_small(z):
    def cond(c):
        return jnp.max(jnp.abs(c)) > 1e-3
    return lax.while_loop(cond, lambda c: c * 0.5, z)


def _branches(z, flag):
    return lax.cond(flag, lambda v: jnp.exp(v), lambda v: jnp.conj(v), z)


def _scan_cumprod(z):
    return lax.scan(lambda c, x: (c * x, c + x), jnp.ones((), z.dtype), z)


def test_control_flow_with_complex_carries():
    z = (np.linspace(-1, 1, 6) + 1j * np.linspace(1, -1, 6)).astype(C64)
    compare(_fori_rotation, z)
    compare(_while_until_small, z)
    compare(_branches, z, np.bool_(True), rtol=3e-6)
    compare(_branches, z, np.bool_(False))
    compare(_scan_cumprod, z)


def _escape_time(x):
    """A data-dependent loop on complex values, differentiated through its tape."""
    z = x * (1 + 1j)
    while jnp.max(jnp.abs(z)) < 2.0:
        z = z * z + (0.5 - 0.1j)
    return jnp.sum(jnp.abs(z))


def _printing(z):
    kiln.debug.print("z={} sum={s}", z, s=jnp.sum(z))
    return z * 2


def test_tapes_and_printing_of_complex_values(capsys):
    compare(kiln.grad(_escape_time), np.array([0.5, 0.3, -0.2], np.float32))
    z = np.array([0.5 + 0.5j, 0.2 - 0.1j], C64)
    compare(_printing, z)
    native_out, reference_out = capsys.readouterr().out.splitlines()
    assert native_out == reference_out and "0.5+0.5j" in native_out


def test_complex128_under_x64(x64):
    z = (np.linspace(-3, 3, 7) + 1j * np.linspace(2, -2, 7)).astype(C128)
    jf = compare(_holomorphic, z, rtol=ULPS[C128])
    assert "double" in jf.lower(z).compile().as_text()
    a = (np.arange(768.0).reshape(24, 32) * (1 - 2j)).astype(C128)
    assert "kiln_zgemm" in compare(lambda a: a @ a.T, a, rtol=1e-14).lower(a).compile().as_text()


# --------------------------------------------------------- fallback and vectorisation

def test_fused_complex_loops_vectorise():
    """The struct form disappears after optimisation: a fused complex multiply-add and a
    complex sum run on full-width vector registers."""
    z = np.ones(4096, C64)
    for f in (lambda a, b: a * b + a, lambda a, b: jnp.sum(a * b)):
        asm = native(f).lower(z, z).compile().as_text("asm")
        assert re.search(r"\bv\w+\s+%[yz]mm", asm), asm[:2000]
