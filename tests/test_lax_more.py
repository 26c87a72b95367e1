"""The `kiln.lax` names added for JAX's API coverage, against JAX 0.10.2 computed in the test
(special functions, ragged dots, approximate top-k, mulhi, reduce_precision, rng_bit_generator,
custom_root / custom_linear_solve with their implicit derivatives, staging and sharding
names), with finite differences for derivatives JAX does not define."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.lax as kl
import kiln.numpy as knp

jax = pytest.importorskip("jax")
jl = jax.lax
jnp = jax.numpy


def close(a, b, rtol=2e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def same(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


# ------------------------------------------------------------------ special functions

A = np.array([0.5, 1.0, 3.0, 10.0, 2.0], np.float32)
X = np.array([0.0, 1.0, 2.5, 12.0, 0.3], np.float32)


def kiln_binary_specials(a, x):
    return (kl.igamma(a, x), kl.igammac(a, x), kl.igamma_grad_a(a, x),
            kl.random_gamma_grad(a, x), kl.zeta(a + 1, x + 1), kl.polygamma(a, x + 1))


def test_binary_special_functions_match_jax():
    want = (jl.igamma(A, X), jl.igammac(A, X), jl.igamma_grad_a(A, X),
            jl.random_gamma_grad(A, X), jl.zeta(A + 1, X + 1), jl.polygamma(A, X + 1))
    for got, w in zip(kiln_binary_specials(A, X), want):
        close(got, w, rtol=2e-5)


def test_unary_and_ternary_special_functions_match_jax():
    close(kl.bessel_i0e(X - 3), jl.bessel_i0e(X - 3))
    close(kl.bessel_i1e(X - 3), jl.bessel_i1e(X - 3))
    close(kl.betainc(A, A + 1, X / 13), jl.betainc(A, A + 1, X / 13))


def test_special_functions_check_dtypes_like_jax():
    with pytest.raises(TypeError, match="igamma does not accept dtype int32 at position 0"):
        kl.igamma(np.int32(1), 2.0)
    with pytest.raises(TypeError, match="requires arguments to have the same dtypes, got "
                                        "float16, float32"):
        kl.zeta(np.float16(2), np.float32(1))
    assert kl.igamma(np.float16(1), 2.0).dtype == np.float16   # the weak scalar follows


def test_igamma_derivatives_match_jax_and_compile():
    def f(a, x):
        return kl.igamma(a, x) * kl.igammac(a, x + 1)

    def g(a, x):
        return jl.igamma(a, x) * jl.igammac(a, x + 1)
    got = kiln.grad(f, argnums=(0, 1))(3.0, 2.5)
    for a, b in zip(got, jax.grad(g, (0, 1))(3.0, 2.5)):
        close(a, b, rtol=1e-4)


# ------------------------------------------------------------------------ ragged dots

def _ragged_case(mode, r, sizes):
    if mode == 1:
        lhs, rhs = r.randn(2, 7, 3), r.randn(3, 2, 3, 4)
        gs = np.array([sizes, sizes[::-1]], np.int32)
        dn = ((([2], [2]), ([0], [1])), [1], [0])
    elif mode == 2:
        lhs, rhs = r.randn(2, 5, 7), r.randn(4, 7, 2)
        gs = np.array([sizes, sizes[::-1]], np.int32)
        dn = ((([2], [1]), ([0], [2])), [2], [])
    else:
        lhs, rhs = r.randn(4, 5, 6), r.randn(4, 6, 2)
        gs = np.array([1, 3], np.int32)
        dn = ((([2], [1]), ([0], [0])), [0], [])
    return lhs.astype(np.float32), rhs.astype(np.float32), gs, dn


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from([1, 2, 3]),
       sizes=st.lists(st.integers(0, 3), min_size=3, max_size=3), seed=st.integers(0, 99))
def test_ragged_dot_general_matches_jax_in_every_mode(mode, sizes, seed):
    lhs, rhs, gs, dn = _ragged_case(mode, np.random.RandomState(seed), sizes)
    got = kl.ragged_dot_general(lhs, rhs, gs, kl.RaggedDotDimensionNumbers(*dn))
    want = jl.ragged_dot_general(lhs, rhs, gs, jl.RaggedDotDimensionNumbers(*dn))
    close(got, want, rtol=1e-5, atol=1e-5)


def test_ragged_dot_values_gradients_and_errors():
    r = np.random.RandomState(1)
    lhs, rhs, gs = r.randn(6, 3).astype(np.float32), r.randn(2, 3, 2).astype(np.float32), \
        np.array([2, 3], np.int32)
    close(kl.ragged_dot(lhs, rhs, gs), jl.ragged_dot(lhs, rhs, gs))
    got = kiln.jit(kiln.grad(lambda a, b: kl.ragged_dot(a, b, gs).sum(), argnums=(0, 1)))(lhs, rhs)
    want = jax.grad(lambda a, b: jl.ragged_dot(a, b, gs).sum(), argnums=(0, 1))(lhs, rhs)
    for a, b in zip(got, want):
        close(a, b)
    with pytest.raises(TypeError, match="group_sizes.dtype is subtype of np.integer"):
        kl.ragged_dot(lhs, rhs, gs.astype(np.float32))
    with pytest.raises(TypeError, match="expected rhs group dimension size to be 3, got 2"):
        kl.ragged_dot(lhs, rhs, np.array([1, 2, 3], np.int32))
    with pytest.raises(NotImplementedError, match="group_offset"):
        kl.ragged_dot(lhs, rhs, gs, group_offset=np.zeros(1, np.int32))


# ------------------------------------------------------------------- approximate top-k

@pytest.mark.parametrize("kw", [{}, {"aggregate_to_topk": False},
                                {"reduction_dimension": 0},
                                {"aggregate_to_topk": False, "recall_target": 0.5,
                                 "reduction_input_size_override": 9000}])
def test_approx_top_k_matches_jax(kw):
    x = np.random.RandomState(0).randn(3, 2000).astype(np.float32)
    x[0, 5] = x[0, 7]
    x[1, :4] = [0.0, np.inf, -0.0, -np.inf]   # (NaNs: JAX's order is its sort's accident)
    x[:, 9] = -0.0
    for name in ("approx_max_k", "approx_min_k"):
        got, want = getattr(kl, name)(x, 3, **kw), getattr(jl, name)(x, 3, **kw)
        assert isinstance(got, list)
        for a, b in zip(got, want):
            same(a, b)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 1 << 21), rank=st.integers(1, 3), k=st.integers(1, 2000),
       recall=st.sampled_from([0.5, 0.9, 0.95, 0.99, 1.0]),
       override=st.sampled_from([-1, 1 << 22]))
def test_approx_top_k_output_size_is_xlas(n, rank, k, recall, override):
    from jax._src.lib import _jax
    from kiln.lax._approx_topk import reduction_output_size
    k = min(k, n)
    assert reduction_output_size(n, rank, k, recall, False, override) == \
        _jax.approx_top_k_reduction_output_size(n, rank, k, recall, False, override)


# ---------------------------------------------------------------------- bit operations

@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32"])
def test_mulhi_matches_jax(dtype):
    info, r = np.iinfo(dtype), np.random.RandomState(0)
    x = r.randint(info.min, int(info.max) + 1, 300, dtype=np.int64).astype(dtype)
    y = r.randint(info.min, int(info.max) + 1, 300, dtype=np.int64).astype(dtype)
    x[:3], y[:3] = [info.min, info.max, 0], [info.min, info.min, info.max]
    same(kiln.jit(kl.mulhi)(x, y), jl.mulhi(x, y))
    with pytest.raises(TypeError, match="at position 0 are subtypes of integer"):
        kl.mulhi(1.0, 2.0)


# Large real parts, imaginary parts beyond pi (wrapped), -inf where a prefix starts (NaN in JAX,
# whose fold combines -inf with -inf) and inside one, and NaN.
CUMLOGSUMEXP_Z = np.array([[0.5 + 0.5j, -1 + 2j, 3 - 4j, 1e3 + 1j, 1 + 4j, -2 - 7j],
                           [complex(-np.inf, 0), 1, 2j, complex(-np.inf, 0), 3, -1 + 3.1j],
                           [2 - 3j, complex(np.nan, 0), 1, 80 + 0.5j, -80 - 0.5j, 5j]])


def _cumlogsumexp_axis1_reversed(z):
    return kl.cumlogsumexp(z, axis=1, reverse=True)


def _re_cumlogsumexp(z):
    return knp.real(kl.cumlogsumexp(z, axis=1)).sum()


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_cumlogsumexp_of_complex_matches_jax(dtype):
    with kiln.enable_x64(dtype == np.complex128), jax.enable_x64(dtype == np.complex128):
        z = CUMLOGSUMEXP_Z.astype(dtype)
        rtol = 2e-6 if dtype == np.complex64 else 1e-13
        for axis in (0, 1):
            for reverse in (False, True):
                got = kl.cumlogsumexp(z, axis=axis, reverse=reverse)
                want = np.asarray(jl.cumlogsumexp(z, axis=axis, reverse=reverse))
                assert got.dtype == want.dtype
                np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(np.asarray(kiln.jit(_cumlogsumexp_axis1_reversed)(z)),
                                   np.asarray(jl.cumlogsumexp(z, axis=1, reverse=True)),
                                   rtol=rtol, atol=rtol)
        # d out_k / d z_j = exp(z_j - out_k) for j <= k: JAX's derivative (differentiating
        # JAX's associative scan here costs seconds), and kiln's grad of sum(Re out) is its
        # sum over k (holomorphic, in JAX's convention).
        finite = z[:1]
        out = np.asarray(jl.cumlogsumexp(finite.astype(np.complex128), axis=1))[0]
        want = [np.exp(finite[0, j] - out[j:]).sum() for j in range(finite.shape[1])]
        np.testing.assert_allclose(np.asarray(kiln.grad(_re_cumlogsumexp)(finite))[0], want,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (2, 1), (8, 0)])
def test_reduce_precision_is_bit_exact(bits):
    r = np.random.RandomState(0)
    f = (r.randn(500) * 10.0 ** r.randint(-40, 38, 500)).astype(np.float32)
    f[:6] = [np.inf, -np.inf, np.nan, 0, -0.0, 65520]
    same(kl.reduce_precision(f, *bits), jl.reduce_precision(f, *bits))


def test_reduce_precision_float64_is_bit_exact(x64):
    jax.config.update("jax_enable_x64", True)
    try:
        f = np.random.RandomState(0).randn(200) * 10.0 ** np.arange(-100, 100)
        for bits in ((8, 23), (5, 10), (11, 30)):
            same(kl.reduce_precision(f, *bits), jl.reduce_precision(f, *bits))
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), (3, 3), (4, 6), (3, 2, 4), (1, 4, 3),
                                   (3, 1, 5), ()])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_rng_bit_generator_three_fry_bits_are_xlas(shape, dtype):
    key = np.array([7, 9, 0xFFFFFFFF, 3], np.uint32)   # the counter's low word carries
    got = kl.rng_bit_generator(key, shape, dtype, kl.RandomAlgorithm.RNG_THREE_FRY)
    want = jl.rng_bit_generator(key, shape, dtype, jl.RandomAlgorithm.RNG_THREE_FRY)
    for a, b in zip(got, want):
        same(a, b)


def test_rng_bit_generator_default_shapes_and_errors():
    key = np.zeros(4, np.uint32)
    new, bits = kiln.jit(lambda k: kl.rng_bit_generator(k, (3, 4)))(key)
    assert bits.shape == (3, 4) and bits.dtype == np.uint32 and new.shape == (4,)
    assert not np.array_equal(np.asarray(new), key)
    with pytest.raises(TypeError, match="uint32\\[4\\]"):
        kl.rng_bit_generator(np.zeros(2, np.uint32), (2,))
    with pytest.raises(TypeError, match="unsupported dtype float32"):
        kl.rng_bit_generator(key, (2,), np.float32)
    with pytest.raises(ValueError, match="no Philox"):
        kl.rng_bit_generator(key, (2,), algorithm=kl.RandomAlgorithm.RNG_PHILOX)


# ------------------------------------------------------------- implicit differentiation

def _sqrt_root(lax, a):
    def f(x):
        return x * x - a

    def solve(f, x0):
        return lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)
    return lax.custom_root(f, np.float32(1.0), solve, lambda g, y: y / g(1.0))


def kiln_sqrt(a):
    return _sqrt_root(kl, a)


def test_custom_root_value_and_implicit_gradient():
    close(kiln_sqrt(2.0), _sqrt_root(jl, 2.0))
    close(kiln.grad(kiln_sqrt)(2.0), jax.grad(lambda a: _sqrt_root(jl, a))(2.0))
    close(kiln.jit(kiln.grad(kiln_sqrt))(3.0), 0.5 / np.sqrt(3.0))
    eps = 1e-3
    close(kiln.jvp(kiln_sqrt, (2.0,), (1.0,))[1],
          (np.sqrt(2.0 + eps) - np.sqrt(2.0 - eps)) / (2 * eps), rtol=1e-3)


def _linear_solve(lax, np_, A, b):
    def matvec(x):
        return A @ x
    return lax.custom_linear_solve(matvec, b, lambda mv, v: np_.linalg.solve(A, v),
                                   symmetric=True)


def kiln_solve_sum(A, b):
    return _linear_solve(kl, knp, A, b).sum()


def test_custom_linear_solve_value_and_gradients():
    A = np.array([[3.0, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)
    close(_linear_solve(kl, knp, A, b), _linear_solve(jl, jnp, A, b))
    got = kiln.jit(kiln.grad(kiln_solve_sum, argnums=(0, 1)))(A, b)
    want = jax.grad(lambda A, b: _linear_solve(jl, jnp, A, b).sum(), argnums=(0, 1))(A, b)
    for a, w in zip(got, want):
        close(a, w, rtol=1e-5, atol=1e-6)


def test_custom_linear_solve_reverse_mode_uses_transpose_solve():
    A = np.array([[3.0, 1.0], [0.0, 2.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)

    def solve_sum(b, transpose_solve):
        def solve(mv, v):
            return knp.linalg.solve(A, v)
        t = (lambda vm, v: vm(v)) if transpose_solve else None   # A^T v: shows it is used
        return kl.custom_linear_solve(lambda x: A @ x, b, solve, t).sum()
    close(kiln.grad(solve_sum)(b, True), A.T @ np.ones(2))
    close(kiln.jvp(lambda v: solve_sum(v, False), (b,), (b,))[1], np.linalg.solve(A, b).sum())
    # without transpose_solve (an error in JAX), reverse mode differentiates solve itself
    close(kiln.grad(solve_sum)(b, False), np.linalg.solve(A.T, np.ones(2)))


# --------------------------------------------------------- staging, sharding, platforms

def test_scatter_apply_matches_jax_and_differentiates():
    x = np.arange(5.0, dtype=np.float32)
    idx = np.array([[1], [3], [1]], np.int32)
    kdn = kl.ScatterDimensionNumbers((), (0,), (0,))
    jdn = jl.ScatterDimensionNumbers((), (0,), (0,))
    close(kl.scatter_apply(x, idx, lambda v: v * 2 + 1, kdn, update_shape=(3,)),
          jl.scatter_apply(x, idx, lambda v: v * 2 + 1, jdn, update_shape=(3,)))
    grad = kiln.grad(lambda v: kl.scatter_apply(v, idx, knp.square, kdn, update_shape=(3,))
                     .sum())(x)
    close(grad, [1.0, 4.0, 1.0, 6.0, 1.0])   # x**4 at index 1 (selected twice), x**2 at 3


def test_small_names():
    assert kl.platform_dependent(2.0, cpu=lambda v: v + 1, default=lambda v: v) == 3.0
    assert kl.platform_dependent(2.0, tpu=lambda v: v + 1, default=lambda v: v) == 2.0
    np.testing.assert_array_equal(kl.shape_as_value((2, 3)), jl.shape_as_value((2, 3)))
    assert repr(kl.after_all(kl.create_token(), kl.create_token())) == "Token()"
    with pytest.raises(TypeError, match="must be a token"):
        kl.after_all(1.0)
    assert kl.dce_sink(np.ones(2)) is None
    close(kl.stage(1.5), 1.5)
    close(kl.composite(lambda a: a + 1, "my.add")(np.ones(2)), [2.0, 2.0])
    close(kl.with_sharding_constraint(np.ones(3), None), np.ones(3))
    with pytest.raises(RuntimeError, match="requires a non-empty mesh"):
        kl.with_sharding_constraint(np.ones(3), kiln.sharding.PartitionSpec("x"))
    with pytest.raises(TypeError, match="PartitionSpec instances or None, but got 3"):
        kl.with_sharding_constraint(np.ones(3), 3)


def test_pbroadcast_copies_the_source_member():
    out = kiln.pmap(lambda v: kl.pbroadcast(v, "i", 0), axis_name="i")(np.full(1, 4.0, np.float32))
    close(out, [4.0])


def test_precision_forms_are_accepted_and_checked():
    a = np.ones((2, 2), np.float32)
    for p in (None, "highest", kl.Precision.HIGH, ("high", "default"),
              kl.DotAlgorithmPreset.F16_F16_F32, "F32_F32_F32",
              kl.DotAlgorithm(np.float32, np.float32, np.float32)):
        close(kl.dot(a, a, precision=p), 2 * a)
    with pytest.raises(ValueError, match="Precision argument must be one of"):
        kl.dot(a, a, precision=3)
    assert [m.name for m in kl.DotAlgorithmPreset] == [m.name for m in jl.DotAlgorithmPreset]
    assert [(m.name, m.value) for m in kl.AccuracyMode] == \
        [(m.name, m.value) for m in jl.AccuracyMode]
    assert [(m.name, m.value) for m in kl.RandomAlgorithm] == \
        [(m.name, m.value) for m in jl.RandomAlgorithm]
    close(kl.exp(1.0, accuracy=kl.Tolerance(atol=1e-3)), np.e)
    with pytest.raises(ValueError, match="At least one of atol"):
        kl.Tolerance()
    with pytest.raises(NotImplementedError, match="Accuracy 3 not supported"):
        kl.exp(1.0, accuracy=3)


def test_collectives_over_positional_axes():
    # JAX's psum/pmax/pmin take ints as axes of the operand itself, beside named axes
    x = np.arange(24., dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(kiln.lax.psum(x, 1), x.sum(1))
    np.testing.assert_array_equal(kiln.lax.psum(x, (0, -1)), x.sum((0, 2)))
    np.testing.assert_array_equal(kiln.lax.pmax(x, 2), x.max(2))
    np.testing.assert_array_equal(kiln.lax.pmin(x, (1,)), x.min(1))
    np.testing.assert_array_equal(kiln.lax.pmean(x, 1), x.mean(1))
    both = kiln.vmap(lambda r: kiln.lax.psum(r, ("i", 0)), axis_name="i")(x)
    np.testing.assert_array_equal(both, np.broadcast_to(x.sum((0, 1)), (2, 4)))


def test_gamma_grads_stretch_a_rank_0_operand():
    a = np.ones(3, np.float32)
    want = kiln.lax.igamma_grad_a(a, np.full(3, 2.5, np.float32))
    np.testing.assert_allclose(kiln.lax.igamma_grad_a(a, 2.5), want, rtol=1e-6)
    np.testing.assert_allclose(kiln.lax.random_gamma_grad(np.float32(2.5), a),
                               kiln.lax.random_gamma_grad(np.full(3, 2.5, np.float32), a),
                               rtol=1e-6)
    assert kiln.lax.optimization_barrier(2.5).dtype == np.float32
