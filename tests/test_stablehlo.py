"""The StableHLO backend (compiler/backends/stablehlo) against the reference backend.

Every module kiln emits is parsed, compiled and run by a second implementation, JAX's own
XLA CPU compiler through jaxlib (`compile_and_load` on the MLIR text), on the same inputs as
the reference backend: hypothesis over shapes (0 and 1 included) and dtypes for the
elementwise, reduction and structural families, indexing with out-of-bounds indices, dot_general,
sort, control flow, the PRNG goldens (JAX's bits), grad and vmap, and kiln's random programs.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.errors import BackendUnsupportedError
from kiln.compiler.ir.registry import PRIMITIVES
from kiln.compiler.primitives.core import STABLEHLO
from kiln.tree_util import tree_leaves

jax = pytest.importorskip("jax", reason="the second consumer of the StableHLO text is jaxlib")
from jax._src import xla_bridge  # noqa: E402
from jax._src.lib import xla_client  # noqa: E402

from kiln.compiler.backends.stablehlo import lower_module  # noqa: E402
from kiln.compiler.backends.stablehlo.lower_unsupported import UNSUPPORTED  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64_module")
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def run_text(text, args):
    """The module's @main run by XLA's CPU compiler (through jaxlib) on NumPy arrays."""
    backend = xla_bridge.get_backend("cpu")
    device = backend.devices()[0]
    exe = backend.compile_and_load(text, xla_client.DeviceList((device,)),
                                   xla_client.CompileOptions())
    with jax.enable_x64(True):
        buffers = [jax.device_put(np.asarray(a), device) for a in args]
        return [np.asarray(o) for o in exe.execute(buffers)]


def both(f, *args):
    """(StableHLO results run by XLA, reference results) of `f` on `args`."""
    entry = kiln.jit(f, backend="reference").lower(*args)._entry
    module = lower_module(entry.ssa)
    inputs = [np.asarray(a) for a in tree_leaves(args)] + [np.asarray(c) for c in entry.consts]
    assert [a.shape for a in inputs] == [a.shape for a in module.in_avals]
    got = run_text(module.text, inputs)
    want = [np.asarray(w) for w in tree_leaves(kiln.jit(f, backend="reference")(*args))]
    return got, want


def check(f, *args, rtol=2e-6, exact=False):
    got, want = both(f, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if exact or w.dtype.kind not in "fc":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)


shapes = st.sampled_from([(), (0,), (1,), (3,), (2, 3), (1, 4), (3, 0)])
FLOATS = [np.float32, np.float64]
INTS = [np.int8, np.int32, np.int64, np.uint8, np.uint32]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)


# ------------------------------------------------------------------------------ families

@SETTINGS
@given(shape=shapes, dtype=st.sampled_from(FLOATS))
def test_float_elementwise(shape, dtype):
    x, y = values(shape, dtype), values(shape, dtype, 1)
    check(lambda x, y: (jnp.tanh(x) + jnp.exp(x) * y, jnp.sin(x) / (jnp.abs(y) + 1),
                        jnp.maximum(x, y), jnp.floor(x), jnp.round(x), jnp.sign(x),
                        jnp.sqrt(jnp.abs(x)), jnp.arctan2(x, y), jnp.log1p(jnp.abs(y)),
                        x ** 3, x < y, x == y, jnp.where(x > 0, x, y), jnp.clip(x, -1, 1),
                        x.astype(jnp.int32), x.astype(jnp.uint8), x.astype(bool),
                        lax.bitcast_convert_type(x, jnp.int32 if dtype == np.float32
                                                 else jnp.int64)),
          x, y, rtol=2e-5)


@SETTINGS
@given(shape=shapes, dtype=st.sampled_from(INTS))
def test_integer_elementwise(shape, dtype):
    x, y = values(shape, dtype), values(shape, dtype, 1)
    check(lambda x, y: (x + y, x * y, x // (y | 1), x % (y | 1), lax.div(x, y), lax.rem(x, y),
                        x & y, x ^ y, ~x, jnp.sign(x), jnp.maximum(x, y), x >= y,
                        lax.shift_left(x, y), lax.shift_right_logical(x, y),
                        lax.shift_right_arithmetic(x, y), lax.population_count(x),
                        lax.clz(x), x.astype(jnp.float32), x.astype(bool)),
          x, y)


@SETTINGS
@given(shape=shapes)
def test_complex_and_bool_elementwise(shape):
    z, w = values(shape, np.complex64), values(shape, np.complex64, 1)
    b, c = values(shape, np.bool_), values(shape, np.bool_, 1)
    check(lambda z, w, b, c: (z * w, z / w, jnp.abs(z), jnp.conj(z), z.real, jnp.exp(z),
                              z == w, b & c, b | c, ~b, b.astype(jnp.int32),
                              z.astype(jnp.float32), lax.complex(z.real, w.imag)),
          z, w, b, c, rtol=2e-5)


@SETTINGS
@given(shape=st.sampled_from([(0,), (1,), (4,), (2, 3), (3, 1), (2, 0)]),
       dtype=st.sampled_from([np.float32, np.int32, np.uint8]))
def test_reductions_and_cumulative(shape, dtype):
    x = values(shape, dtype)
    last = len(shape) - 1

    def f(x):
        out = (jnp.sum(x, axis=last), jnp.prod(x, axis=0), jnp.max(x, axis=last, initial=0),
               jnp.min(x, axis=0, initial=1), jnp.cumsum(x, axis=last),
               lax.cummax(x, axis=0, reverse=True), jnp.cumprod(x, axis=last))
        if shape[last]:
            out += (jnp.argmax(x, axis=last), jnp.argmin(x, axis=last))
        return out
    check(f, x, rtol=1e-5)


def test_argmax_nan_and_ties_and_logical_reductions():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, 1.0, 0.0]], np.float32)
    check(lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=1), jnp.any(x > 1, axis=1),
                     jnp.all(x > 0, axis=0), lax.cumlogsumexp(x[1]), jnp.logaddexp(x, x)), x)


@SETTINGS
@given(shape=st.sampled_from([(0, 2), (1, 1), (2, 3), (3, 4, 1)]),
       dtype=st.sampled_from([np.float32, np.int64, np.bool_]))
def test_structural(shape, dtype):
    x = values(shape, dtype)
    check(lambda x: (x.T, x.reshape(-1), x[::-1], x[..., ::2], jnp.pad(x, 1),
                     jnp.concatenate([x, x], axis=0), jnp.broadcast_to(x, (2,) + shape),
                     jnp.expand_dims(x, 0), jnp.squeeze(x[:1]) if shape[0] else x,
                     lax.iota(np.int32, 5), jnp.flip(x, axis=-1),
                     lax.pad(x, jnp.zeros((), x.dtype), [(1, -1, 1)] + [(0, 0, 0)] * (len(shape) - 1))),
          x)


def test_indexing_clamps_and_drops():
    x = values((5, 3), np.float32)
    idx = np.array([0, 4, 7, -2, -9], np.int32)
    check(lambda x, i: (x[i], x[i, 1:], x.at[i].add(1.0), x.at[i].set(2.0), x.at[i].mul(3.0),
                        x.at[i].min(0.0), x.at[i].max(0.5), x.at[i, 2].get(mode="fill"),
                        x.at[i].get(mode="fill", fill_value=-1.0),
                        x.at[i].add(1.0, mode="clip"), lax.dynamic_slice(x, (i[2], i[3]), (2, 2)),
                        lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (i[1], i[0])),
                        jnp.take_along_axis(x, jnp.abs(i[:, None]) % 3, axis=1)),
          x, idx)


@SETTINGS
@given(m=st.sampled_from([0, 1, 3]), k=st.sampled_from([0, 1, 4]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.complex64]))
def test_dot_general(m, k, dtype):
    a, b = values((2, m, k), dtype), values((2, k, 3), dtype, 1)
    check(lambda a, b: (a @ b, jnp.einsum("bmk,bkn->mbn", a, b), jnp.tensordot(a, b, axes=([2], [1]))),
          a, b, rtol=1e-5)


def test_mixed_and_boolean_dot():
    a, b = values((3, 4), np.bool_), values((4, 2), np.bool_, 1)
    x = values((3, 4), np.float32)
    check(lambda a, b, x: (jnp.dot(a, b), jnp.dot(x, b.astype(jnp.int32))), a, b, x)


@SETTINGS
@given(shape=st.sampled_from([(0,), (1,), (6,), (3, 4)]),
       dtype=st.sampled_from([np.float32, np.int32, np.uint8, np.complex64]))
def test_sort_and_argsort(shape, dtype):
    x = values(shape, dtype)
    if dtype == np.float32 and x.size > 2:
        x.reshape(-1)[:3] = [np.nan, -0.0, 0.0]
    f = lambda x: (jnp.sort(x, axis=-1), jnp.sort(x, axis=0)) + (
        (jnp.argsort(x, axis=-1), lax.sort((x, jnp.arange(x.size).reshape(x.shape)),
                                           num_keys=1)[1]) if dtype != np.complex64 else ())
    check(f, x, exact=True)


def test_control_flow():
    x = values((3, 4), np.float32)

    def f(x, n):
        y = lax.while_loop(lambda c: jnp.sum(c) < 100.0, lambda c: c * 1.5 + 1.0, jnp.abs(x))
        z = lax.switch(n, [lambda v: v + 1, lambda v: v * 2, lambda v: -v], x)
        w = lax.cond(x[0, 0] > 0, lambda v: v.sum(), lambda v: v.max(), x)
        c, ys = lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(4, x.dtype), x)
        c2, ys2 = lax.scan(lambda c, r: (c * 0.5 + r, c), jnp.ones(4, x.dtype), x, reverse=True)
        i = lax.fori_loop(0, n + 3, lambda i, a: a * 2, 1)
        return y, z, w, c, ys, c2, ys2, i
    for n in (-1, 1, 7):
        check(f, x, np.int32(n), rtol=1e-5)


def test_python_control_flow_on_traced_values():
    def f(x):
        total = 0.0
        for row in range(x.shape[0]):
            if x[row, 0] > 0:
                total = total + x[row].sum()
        while total < 50.0:
            total = total * 2.0 + 1.0
        return total
    check(f, values((3, 2), np.float32), rtol=1e-5)


def test_grad_and_vmap():
    w, x = values((4, 3), np.float32), values((5, 4), np.float32, 1)

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2) + jnp.sum(jax_like_softplus(w))

    def jax_like_softplus(v):
        return jnp.logaddexp(v, 0.0)
    check(kiln.grad(loss), w, x, rtol=1e-5)
    check(kiln.vmap(kiln.grad(loss), in_axes=(None, 0)), w, x[:, None], rtol=1e-5)
    check(kiln.jacfwd(lambda v: jnp.sin(v) * v.sum()), x[0], rtol=1e-5)
    check(kiln.vmap(lambda r: jnp.sort(r)[::-1][:2]), x, exact=True)


def test_custom_jvp_and_checkpoint():
    @kiln.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * t[0]))
    g = kiln.checkpoint(lambda v: jnp.exp(v) * v)
    x = values((4,), np.float32)
    check(kiln.grad(lambda v: f(v).sum() + g(v).sum()), x, rtol=1e-5)


def test_custom_vmap_call_lowers_its_function():
    from kiln.custom_batching import custom_vmap

    @custom_vmap
    def f(x):
        return jnp.sin(x) * 2.0
    f.def_vmap(lambda size, batched, xs: (jnp.cos(xs), batched[0]))
    x = values((4,), np.float32)
    check(f, x, rtol=1e-6)
    check(kiln.grad(lambda v: f(v).sum()), x, rtol=1e-5)


# ------------------------------------------------------------------------------- PRNG

def test_prng_gives_jax_bits():
    """The PRNG compiled to StableHLO and run by XLA gives the bits of JAX's own PRNG."""
    def draws(key):
        k1, k2 = kiln.random.split(key)
        return (kiln.random.uniform(k1, (7,)), kiln.random.normal(k2, (3, 2)),
                kiln.random.randint(key, (5,), 0, 100), kiln.random.bits(k1, (4,)),
                kiln.random.fold_in(key, 3), kiln.random.permutation(k2, 6))
    key = np.asarray(kiln.random.key_data(kiln.random.PRNGKey(42)))
    got, _ = both(draws, key)
    import jax.random as jr
    with jax.enable_x64(True):   # kiln runs under x64 here (the module's fixture)
        jkey = jr.PRNGKey(42)
        j1, j2 = jr.split(jkey)
        want = [jr.uniform(j1, (7,)), jr.normal(j2, (3, 2)), jr.randint(jkey, (5,), 0, 100),
                jr.bits(j1, (4,)), jr.fold_in(jkey, 3), jr.permutation(j2, 6)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))


# ---------------------------------------------------------------------------- fuzzer

def test_random_programs(tmp_path):
    from hypothesis import Phase
    from fuzz_programs import programs
    from test_llvm_fuzz import compare, load

    @settings(max_examples=10, deadline=None, derandomize=True,
              phases=(Phase.explicit, Phase.generate),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(program=programs())
    def run(program):
        got, want = both(load(program.source, tmp_path), *program.inputs)
        compare(program, got, want)
    run()


# ------------------------------------------------------------------ completeness, errors

def test_every_primitive_has_a_stablehlo_rule():
    missing = sorted(name for name, p in PRIMITIVES.items() if p not in STABLEHLO)
    assert not missing, missing
    assert set(UNSUPPORTED) <= set(PRIMITIVES)


def test_module_text_and_types():
    entry = kiln.jit(lambda x: x * 2.0, backend="reference").lower(np.ones((2, 3), np.float32))
    module = lower_module(entry._entry.ssa)
    assert "func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>)" in module.text
    assert [a.shape for a in module.out_avals] == [(2, 3)]
    assert module.out_avals[0].dtype == np.float32


def test_print_is_a_located_error():
    def f(x):
        print(x)
        return x + 1
    entry = kiln.jit(f, backend="reference").lower(np.ones(3, np.float32))._entry
    with pytest.raises(BackendUnsupportedError) as info:
        lower_module(entry.ssa)
    message = str(info.value)
    assert "'debug_print'" in message and "host callback" in message
    assert "print(x)" in message and "llvm or reference backend" in message


def test_as_text_stablehlo_on_lowered_and_compiled():
    f = kiln.jit(lambda x: jnp.cos(x).sum() * x)
    lowered = f.lower(np.ones(3, np.float32))
    for text in (lowered.as_text("stablehlo"), lowered.compile().as_text("stablehlo")):
        assert "func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>)" in text
        assert run_text(text, [np.arange(3, dtype=np.float32)])[0].shape == (3,)
    with pytest.raises(ValueError, match="unknown dialect 'hlo'"):
        lowered.as_text("hlo")


def test_special_functions_and_rarer_elementwise():
    x = values((7,), np.float32)

    def f(x):
        p, s = jnp.abs(x) + 0.5, jnp.tanh(x) * 0.9
        return (jnp.tan(s), jnp.arcsin(s), jnp.arccos(s), jnp.arctan(x), jnp.sinh(x),
                jnp.cosh(x), jnp.arcsinh(x), jnp.arccosh(p + 1), jnp.arctanh(s), lax.erf(x),
                lax.erfc(x), lax.erf_inv(s), lax.lgamma(p), lax.digamma(p),
                jnp.nextafter(x, 0.0 * x), jnp.exp2(x), jnp.cbrt(x), lax.rsqrt(p),
                lax.logistic(x), jnp.isfinite(x / 0.0), jnp.expm1(x), lax.round(x, 1),
                lax.round(x, 0), lax.integer_pow(x, -3), lax.pow(x, 2),
                lax.select_n(jnp.arange(7) % 3, x, -x, 2 * x), lax.clamp(np.float32(-1), x, np.float32(1)),
                lax.cummin(x), lax.cumlogsumexp(x, reverse=True), jnp.square(x))
    check(f, x, rtol=1e-5)


def test_unsigned_bool_complex_and_half():
    i, b = values((6,), np.uint32), values((6,), np.bool_)
    check(lambda i, b: (lax.population_count(i), jnp.sign(i), jnp.cumsum(i),
                        jnp.zeros(4, bool).at[jnp.array([0, 2, 2])].max(True),
                        jnp.ones(4, bool).at[jnp.array([1, 1])].min(False),
                        jnp.max(b), jnp.min(b), jnp.argmax(b), jnp.sum(b),
                        i.astype(jnp.float32), (-1.5 * jnp.ones(3)).astype(jnp.uint8),
                        jnp.array([3e9, -3e9, np.nan], jnp.float32).astype(jnp.int32)), i, b)
    z = values((5,), np.complex64)
    check(lambda z: (jnp.sum(z), jnp.prod(z), jnp.cumsum(z), jnp.sqrt(z), jnp.log(z),
                     jnp.sign(z), z ** 2, lax.pow(z, z), jnp.tanh(z), z.astype(bool),
                     z.astype(jnp.complex128), jnp.conj(z.real)), z, rtol=1e-5)
    h = values((5,), np.float16)
    check(lambda h: (h * 2 + 1, jnp.exp(h), h.astype(jnp.float32), jnp.sum(h)), h, rtol=1e-3)


def test_reverse_mode_tapes_are_a_located_error():
    def f(x):
        return lax.while_loop(lambda c: c < 10.0, lambda c: c * 1.5, x)
    entry = kiln.jit(kiln.grad(f), backend="reference").lower(np.float32(1.0))._entry
    with pytest.raises(BackendUnsupportedError) as info:
        lower_module(entry.ssa)
    message = str(info.value)
    assert "'tape_" in message and "static shapes" in message and "lax.scan" in message


SOURCE = '''import kiln.numpy as jnp
W = jnp.arange(6.0, dtype=jnp.float32).reshape(3, 2)


def f(x):
    return jnp.tanh(x @ W).sum()
'''


def test_kiln_compile_target_stablehlo(tmp_path, capsys):
    import json
    from kiln.cli.commands import main
    source = tmp_path / "model.py"
    source.write_text(SOURCE)
    out = tmp_path / "out"
    code = main(["compile", f"{source}:f", "--arg", "f32[4,3]", "--grad",
                     "--target", "stablehlo", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"]["kind"] == "stablehlo"
    (fn,) = manifest["functions"]
    assert fn["main_inputs"] == [{"dtype": "float32", "shape": [4, 3]},
                                 {"dtype": "float32", "shape": [3, 2]}]
    assert set(manifest["files"]) == {"grad_f.ssa.py", "grad_f.simplified.ssa.py",
                                      "grad_f.constants.npz", "grad_f.mlir"}
    x = values((4, 3), np.float32)
    with np.load(out / "grad_f.constants.npz") as saved:
        constants = [saved["arr_0"]]
    (got,) = run_text((out / "grad_f.mlir").read_text(), [x] + constants)
    w = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    want = (1 - np.tanh(x @ w) ** 2) @ w.T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)   # tanh saturates: cancellation
