"""kiln.pure_callback: eagerly, under jit on the reference, LLVM and (emulated) CUDA backends,
under vmap with each vmap_method, refusing grad with JAX's error, refused by StableHLO with a
located error; results checked against NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import BackendUnsupportedError

EXAMPLES = settings(max_examples=8, deadline=None)
DTYPES = ["float32", "int32", "complex64", "bool", "uint8"]
CALLS = []


def host_sin_plus(x, y):
    CALLS.append((x.shape, y.shape))
    assert isinstance(x, kiln.Array)
    return np.asarray(x) * 2 + np.asarray(y)


def call(x, y, method=None):
    return kiln.pure_callback(host_sin_plus, kiln.ShapeDtypeStruct(x.shape, x.dtype), x, y,
                              vmap_method=method)


def host_pytree(d, scale):
    return {"sum": np.asarray(d["a"]) + np.asarray(d["b"]), "n": np.int32(scale)}


def call_pytree(a, b):
    spec = {"sum": kiln.ShapeDtypeStruct(a.shape, a.dtype), "n": kiln.ShapeDtypeStruct((), "int32")}
    return kiln.pure_callback(host_pytree, spec, {"a": a, "b": b}, scale=3)


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 5, size=shape)
    return v.astype(dtype) if dtype != "bool" else v > 2


@pytest.mark.parametrize("backend", ["reference", "llvm"])
@EXAMPLES
@given(dtype=st.sampled_from(["float32", "int32", "complex64", "uint8"]),
       shape=st.lists(st.integers(0, 3), max_size=3).map(tuple))
def test_jit_matches_numpy(backend, dtype, shape):
    x, y = _values(dtype, shape, 0), _values(dtype, shape, 1)
    want = x * 2 + y
    np.testing.assert_array_equal(call(x, y), want)   # eager
    got = kiln.jit(call, backend=backend)(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_pytrees_and_keyword_arguments(backend):
    a, b = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    out = kiln.jit(call_pytree, backend=backend)(a, b)
    np.testing.assert_array_equal(out["sum"], a + 1)
    assert int(out["n"]) == 3 and out["n"].dtype == np.int32


@pytest.mark.parametrize("backend", ["reference", "llvm"])
@pytest.mark.parametrize("method, seen", [("sequential", [(3,), (3,)]),
                                          ("expand_dims", [(2, 3), (1, 3)]),
                                          ("broadcast_all", [(2, 3), (2, 3)]),
                                          ("legacy_vectorized", [(2, 3), (3,)])])
def test_vmap_methods(backend, method, seen):
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
    CALLS.clear()
    got = kiln.jit(kiln.vmap(lambda a, b: call(a, b, method), in_axes=(0, None)),
                   backend=backend)(x, y)
    np.testing.assert_array_equal(got, x * 2 + y)
    assert CALLS[0] == tuple(seen)
    assert len(CALLS) == (2 if method == "sequential" else 1)


def test_vmap_needs_a_method_and_grad_is_refused():
    x, y = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with pytest.raises(NotImplementedError, match="Got vmap_method=None"):
        kiln.vmap(call, in_axes=(0, None))(x, y)
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP. Please use "
                                         "`jax.custom_jvp`"):
        kiln.grad(lambda a: call(a, y).sum())(x[0])
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        kiln.grad(lambda a: call(a, y))(x[0])   # JAX's first error for a non-scalar output too
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        call(x, y, "vectorised")


def host_fails(x):
    raise KeyError("from the host")


def host_wrong_shape(x):
    return np.zeros(4, np.float32)


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_errors_in_the_callback_reach_the_caller(backend):
    x = np.ones(3, np.float32)
    spec = kiln.ShapeDtypeStruct((3,), jnp.float32)
    f = kiln.jit(lambda a: kiln.pure_callback(host_fails, spec, a) , backend=backend)
    with pytest.raises(KeyError, match="from the host"):
        f(x)
    g = kiln.jit(lambda a: kiln.pure_callback(host_wrong_shape, spec, a), backend=backend)
    with pytest.raises(TypeError, match=r"returned an array of shape \(4,\).*declares shape "
                                        r"\(3,\)"):
        g(x)
    np.testing.assert_array_equal(kiln.jit(call, backend=backend)(x, x), 3 * x)  # still usable


def jv_inline(v, z):
    # the callback written inside the function, as JAX's docs write scipy.special.jv's
    scale = np.float32(2)

    def host(order, at, extra=1):
        return (np.asarray(at) * order * scale + extra).astype(np.asarray(at).dtype)
    twice = lambda a, b: host(a, b)   # noqa: E731  (reads a local function)
    return kiln.pure_callback(twice, kiln.ShapeDtypeStruct(z.shape, z.dtype), v, z,
                              vmap_method="broadcast_all")


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_a_callback_defined_in_the_compiled_function_runs_on_the_host(backend):
    z = np.arange(5, dtype=np.float32)
    want = z * 3 * 2 + 1
    np.testing.assert_array_equal(kiln.jit(jv_inline, backend=backend)(3, z), want)
    got = kiln.jit(kiln.vmap(jv_inline), backend=backend)(np.full(5, 3), z)
    np.testing.assert_array_equal(got, want)
    seen = []
    kiln.jit(lambda a: kiln.debug.callback(lambda v: seen.append(np.asarray(v)), a * 2),
             backend=backend)(z)
    np.testing.assert_array_equal(seen[0], 2 * z)


def test_a_callback_that_reads_a_traced_value_is_refused():
    def f(a):
        return kiln.pure_callback(lambda v: v + a, kiln.ShapeDtypeStruct((3,), jnp.float32), a)
    with pytest.raises(TypeError, match="reads 'a', which holds a traced value") as e:
        kiln.jit(f)(np.ones(3, np.float32))
    assert "test_pure_callback.py" in str(e.value) and "as an argument" in str(e.value)


def test_an_inline_callback_raises_at_its_own_line():
    def f(a):
        return kiln.pure_callback(lambda v: v / 0 if v.size else 1 // 0,
                                  kiln.ShapeDtypeStruct((0,), jnp.float32), a)
    with pytest.raises(ZeroDivisionError) as e:
        kiln.jit(f)(np.ones(0, np.float32))
    assert e.traceback[-1].path.name == "test_pure_callback.py"


def test_stablehlo_refuses_it_with_its_line():
    from kiln.compiler.backends.stablehlo import lower_module
    x = np.ones(3, np.float32)
    entry = kiln.jit(call, backend="reference").lower(x, x)._entry
    with pytest.raises(BackendUnsupportedError) as info:
        lower_module(entry.ssa)
    message = str(info.value)
    assert "cannot lower 'pure_callback'" in message and "kiln.pure_callback" in message
    assert "return kiln.pure_callback(host_sin_plus" in message


def test_cuda_runs_it_on_the_host(monkeypatch):
    from kiln.compiler.backends.cuda import device as D, emulate
    if emulate.compiler() is None:
        pytest.skip("no host C++ compiler")
    monkeypatch.setenv(D.EMULATE, "1")
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    f = kiln.jit(lambda a, b: jnp.sin(call(a + 1, b)), backend="cuda")
    np.testing.assert_allclose(np.asarray(f(x, y)), np.sin((x + 1) * 2 + y), rtol=1e-6)
    assert "host_call" in f._cache.values()[0].executable.steps()


def test_kiln_compile_refuses_it_with_its_line(capsys, tmp_path):
    from kiln.cli import commands as cli
    code = cli.main(["compile", f"{__file__}:call", "--arg", "f32[3]", "--arg", "f32[3]", "-o",
                     str(tmp_path / "lib")])
    err = capsys.readouterr().err
    assert code != 0 and "cannot build a library that calls pure_callback" in err
    assert "return kiln.pure_callback(host_sin_plus" in err


LOG = []


def record(x, scale=1):
    LOG.append(np.asarray(x) * scale)
    return "ignored"


def logged(x):
    kiln.debug.callback(record, x, scale=2)
    return jnp.sin(x)


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_debug_callback_runs_for_its_effect(backend):
    x = np.arange(3, dtype=np.float32)
    LOG.clear()
    assert kiln.debug.callback(record, x) is None
    out = kiln.jit(logged, backend=backend)(x)
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    np.testing.assert_array_equal(LOG[1], 2 * x)
    LOG.clear()
    kiln.jit(kiln.vmap(logged), backend=backend)(np.stack([x, x + 1]))
    assert len(LOG) == 2 and np.array_equal(LOG[1], 2 * (x + 1))   # once per example
    LOG.clear()
    g = kiln.jit(kiln.grad(lambda a: logged(a).sum()), backend=backend)(x)
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)
    assert len(LOG) == 1 and np.array_equal(LOG[0], 2 * x)   # the primal values, once


def test_debug_callback_on_cuda_and_stablehlo(monkeypatch):
    from kiln.compiler.backends.stablehlo import lower_module
    x = np.arange(3, dtype=np.float32)
    entry = kiln.jit(logged, backend="reference").lower(x)._entry
    with pytest.raises(BackendUnsupportedError, match="cannot lower 'debug_callback'"):
        lower_module(entry.ssa)
    from kiln.compiler.backends.cuda import device as D, emulate
    if emulate.compiler() is None:
        pytest.skip("no host C++ compiler")
    monkeypatch.setenv(D.EMULATE, "1")
    LOG.clear()
    np.testing.assert_allclose(np.asarray(kiln.jit(logged, backend="cuda")(x)), np.sin(x),
                               rtol=1e-6)
    assert len(LOG) == 1 and np.array_equal(LOG[0], 2 * x)


def host_draw(x):
    host_draw.calls += 1
    return np.full(np.shape(x), host_draw.calls, np.asarray(x).dtype)


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_io_callback_is_never_removed_and_runs_in_order(backend):
    from kiln.experimental import io_callback
    spec = kiln.ShapeDtypeStruct((3,), jnp.float32)

    def f(x):
        io_callback(host_draw, spec, x)            # unused: still called
        return io_callback(host_draw, spec, x) + x
    host_draw.calls = 0
    np.testing.assert_array_equal(kiln.jit(f, backend=backend)(np.zeros(3, np.float32)), [2] * 3)
    host_draw.calls = 0
    got = kiln.jit(kiln.vmap(lambda x: io_callback(host_draw, spec, x)), backend=backend)(
        np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(got, [[1] * 3, [2] * 3])   # once per example, in order
    host_draw.calls = 0
    np.testing.assert_array_equal(io_callback(host_draw, spec, np.zeros(3)), [1] * 3)  # eager


def test_io_callback_refuses_vmap_when_ordered_and_derivatives():
    from kiln.experimental import io_callback
    spec = kiln.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        kiln.vmap(lambda x: io_callback(host_draw, spec, x, ordered=True))(jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        kiln.grad(lambda x: io_callback(host_draw, spec, x).sum())(jnp.ones(3))


def test_callbacks_with_constant_operands_run_with_the_compiled_code():
    # JAX never calls a callback while tracing: an unused pure one is dropped, a used one and
    # a debug callback run at every call, even when nothing they get is traced.
    seen = []

    def host():
        seen.append("pure")
        return np.int32(3)

    def unused(x):
        kiln.pure_callback(host, np.int32(0))
        return x + 1.0

    def used(x):
        y = kiln.pure_callback(host, kiln.ShapeDtypeStruct((), np.int32))
        kiln.debug.callback(lambda: seen.append("debug"))
        return x + y
    assert float(kiln.jit(unused)(1.0)) == 2.0 and seen == []
    f = kiln.jit(used)
    assert float(f(1.0)) == 4.0 and float(f(2.0)) == 5.0
    assert seen == ["pure", "debug"] * 2
