"""`kiln.jit(f, backend="pjrt")`: kiln's StableHLO compiled and run by a real PJRT plug-in.

The plug-in is XLA's CPU plug-in (`xla-cpu-pjrt`, the `pjrt` extra that `make test` installs),
or the one `KILN_PJRT_PLUGIN` names (`make gpu-check` points it at JAX's CUDA plug-in). It is
loaded once per session. Every program runs through `jit(backend="pjrt")` and through the
reference backend on the same inputs: hypothesis over shapes (0 and 1 included) and dtypes for
the elementwise, reduction, structural, indexing, dot_general and sort families, eigh and svd
(up to the vectors' signs), hessenberg, schur and eig (up to the eigenvalues' order and the
vectors' phases), control flow, grad and vmap, the PRNG against JAX
0.10.2's recorded bits (tests/goldens), and the random-program fuzzer. Also: results stay on
the device between calls, jit follows arguments put on a PJRT device, and the error paths (a
primitive the lowering refuses, a module the plug-in cannot parse) are clear errors, never a
crash.
"""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.pjrt import api, client as pjrt, plugins
from kiln.compiler.errors import BackendUnsupportedError
from kiln.tree_util import tree_leaves
from kiln import fastcall

from fuzz_programs import programs
from test_llvm_fuzz import absolute_magnitude, compare, load
from test_random import GOLDEN, call, expected, golden_key

PLUGINS = plugins.discover()
pytestmark = [pytest.mark.usefixtures("x64_module", "device"),
              pytest.mark.skipif(not PLUGINS, reason="no PJRT plug-in (pip install -e "
                                 "'.[pjrt]'; make test installs xla-cpu-pjrt)")]
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="session")
def device():
    """The device backend="pjrt" compiles for (the plug-in loaded once per session)."""
    return kiln.devices("pjrt")[0]


@pytest.fixture(params=["native", "python"])
def fast_path(request, monkeypatch):
    """jit's PJRT fast path as native code (compiler/backends/pjrt/entry.py and methods.py),
    or as its Python definition (runtime/pjrt.py's `_python_call`, the Python
    `block_until_ready`, `__call__` and `Buffer.__del__`)."""
    from kiln.compiler.backends.pjrt import methods
    if request.param == "python":
        methods.uninstall()
        monkeypatch.setattr(kiln.pjrt, "NATIVE_ENTRY", [False])
    return request.param


def on_device(x, device):
    return type(x._value.data) is pjrt.Buffer and x.device == device


def check(f, *args, rtol=2e-6, exact=False):
    """`f` through backend="pjrt" against the reference backend; every result is an Array left
    on the PJRT device."""
    got = tree_leaves(kiln.jit(f, backend="pjrt")(*args))
    want = [np.asarray(w) for w in tree_leaves(kiln.jit(f, backend="reference")(*args))]
    assert len(got) == len(want)
    device = kiln.devices("pjrt")[0]
    for g, w in zip(got, want):
        assert on_device(g, device)
        g = np.asarray(g)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (g.shape, g.dtype, w.shape, w.dtype)
        if exact or w.dtype.kind not in "fc":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)


def sample(shape, dtype, seed=0):
    """Values of `dtype`: normal floats (complex: both parts), coin-flip bools, integers within
    +-100 (of the type's range)."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind in "fc":
        parts = rng.standard_normal((2,) + shape) * 3
        return (parts[0] + 1j * parts[1] if kind == "c" else parts[0]).astype(dtype)
    if kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    low, high = max(np.iinfo(dtype).min, -100), min(np.iinfo(dtype).max, 100)
    return rng.integers(low, high, shape).astype(dtype)


SHAPES = st.sampled_from([(), (0,), (1,), (4,), (2, 3), (3, 0), (1, 5)])


# ------------------------------------------------------------------------------ families

@SETTINGS
@given(shape=SHAPES, dtype=st.sampled_from([np.float32, np.float64, np.float16]))
def test_float_elementwise(shape, dtype):
    x, y = sample(shape, dtype), sample(shape, dtype, 1)
    check(lambda x, y: (jnp.exp(x) - y * jnp.cos(x), jnp.log(jnp.abs(y) + 1), x / (y * y + 1),
                        jnp.minimum(x, y), jnp.ceil(x), jnp.rint(x), jnp.sign(y), x ** 2,
                        jnp.arctan2(y, x), jnp.where(x < y, y, x), x != y, jnp.tanh(x),
                        x.astype(jnp.int16), x.astype(jnp.uint32), x.astype(bool),
                        lax.erf(x), jnp.arcsinh(y)),
          x, y, rtol=2e-3 if dtype == np.float16 else 2e-5)


@SETTINGS
@given(shape=SHAPES, dtype=st.sampled_from([np.int8, np.int16, np.int64, np.uint8, np.uint32]))
def test_integer_elementwise(shape, dtype):
    x, y = sample(shape, dtype), sample(shape, dtype, 1)
    check(lambda x, y: (x - y, x * y, x // (y | 1), x % (y | 1), lax.rem(x, y), x | y, ~x,
                        jnp.abs(x), jnp.minimum(x, y), x < y, lax.shift_left(x, y),
                        lax.shift_right_arithmetic(x, y), lax.shift_right_logical(x, y),
                        lax.population_count(x), lax.clz(x), x.astype(jnp.float64)),
          x, y)


@SETTINGS
@given(shape=SHAPES, dtype=st.sampled_from([np.complex64, np.complex128]))
def test_complex_and_bool_elementwise(shape, dtype):
    zw, bc = sample((2,) + shape, dtype), sample((2,) + shape, np.bool_)
    check(lambda zw, bc: (zw[0] + zw[1], zw[0] * zw[1], jnp.abs(zw), zw.imag, jnp.exp(zw),
                          jnp.sqrt(zw), zw[0] != zw[1], bc[0] ^ bc[1], bc[0] & ~bc[1],
                          bc.astype(jnp.float32), jnp.conj(zw), zw.astype(bool)),
          zw, bc, rtol=2e-5)


@SETTINGS
@given(shape=st.sampled_from([(0,), (1,), (5,), (3, 2), (2, 1), (0, 3)]),
       dtype=st.sampled_from([np.float64, np.int32, np.uint8, np.bool_]))
def test_reductions_and_cumulative(shape, dtype):
    x = sample(shape, dtype)
    last = len(shape) - 1

    def f(x):
        out = (jnp.sum(x, axis=0), jnp.max(x, axis=last, initial=0), jnp.any(x, axis=last),
               jnp.cumsum(x, axis=0), lax.cummin(x, axis=last, reverse=True), jnp.sum(x))
        if dtype != np.bool_:
            out += (jnp.prod(x, axis=last), jnp.min(x, axis=0, initial=1),
                    jnp.cumprod(x, axis=0))
        if shape[last]:
            out += (jnp.argmin(x, axis=last), jnp.argmax(x, axis=last))
        return out
    check(f, x, rtol=1e-6)


@SETTINGS
@given(shape=st.sampled_from([(0, 3), (1, 1), (3, 2), (2, 1, 4)]),
       dtype=st.sampled_from([np.float32, np.int8, np.bool_, np.complex64]))
def test_structural(shape, dtype):
    x = sample(shape, dtype)
    check(lambda x: (jnp.transpose(x), x.ravel(), x[1:], x[..., ::-2], jnp.pad(x, (0, 2)),
                     jnp.stack([x, x], axis=-1), jnp.broadcast_to(x, (3,) + shape),
                     x[None], jnp.roll(x, 1, axis=0), lax.iota(np.int64, 3),
                     jnp.tile(x, (1,) * (len(shape) - 1) + (2,)),
                     lax.pad(x, jnp.zeros((), x.dtype), [(0, 1, 2)] * len(shape))),
          x)


@SETTINGS
@given(rows=st.sampled_from([1, 4]), dtype=st.sampled_from([np.float64, np.int32]))
def test_indexing_out_of_bounds(rows, dtype):
    x = sample((rows, 3), dtype)
    i = np.array([0, rows, -1, 9, -7], np.int32)
    check(lambda x, i: (x[i], x[i, 2], x.at[i].add(1), x.at[i].set(5), x.at[i, 1].max(0),
                        x.at[i].get(mode="fill", fill_value=-2), x.at[i].mul(2, mode="clip"),
                        lax.dynamic_slice(x, (i[3], i[2]), (1, 2)),
                        lax.dynamic_update_slice(x, jnp.zeros((1, 2), x.dtype), (i[1], i[3]))),
          x, i)


@SETTINGS
@given(m=st.sampled_from([0, 1, 2]), k=st.sampled_from([0, 1, 3]),
       dtype=st.sampled_from([np.float32, np.float64, np.int64, np.complex128, np.bool_]))
def test_dot_general(m, k, dtype):
    a, b = sample((3, m, k), dtype), sample((3, k, 2), dtype, 1)
    check(lambda a, b: (jnp.matmul(a, b), jnp.einsum("bmk,bkn->bnm", a, b),
                        lax.dot_general(a, b, (((2,), (1,)), ((), ())))), a, b, rtol=1e-5)


@SETTINGS
@given(shape=st.sampled_from([(0,), (1,), (7,), (2, 5)]),
       dtype=st.sampled_from([np.float64, np.int8, np.uint32]))
def test_sort(shape, dtype):
    x = sample(shape, dtype)
    if dtype == np.float64 and x.size >= 4:
        x.reshape(-1)[:4] = [np.nan, 0.0, -0.0, np.inf]
    check(lambda x: (jnp.sort(x), jnp.argsort(x, axis=0), jnp.sort(x, axis=0, descending=True),
                     lax.sort((x, -jnp.ones(x.shape, np.int32)), num_keys=1)[1]),
          x, exact=True)


def test_control_flow():
    x = sample((4, 3), np.float32)

    def f(x, n):
        y = lax.while_loop(lambda c: jnp.max(c) < 30.0, lambda c: c * 2.0 + 0.5, jnp.abs(x))
        z = lax.switch(n, [jnp.sin, jnp.cos, lambda v: v * v], x)
        w = lax.cond(n > 0, lambda v: v.min(), lambda v: v.mean(), x)
        c, ys = lax.scan(lambda c, r: (c * r + 1.0, c - r), jnp.ones(3, x.dtype), x,
                         reverse=True)
        total = 0.0
        for row in x:   # Python control flow on traced values
            if row[0] > 0:
                total = total + row.sum()
        return y, z, w, c, ys, lax.fori_loop(0, n + 2, lambda i, a: a + i, 0), total
    for n in (-2, 0, 1, 5):
        check(f, x, np.int32(n), rtol=1e-5)


def test_grad_and_vmap():
    w, x = sample((3, 2), np.float32), sample((6, 3), np.float32, 1)

    def loss(w, x):
        return jnp.mean(jax_nn_gelu(x @ w)) + jnp.sum(w * w)

    def jax_nn_gelu(v):
        return 0.5 * v * (1 + jnp.tanh(0.8 * (v + 0.04 * v ** 3)))
    check(kiln.grad(loss), w, x, rtol=1e-5)
    check(kiln.vmap(kiln.value_and_grad(loss), in_axes=(None, 0)), w, x[:, None], rtol=1e-5)
    check(kiln.jacrev(lambda v: jnp.cumsum(v) * v[0]), x[0], rtol=1e-5)
    check(kiln.grad(kiln.checkpoint(lambda v: jnp.sum(jnp.exp(v) * v))), x[1], rtol=1e-5)


# ------------------------------------------------------------------------------- PRNG

def test_prng_gives_jax_bits():
    """Samplers compiled through the plug-in, the key an argument, give JAX 0.10.2's bits
    (tests/goldens: the cases test_random.py checks eagerly and under the llvm backend,
    recorded without x64)."""
    with kiln.enable_x64(False):
        prng_cases()


def prng_cases():
    for fn in ("split", "fold_in", "uniform", "normal", "randint", "bits", "permutation",
               "bernoulli", "categorical", "truncated_normal"):
        cases = [c for c in GOLDEN["cases"] if c["fn"] == fn and "error" not in c
                 and c["key"] in GOLDEN["keys"]][:2]
        assert cases, fn
        for case in cases:
            out = kiln.jit(lambda k: call(case, key=k), backend="pjrt")(golden_key(case["key"]))
            np.testing.assert_array_equal(np.asarray(out), expected(case["result"]),
                                          err_msg=json.dumps(case)[:200])


# ---------------------------------------------------------------------------- fuzzer

@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pjrt_fuzz_programs")


@settings(max_examples=10, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate),   # no shrinking: a failure shows as drawn
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(program=programs())
def test_random_programs(program, program_dir):
    prog = load(program.source, program_dir)
    want = [np.asarray(w) for w in
            tree_leaves(kiln.jit(prog, backend="reference")(*program.inputs))]
    got = [np.asarray(g) for g in tree_leaves(kiln.jit(prog, backend="pjrt")(*program.inputs))]
    compare(program, got, want, lambda: absolute_magnitude(program, program_dir))


# --------------------------------------------------------------- data on the device

def _step(w, x):
    return w - 0.1 * x * jnp.tanh(w), jnp.sum(w)


def test_arrays_stay_on_the_device(device):
    w, x = np.linspace(-1, 1, 6, dtype=np.float32), np.ones(6, np.float32)
    step = kiln.jit(_step, backend="pjrt")
    a = kiln.device_put(w, device)
    for _ in range(3):
        a, s = step(a, x)
        assert on_device(a, device) and on_device(s, device)
    ref = w
    for _ in range(3):
        ref = ref - np.float32(0.1) * x * np.tanh(ref)
    np.testing.assert_allclose(np.asarray(a), ref, rtol=1e-6)
    assert step._cache_size() == 1   # compiled once for the signature


def test_repeated_calls_take_the_fast_path_and_do_not_wait(device, fast_path):
    f = kiln.jit(lambda x, y: x * y + 1.0, backend="pjrt")
    x = kiln.device_put(np.full(5, 0.5, np.float32), device)
    y = f(x, x)
    assert f._fast is not None   # installed by the first call
    assert (type(f._fast).__name__ == "builtin_function_or_method") == (fast_path == "native")
    (entry,) = f._cache.values()
    for _ in range(20):   # each result is passed on before anything awaited it
        y = f(y, x)
        assert on_device(y, device)
    assert y.block_until_ready() is y
    ref = np.full(5, 0.5 * 0.5 + 1, np.float32)
    for _ in range(20):
        ref = ref * np.float32(0.5) + np.float32(1)
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-6)
    dropped = f(y, x)   # released before it was awaited
    del dropped
    # what the fast path does not take runs the ordinary way, with the right result
    z = kiln.device_put(np.full(3, 2.0, np.float32), device)
    np.testing.assert_allclose(np.asarray(f(z, z)), np.full(3, 5.0))
    np.testing.assert_allclose(np.asarray(f(np.ones(3, np.float32), z)), np.full(3, 3.0))


def test_a_new_function_reuses_the_native_entry_object(device, monkeypatch):
    """Two jitted functions of one form (argument ranks, outputs) share the entry's native
    object: it is compiled or read from the disk cache and loaded once per process."""
    from kiln.compiler.backends.llvm import rtlib
    monkeypatch.setattr(kiln.pjrt, "NATIVE_ENTRY", [True])
    x = kiln.device_put(np.full(4, 0.5, np.float32), device)
    kiln.jit(lambda a, b: a * b, backend="pjrt")(x, x)   # the form's object, loaded once
    loads = []
    real = rtlib.load_library
    monkeypatch.setattr(rtlib, "load_library",
                        lambda name, *a, **k: loads.append(name) or real(name, *a, **k))
    for c in (1.0, 2.0, 3.0):
        f = kiln.jit(lambda a, b, c=c: a * b + c, backend="pjrt")
        f(x, x)
        assert type(f._fast).__name__ == "builtin_function_or_method"
        np.testing.assert_allclose(np.asarray(f(x, x)), np.full(4, 0.25 + c))
    assert not [name for name in loads if name.startswith("kiln.pjrt.entry.")]


@pytest.mark.parametrize("native", [True, False])
def test_the_fast_path_function_runs_or_misses(device, native, monkeypatch):
    """The native builtin (compiler/backends/pjrt/entry.py) and its Python definition take
    and refuse the same calls, and give the same results."""
    monkeypatch.setattr(kiln.pjrt, "NATIVE_ENTRY", [native])
    f = kiln.jit(lambda x, y: x * y + 1.0, backend="pjrt")
    x = kiln.device_put(np.full(5, 0.5, np.float32), device)
    z = kiln.device_put(np.full(3, 2.0, np.float32), device)
    f(x, x)
    (entry,) = f._cache.values()
    outputs = fastcall.Outputs(entry, fastcall._rebuild(entry, None))
    direct = entry.executable.array_call((x, x), (False, False), outputs, None)
    assert (type(direct).__name__ == "builtin_function_or_method") == native
    out = direct((x, x))
    assert type(out) is kiln.Array and not out.weak_type and on_device(out, device)
    np.testing.assert_array_equal(np.asarray(out), np.full(5, 1.25, np.float32))
    weak = kiln.device_put(np.ones(5, np.float32), device)
    weak.weak_type = True
    for miss in [(x, np.ones(5, np.float32)), (z, z), (), (x,), (x, x, x), (x, weak),
                 (x, kiln.device_put(np.ones(5, np.int32), device)), (x, jnp.ones(5)),
                 (x, kiln.device_put(np.ones((5, 1), np.float32), device)), (x, 1.0)]:
        assert direct(miss) is fastcall.MISS
    assert entry.executable.array_call((np.ones(5, np.float32),), (False,), outputs,
                                       None) is None
    if native:
        for miss in [(), ((x, x), (x, x)), ([x, x],)]:   # what jit never passes
            assert direct(*miss) is fastcall.MISS
        odd = kiln.device_put(np.ones(5, np.float32), device)._value.data
        handle, odd.handle = odd.handle, 2 ** 70   # an int no pointer holds: a miss, no error
        try:
            assert direct((x, kiln.Array(kiln.compiler.backends.cuda.device.DeviceBuffer(
                odd, x._value.layer)))) is fastcall.MISS
        finally:
            odd.handle = handle


def test_the_native_fast_path_keeps_reference_counts_exact(device):
    """100k calls through the builtin leave every object they touch with the references it
    had, and allocate nothing that stays (results dropped, or kept and passed back in; a
    pytree of outputs; a plug-in error)."""
    import gc
    import sys
    f = kiln.jit(lambda x, y: (x * y + 1.0, y), backend="pjrt")
    x = kiln.device_put(np.ones(16, np.float32), device)
    f(x, x)
    assert type(f._fast).__name__ == "builtin_function_or_method"
    buffer = x._value.data
    watched = [x, x._value, buffer, buffer.handle, buffer.shape, buffer.dtype, buffer.client,
               buffer.device, x._value.layer, f._fast, kiln.Array, np.dtype(np.float32)]
    y = f(x, x)[0]
    for _ in range(1000):
        y = f(y, x)[1]
    before = [sys.getrefcount(o) for o in watched]
    blocks = sys.getallocatedblocks()
    for _ in range(50_000):
        f(x, x)
        y = f(y, x)[1]
    y.block_until_ready()
    assert [sys.getrefcount(o) for o in watched] == before
    assert sys.getallocatedblocks() - blocks < 100
    counts = sys.getrefcount(y), sys.getrefcount(y._value), sys.getrefcount(y._value.data)
    assert counts == (2, 2, 2)   # y's, and getrefcount's argument
    # a pytree of outputs (made by its unflatten) and a plug-in error, as often
    g = kiln.jit(lambda x: {"a": x + 1.0, "b": [x]}, backend="pjrt")
    g(x)
    gone = kiln.device_put(np.ones(16, np.float32), device)
    gone._value.data.client.api.call("Buffer_Delete", api.args(
        api.Buffer, buffer=gone._value.data.handle))
    failed = []
    gc.collect()
    before = [sys.getrefcount(o) for o in watched]
    blocks = sys.getallocatedblocks()
    for _ in range(10_000):
        out = g(x)
        try:
            g(gone)
        except api.PjrtError as e:
            failed.append(e.code)
    assert sorted(out) == ["a", "b"] and type(out["b"][0]) is kiln.Array
    assert failed == ["INVALID_ARGUMENT"] * 10_000
    del out, failed
    gc.collect()
    assert [sys.getrefcount(o) for o in watched] == before
    assert sys.getallocatedblocks() - blocks < 100


FACTOR = np.float32(2.0)


def _scaled_by_global(x):
    return x * FACTOR


def test_the_fast_path_checks_the_globals_read(device, fast_path):
    global FACTOR
    f = kiln.jit(_scaled_by_global, backend="pjrt")
    x = kiln.device_put(np.ones(3, np.float32), device)
    f(x)
    assert np.asarray(f(x)).tolist() == [2.0] * 3
    FACTOR = np.float32(3.0)
    try:
        assert np.asarray(f(x)).tolist() == [3.0] * 3   # re-specialised, not the old program
    finally:
        FACTOR = np.float32(2.0)


def test_the_native_call_makes_jits_checks(device, fast_path):
    """A call takes the fast path only where `Jitted.__call__` would: not with keywords,
    nor under disable_jit, no_execution or debug_nans."""
    f = kiln.jit(lambda x, y: jnp.sqrt(x * y - 2.0), backend="pjrt")
    x = kiln.device_put(np.ones(4, np.float32), device)
    f(x, x)
    native = type(type(f).__dict__.get("__call__")).__name__ == "method_descriptor"
    assert native == (fast_path == "native")
    assert np.isnan(np.asarray(f(x, x))).all() and np.isnan(np.asarray(f(x, y=x))).all()
    call = type(f).__call__   # the method itself, as well as the type's call slot
    assert np.isnan(np.asarray(call(f, x, x))).all()
    assert np.isnan(np.asarray(call(f, x, y=x))).all()
    with pytest.raises(TypeError):
        f(x)
    with kiln.disable_jit():   # each operation run on the device as a jit of its own
        out = f(x, x)
        assert out.device == device and np.isnan(np.asarray(out)).all()
    with kiln.no_execution(True):
        with pytest.raises(RuntimeError, match="no_execution"):
            f(x, x)
    with kiln.debug_nans(True):
        with pytest.raises(FloatingPointError, match="invalid value"):
            f(x, x)
    assert np.isnan(np.asarray(f(x, x))).all()


def test_fast_path_results_are_freed_once(device, monkeypatch, fast_path):
    f = kiln.jit(lambda x: (x + 1.0, x * 2.0), backend="pjrt")
    x = kiln.device_put(np.ones(4, np.float32), device)
    f(x)
    native = type(pjrt.Buffer.__dict__["__del__"]).__name__ == "method_descriptor"
    assert native == (fast_path == "native")
    if native:   # the native __del__ destroys the buffer once, then the Python one does nothing
        a, b = f(x)
        buffer = a._value.data
        pjrt.Buffer.__del__(buffer)
        assert buffer.handle is None
        pjrt.Buffer.__del__(buffer)
        assert buffer.handle is None
        np.testing.assert_array_equal(np.asarray(b), np.full(4, 2.0))
        return
    client = x._value.data.client
    destroyed = []
    destroy = client.native_destroy
    monkeypatch.setattr(client, "native_destroy",
                        lambda table, handle: destroyed.append(handle) or destroy(table, handle))
    a, b = f(x)
    handles = [a._value.data.handle, b._value.data.handle]
    np.testing.assert_array_equal(np.asarray(b), np.full(4, 2.0))
    del a, b
    assert sorted(destroyed) == sorted(handles)
    f(x)   # dropped before it was awaited
    assert len(destroyed) == 4


def test_an_execution_error_on_the_fast_path_has_the_plugins_message(device, fast_path):
    f = kiln.jit(lambda x: x + 1.0, backend="pjrt")
    x = kiln.device_put(np.ones(4, np.float32), device)
    f(x)
    gone = kiln.device_put(np.ones(4, np.float32), device)
    buffer = gone._value.data
    buffer.client.api.call("Buffer_Delete", api.args(api.Buffer, buffer=buffer.handle))
    with pytest.raises(api.PjrtError, match="INVALID_ARGUMENT.*deleted or donated"):
        f(gone)
    np.testing.assert_array_equal(np.asarray(f(x)), np.full(4, 2.0))


def test_calls_from_several_threads_at_once(device, fast_path):
    from concurrent.futures import ThreadPoolExecutor
    f = kiln.jit(lambda x: x * 2.0 + 1.0, backend="pjrt")
    inputs = [kiln.device_put(np.full(8, float(i), np.float32), device) for i in range(4)]
    f(inputs[0])

    def run(i):
        return [float(np.asarray(f(inputs[i]))[0]) for _ in range(100)]
    with ThreadPoolExecutor(4) as pool:
        for i, got in enumerate(pool.map(run, range(4))):
            assert got == [2.0 * i + 1.0] * 100
    assert np.asarray(kiln.jit(lambda: jnp.ones(3), backend="pjrt")()).tolist() == [1.0] * 3


def test_a_deleted_argument_is_an_error_on_the_fast_path(device, fast_path):
    f = kiln.jit(lambda x: x + 1.0, backend="pjrt")
    x = kiln.device_put(np.ones(4, np.float32), device)
    f(x)
    gone = kiln.device_put(np.ones(4, np.float32), device)
    gone._value.data.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f(gone)
    np.testing.assert_array_equal(np.asarray(f(x)), np.full(4, 2.0))


def test_jit_follows_arrays_put_on_a_pjrt_device(device):
    others = [d for d in kiln.devices("pjrt") if d != device]
    target = others[0] if others else device
    step = kiln.jit(_step)
    a = kiln.device_put(np.ones(6, np.float32), target)
    b, s = step(a, np.ones(6, np.float32))
    assert on_device(b, target) and on_device(s, target)
    np.testing.assert_allclose(np.asarray(b), 1 - 0.1 * np.tanh(1.0), rtol=1e-6)
    host, _ = step(np.ones(6, np.float32), np.ones(6, np.float32))   # host data: the llvm backend
    assert isinstance(host._value, np.ndarray)


SCALE = jnp.arange(6.0, dtype=jnp.float32)


def _scaled(x):
    return x * SCALE


def test_constants_are_put_on_the_device_once(device):
    f = kiln.jit(_scaled, backend="pjrt")
    x = np.ones(6, np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), np.arange(6.0))
    (entry,) = f._cache.values()
    assert entry.consts == []   # the program holds them
    (held,) = entry.executable._constants_on(device)
    assert type(held.data) is pjrt.Buffer and held.data.device.id == device.id
    np.testing.assert_array_equal(np.asarray(f(kiln.device_put(x, device))), np.arange(6.0))
    assert entry.executable._constants_on(device)[0] is held
    others = [d for d in kiln.devices("pjrt") if d != device]
    if others:   # arguments on another device: the constants are put there too
        y = f(kiln.device_put(x, others[0]))
        assert on_device(y, others[0])
        np.testing.assert_array_equal(np.asarray(y), np.arange(6.0))


def test_jit_runs_on_a_pjrt_default_device(device):
    target = kiln.devices("pjrt")[-1]
    step = kiln.jit(_step)
    with kiln.default_device(target):
        b, s = step(np.ones(6, np.float32), np.ones(6, np.float32))
        assert on_device(b, target) and on_device(s, target)
    np.testing.assert_allclose(np.asarray(b), 1 - 0.1 * np.tanh(1.0), rtol=1e-6)
    host, _ = step(np.ones(6, np.float32), np.ones(6, np.float32))
    assert isinstance(host._value, np.ndarray)


def test_lowered_and_compiled_text(device):
    x = np.ones((2, 3), np.float32)
    compiled = kiln.jit(lambda x: jnp.sin(x).sum(0), backend="pjrt").lower(x).compile()
    assert "func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<3xf32>)" in \
        compiled.as_text()
    np.testing.assert_allclose(np.asarray(compiled(x)), np.sin(x).sum(0), rtol=1e-6)
    with pytest.raises(ValueError, match="shown as StableHLO"):
        compiled.as_text("asm")


SOURCE = '''import kiln.numpy as jnp
W = jnp.linspace(-1.0, 1.0, 6, dtype=jnp.float32).reshape(3, 2)


def f(x):
    return jnp.sin(x @ W).sum()
'''


def test_aot_load_runs_a_stablehlo_directory(device, tmp_path, capsys):
    from kiln import aot
    from kiln.cli.commands import main
    (tmp_path / "model.py").write_text(SOURCE)
    out = tmp_path / "out"
    assert main(["compile", f"{tmp_path / 'model.py'}:f", "--arg", "f32[4,3]", "--grad",
                 "--target", "stablehlo", "-o", str(out)]) == 0, capsys.readouterr().err
    grad_f = aot.load(out).grad_f
    x = sample((4, 3), np.float32)
    w = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2)
    want = np.cos(x @ w) @ w.T
    got = grad_f(x)
    assert on_device(got, device)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    again = grad_f(kiln.device_put(x, device))   # an argument already on the device
    np.testing.assert_allclose(np.asarray(again), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="expected f32\\[4,3\\]"):
        grad_f(np.ones((2, 3), np.float32))


# ------------------------------------------------------------------------------ eigh and svd

MATRIX_BATCHES = st.sampled_from([(), (0,), (1,), (3,), (2, 2)])
INEXACT = st.sampled_from([np.float32, np.float64, np.complex64, np.complex128])


def _both(f, *args):
    got = [np.asarray(g) for g in tree_leaves(kiln.jit(f, backend="pjrt")(*args))]
    want = [np.asarray(w) for w in tree_leaves(kiln.jit(f, backend="reference")(*args))]
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), (g.shape, g.dtype, w.shape, w.dtype)
    return got, want


def _phases(got, want):
    """The unit factors (signs, or phases when complex) that turn got's columns into want's:
    the reference's vectors are LAPACK's, defined up to such a factor only."""
    dots = np.sum(np.conj(got) * want, axis=-2, keepdims=True)
    size = np.abs(dots)
    return np.where(size == 0, 1, dots / np.where(size == 0, 1, size))


def _close(got, want, dtype, scale=1.0):
    tol = (2e-5 if dtype in (np.float32, np.complex64) else 1e-12) * scale
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _orthonormal(q, dtype):
    eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
    _close(np.conj(np.swapaxes(q, -1, -2)) @ q, eye, dtype, 10)


@settings(SETTINGS, max_examples=12)
@given(MATRIX_BATCHES, st.sampled_from([0, 1, 2, 5]), st.booleans(), INEXACT)
def test_eigh_by_jacobi_matches_the_reference(batch, n, lower, dtype):
    """Eigenvalues ascending as LAPACK's syevd/heevd; eigenvectors equal up to sign (phase),
    orthonormal."""
    a = sample(batch + (n, n), dtype, n)
    (v, w), (v_ref, w_ref) = _both(lambda a: lax.linalg.eigh(a, lower=lower,
                                                             symmetrize_input=False), a)
    _close(w, w_ref, dtype, 10)
    _close(v * _phases(v, v_ref), v_ref, dtype, 10)
    _orthonormal(v, dtype)


@settings(SETTINGS, max_examples=12)
@given(MATRIX_BATCHES, st.sampled_from([(0, 0), (0, 2), (1, 1), (2, 2), (5, 3), (2, 5), (5, 5)]),
       st.booleans(), st.booleans(), INEXACT)
def test_svd_by_jacobi_matches_the_reference(batch, mn, full, uv, dtype):
    """Singular values descending as gesdd's; vectors equal up to one sign (phase) per triple;
    with full matrices the rest of u and vt is an orthonormal completion."""
    a = sample(batch + mn, dtype, sum(mn))
    got, want = _both(lambda a: lax.linalg.svd(a, full_matrices=full, compute_uv=uv), a)
    if not uv:
        return _close(got[0], want[0], dtype, 10)
    (u, s, vt), (u_ref, s_ref, vt_ref), k = got, want, min(mn)
    _close(s, s_ref, dtype, 10)
    phases = _phases(u[..., :k], u_ref[..., :k])
    _close(u[..., :k] * phases, u_ref[..., :k], dtype, 10)
    _close(vt[..., :k, :] * np.conj(np.swapaxes(phases, -1, -2)), vt_ref[..., :k, :], dtype, 10)
    _orthonormal(u, dtype)
    _orthonormal(np.swapaxes(vt, -1, -2), dtype)


def test_eigh_and_svd_of_special_matrices():
    """Repeated eigenvalues (the identity, a zero matrix), a rank-deficient matrix (zero
    singular values: u completed to an orthonormal basis), NaN and infinity (NaN, per
    matrix)."""
    eye = np.eye(4)
    (v, w), _ = _both(lax.linalg.eigh, np.stack([eye, 0 * eye]))
    np.testing.assert_array_equal(w, [[1] * 4, [0] * 4])
    np.testing.assert_array_equal(v, [eye, eye])
    low_rank = np.outer(np.arange(1.0, 6.0), [1.0, -2.0, 0.5])
    (u, s, vt), (_, s_ref, _) = _both(lambda a: lax.linalg.svd(a), low_rank)
    _close(s, s_ref, np.float64, 1e3)
    _orthonormal(u, np.float64)
    _close((u[:, :3] * s) @ vt, low_rank, np.float64, 10)
    bad = sample((3, 3, 3), np.float32, 1)
    bad[1, 2, 0], bad[2, 1, 1] = np.nan, np.inf
    for f in (lax.linalg.eigh, lax.linalg.svd):
        for out in kiln.jit(f, backend="pjrt")(bad):
            per_matrix = np.isnan(np.asarray(out)).reshape(3, -1)
            assert per_matrix[1:].all() and not per_matrix[0].any()


@pytest.mark.parametrize("shape, dtype", [((2, 128, 128), np.float32),
                                          ((129, 129), np.complex128),
                                          ((140, 128), np.float64), ((128, 129), np.complex64)])
def test_eigh_and_svd_of_larger_matrices(shape, dtype):
    """n = 128 and 129 (an odd n gets an index of zeros): each round rotates only its pairs'
    rows, so these take tens of milliseconds (a sweep is O(n^3); it was O(n^4)). Values within 4 n eps ||A|| of LAPACK's; the
    decomposition rebuilds A, and the vectors are orthonormal."""
    a = sample(shape, dtype, 7)
    eps = np.finfo(dtype).eps
    norm = np.linalg.norm(a, 2, axis=(-2, -1))[..., None]
    tol = 4 * max(shape[-2:]) * eps
    if shape[-1] == shape[-2]:
        a = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
        (v, w), (_, w_ref) = _both(lax.linalg.eigh, a)
        rebuilt = (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
        _orthonormal(v, dtype)
    else:
        (u, w, vt), (_, w_ref, _) = _both(lambda a: lax.linalg.svd(a, full_matrices=False), a)
        rebuilt = (u * w[..., None, :]) @ vt
        _orthonormal(u, dtype)
        _orthonormal(np.swapaxes(vt, -1, -2), dtype)
    assert (np.abs(w - w_ref) <= tol * norm).all()
    assert (np.abs(rebuilt - a).max(axis=(-2, -1)) <= tol * norm[..., 0]).all()


def test_grads_through_eigh_and_svd():
    """The derivative rules expand into eigh and svd again, and lower."""
    a = sample((2, 4, 4), np.float64, 3)

    def loss(a):
        v, w = lax.linalg.eigh(a)
        u, s, vt = lax.linalg.svd(a[..., :3], full_matrices=False)
        return ((v ** 4).sum() + (w ** 2).sum() + (u ** 4).sum() + (s ** 3).sum()
                + (vt ** 4).sum() + jnp.linalg.norm(a[0], ord=2))
    check(kiln.grad(loss), a, rtol=1e-9)
    hermitian = lambda a: ((jnp.abs(lax.linalg.eigh(a)[0]) ** 4).sum()
                           + (lax.linalg.eigh(a)[1] ** 2).sum())
    check(kiln.grad(hermitian), sample((2, 3, 3), np.complex128, 5), rtol=1e-9)
    check(kiln.vmap(kiln.grad(lambda a: (lax.linalg.svd(a, compute_uv=False) ** 2).sum())),
          sample((3, 2, 5), np.float32, 4), rtol=1e-4)


@SETTINGS
@given(MATRIX_BATCHES, st.sampled_from([0, 1, 2, 5]), INEXACT)
def test_hessenberg_is_gehrd_s(batch, n, dtype):
    a = sample(batch + (n, n), dtype, n)
    check(lax.linalg.hessenberg, a, rtol=5e-5 if dtype in (np.float32, np.complex64) else 1e-12)


# ------------------------------------------------------------------------------ schur and eig

def _match(w, w_ref):
    """The permutation of w_ref's last axis nearest to w, per matrix: the eigenvalues come in
    the iteration's order, not LAPACK's."""
    order = np.zeros(w.shape, int)
    for i in np.ndindex(w.shape[:-1]):
        left = list(range(w.shape[-1]))
        for k in np.argsort(-np.abs(w[i]), kind="stable"):
            pick = min(left, key=lambda j: abs(w[i][k] - w_ref[i][j]))
            order[i + (k,)] = pick
            left.remove(pick)
    return np.take_along_axis(w_ref, order, -1), order


def _check_schur(a, t, z, scale):
    """a = z t z^H, z unitary, t upper triangular (complex) or quasi-triangular with
    lanv2's standard 2 x 2 blocks (real): equal diagonal entries, off-diagonal entries of
    opposite signs, no two blocks touching."""
    dtype = a.dtype
    n = a.shape[-1]
    _close(z @ t @ np.conj(np.swapaxes(z, -1, -2)), a, dtype, scale)
    _orthonormal(z, dtype)
    real = dtype.kind == "f"
    assert (np.tril(t, -2 if real else -1) == 0).all()
    if real and n > 1:
        sub = np.diagonal(t, -1, -2, -1)
        assert not (sub[..., 1:] != 0)[sub[..., :-1] != 0].any()
        *lead, i = np.nonzero(sub)
        lead = tuple(lead)
        assert (t[lead + (i, i + 1)] * sub[lead + (i,)] < 0).all()
        np.testing.assert_array_equal(t[lead + (i, i)], t[lead + (i + 1, i + 1)])


def _schur_values(t):
    """The eigenvalues of a (quasi-)triangular t."""
    return np.linalg.eigvals(t) if t.shape[-1] else np.zeros(t.shape[:-1], complex)


def _check_eig(a, w, vl, vr, w_ref, vl_ref, vr_ref, scale, distinct=True):
    """w as the reference's up to order; A vr = vr diag(w), vl^H A = diag(w) vl^H; unit
    columns whose largest component is real (geev's scaling); with distinct eigenvalues, the
    vectors as the reference's up to phase."""
    dtype = np.dtype(w.dtype)
    norm = np.linalg.norm(a, axis=(-2, -1))[..., None] + 1
    w_ref, order = _match(w, w_ref)
    _close(w / norm, w_ref / norm, dtype, scale)
    for v, v_ref, left in ((vl, vl_ref, True), (vr, vr_ref, False)):
        if v is None:
            continue
        m = np.conj(np.swapaxes(v, -1, -2)) if left else v
        lhs = m @ a if left else a @ m
        rhs = w[..., :, None] * m if left else m * w[..., None, :]
        _close(lhs / norm[..., None], rhs / norm[..., None], dtype, scale)
        _close(np.linalg.norm(v, axis=-2), np.ones(w.shape), dtype, 10)
        if not v.size:
            continue
        size = np.abs(v)
        top = (size >= size.max(axis=-2, keepdims=True) * (1 - 1e-3)) & (v.imag == 0) & (
            v.real > 0)
        assert top.any(axis=-2).all()
        if distinct:
            v_ref = np.take_along_axis(v_ref, order[..., None, :], -1)
            _close(v * _phases(v, v_ref), v_ref, dtype, scale)


@settings(SETTINGS, max_examples=7)
@example((2,), 16, (True, True), np.float64)
@example((), 2, (True, True), np.complex64)
@example((3,), 3, (True, False), np.float32)
@given(st.sampled_from([(), (0,), (2,), (2, 1)]), st.sampled_from([0, 1, 2, 3, 5, 8, 16]),
       st.sampled_from([(True, True), (False, True), (True, False)]), INEXACT)
def test_schur_and_eig_by_qr_iteration(batch, n, flags, dtype):
    """Random matrices (real ones have complex pairs): schur's form and vectors, eig's values
    and left and right vectors (or one side), as the reference's up to the order of the
    eigenvalues and the vectors' phases; one module for both."""
    a = sample(batch + (n, n), dtype, n + 11)
    left, right = flags

    def f(a):
        return (lax.linalg.schur(a), lax.linalg.eig(a, compute_left_eigenvectors=left,
                                                    compute_right_eigenvectors=right))
    got, want = _both(f, a)
    (t, z), (w, *vs) = got[:2], got[2:]
    (t_ref, _), (w_ref, *vs_ref) = want[:2], want[2:]
    _check_schur(a, t, z, 10 * max(n, 1))
    _close(np.sort(np.abs(_schur_values(t)), -1), np.sort(np.abs(w_ref), -1), dtype,
           10 * max(n, 1))
    pairs = dict(zip([k for k, on in zip("lr", flags) if on], zip(vs, vs_ref)))
    vl, vl_ref = pairs.get("l", (None, None))
    vr, vr_ref = pairs.get("r", (None, None))
    _check_eig(a, w, vl, vr, w_ref, vl_ref, vr_ref, 100 * max(n, 1))


def _special(n):
    """A cyclic permutation (every shift of the plain iteration stalls on it), repeated
    eigenvalues of a symmetric matrix, a Jordan block, triangular and diagonal matrices,
    rotations (complex pairs only), zero, the identity, a NaN."""
    rng = np.random.default_rng(5)
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    nan = rng.standard_normal((n, n))
    nan[2, 3] = np.nan
    return np.stack([np.roll(np.eye(n), 1, axis=0),
                     q @ np.diag([1.0, 1.0, 2.0, 2.0, 2.0, -1.0]) @ q.T,
                     2 * np.eye(n) + np.eye(n, k=1), np.triu(rng.standard_normal((n, n))),
                     np.diag(rng.standard_normal(n)),
                     np.kron(np.eye(n // 2), [[0.0, 1.0], [-1.0, 0.0]]),
                     np.zeros((n, n)), np.eye(n), nan])


def test_schur_and_eig_of_special_matrices():
    """Real and complex matrices in one module; NaN (per matrix) where there is a NaN."""
    a = _special(6)
    c = a * np.exp(0.3j)

    def f(a, c):
        return lax.linalg.schur(a), lax.linalg.eig(a), lax.linalg.schur(c), lax.linalg.eig(c)
    got, want = _both(f, a, c)
    for x, (t, z, w, vl, vr), (_, _, w_ref, vl_ref, vr_ref) in (
            (a, got[:5], want[:5]), (c, got[5:], want[5:])):
        assert np.isnan(t[-1]).all() and np.isnan(z[-1]).all() and np.isnan(vr[-1]).all()
        x, t, z, w, vl, vr = x[:-1], t[:-1], z[:-1], w[:-1], vl[:-1], vr[:-1]
        _check_schur(x, t, z, 100)
        _check_eig(x, w, vl, vr, w_ref[:-1], vl_ref[:-1], vr_ref[:-1], 100, distinct=False)
    np.testing.assert_array_equal(got[0][3:5], a[3:5])   # triangular and diagonal: no step


# ------------------------------------------------------------------------------ errors

def _prints(x):
    print(x)
    return x + 1


def test_a_refused_primitive_is_a_located_error():
    with pytest.raises(BackendUnsupportedError) as info:
        kiln.jit(_prints, backend="pjrt")(np.ones(3, np.float32))
    message = str(info.value)
    assert "'debug_print'" in message and "host callback" in message and "print(x)" in message
    tapes = kiln.jit(kiln.grad(lambda c: lax.while_loop(lambda v: v < 10.0, lambda v: v * 1.5,
                                                        c)), backend="pjrt")
    with pytest.raises(BackendUnsupportedError, match="static shapes"):
        tapes(np.float32(1.0))


def test_without_an_explicit_backend_refused_code_runs_on_the_host(device, capsys):
    a = kiln.device_put(np.ones(3, np.float32), device)
    with pytest.raises(BackendUnsupportedError, match="'debug_print'"):
        kiln.jit(_prints)(a)   # arguments on the device ask for backend="pjrt"
    np.testing.assert_array_equal(kiln.jit(_prints)(np.ones(3, np.float32)), [2, 2, 2])


def test_debug_nans_checks_results_on_the_device():
    f = kiln.jit(lambda x: (x - x) / (x - x), backend="pjrt")
    with kiln.debug_nans(True):
        # the function run again op by op, each operation on the device: the division named
        on_device = kiln.device_put(np.ones(2, np.float32), kiln.devices("pjrt")[0])
        with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in div$"):
            f(on_device)
        with pytest.raises(FloatingPointError, match="nan\\) encountered in jit\\(<lambda>\\)"):
            f(np.ones(2, np.float32))   # op by op on NumPy arrays: NumPy's NaN, as in JAX
        with pytest.raises(FloatingPointError, match="nan\\) encountered in sqrt$"):
            jnp.sqrt(on_device - 2.0)
        np.testing.assert_array_equal(kiln.jit(_step, backend="pjrt")(np.ones(2), 0.0)[1], 2.0)


def test_a_malformed_module_is_a_pjrt_error(device, monkeypatch):
    from kiln.compiler.backends import stablehlo
    broken = stablehlo.StableHloModule("module { garbage }", "m", (), ())
    monkeypatch.setattr(stablehlo, "lower_module", lambda fn, **_: broken)
    with pytest.raises(api.PjrtError, match="garbage") as info:
        kiln.jit(lambda x: x, backend="pjrt")(np.ones(2, np.float32))
    assert isinstance(info.value, api.KilnError)
    assert kiln.jit(lambda x: x + 1, backend="reference")(1.0) == 2.0   # the process lives on



def _clipped_sum(i, v):
    c = jnp.abs(jnp.clip(jnp.take(v, i, axis=0), -1e15, 1e15))
    return jnp.einsum("ab,cb->", c, c)


def test_fused_min_max_propagate_nan():
    """The plug-in's XLA would drop NaN in fused maximum/minimum (its fast min/max); kiln
    turns that off (plugins.prepare_xla_flags), so clip of the NaN that `take` fills in for an
    index out of range stays NaN, as on the reference backend and in JAX."""
    i = np.array([[4, 9, 31], [0, 1, 2]], np.uint32)
    v = np.arange(8.0, dtype=np.float32)
    assert np.isnan(float(kiln.jit(_clipped_sum, backend="pjrt")(i, v)))
    assert "--xla_cpu_enable_fast_min_max=false" in os.environ["XLA_FLAGS"]
