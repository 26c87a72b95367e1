"""jit(f, backend="cuda"), GPU devices and arrays, on the host emulation of a device
(KILN_CUDA_EMULATE=1: kernels run through emulate.py): the programs of cuda_programs.py
against the reference backend, eager operations on GPU arrays, device_put/device_get, the
platforms option, and the errors without CuPy or a device."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.cuda import device as D, emulate
from kiln.compiler.backends.cuda.executable import Executable

import cuda_programs

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setenv(D.EMULATE, "1")
    return kiln.devices("gpu")[0]


@pytest.mark.parametrize("name, fn, args", cuda_programs.programs(),
                         ids=[p[0] for p in cuda_programs.programs()])
def test_programs_match_the_reference(emulated, name, fn, args):
    cuda_programs.check(name, fn, args)


def test_the_plan_uses_kernels_and_gemm(emulated):
    f = kiln.jit(cuda_programs.mlp_step, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    _, _, args = [p for p in cuda_programs.programs() if p[0] == "mlp_step"][0]
    f(*args)
    executable = f._cache.values()[0].executable
    assert isinstance(executable, Executable)
    steps = executable.steps()
    assert "gemm" in steps and "per_primitive" not in steps, steps
    assert "__global__" in executable.as_text("cuda")


def test_host_synchronisations_are_counted(emulated):
    f = kiln.jit(cuda_programs.control, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    x = np.ones((4, 3), np.float32)
    f(x, np.int32(3))
    executable = f._cache.values()[0].executable
    # the cond's index, then the while predicate once a chunk of 1, 2 and 4 trips (3 trips)
    assert executable.host_syncs == 1 + 3


def count_to(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0), (0, x))


def count_and_print(x, n):
    def body(c):
        kiln.debug.print("trip {}", c[0])
        return c[0] + 1, c[1] + 1.0
    return lax.while_loop(lambda c: c[0] < n, body, (0, x))


@pytest.mark.parametrize("n", [0, 1, 2, 63, 64, 1000])
def test_a_while_loop_reads_its_predicate_once_a_chunk(emulated, n):
    """Chunks of 1, 2, 4, ... 64 trips with the predicate applied on the device: the carry
    stops where the loop ends whatever the chunk, and the host reads the predicate about
    log2(64) + n / 64 times."""
    x = np.linspace(-1, 1, 5).astype(np.float32)
    f = kiln.jit(count_to, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    i, y = f(x, np.int32(n))
    want_i, want_y = count_to(x, np.int32(n))
    assert int(np.asarray(i)) == n == int(want_i)
    np.testing.assert_allclose(np.asarray(y), np.asarray(want_y), rtol=1e-6)
    chunks, done, size = 0, 0, 1
    while True:   # trips run: the chunk that sees the predicate false is the last
        chunks, done = chunks + 1, done + size
        if done > n:
            break
        size = min(2 * size, 64)
    assert f._cache.values()[0].executable.host_syncs == chunks


def test_a_while_loop_that_prints_or_carries_much_reads_it_every_trip(emulated, capsys,
                                                                      monkeypatch):
    x = np.zeros(3, np.float32)
    f = kiln.jit(count_and_print, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    f(x, np.int32(5))
    assert f._cache.values()[0].executable.host_syncs == 6
    assert capsys.readouterr().out.count("trip") == 5   # no speculative trip prints
    from kiln.compiler.backends.cuda import program
    monkeypatch.setattr(program, "SPECULATE_BYTES", 8)
    g = kiln.jit(count_to, backend="cuda")
    g.clear_cache()   # shared by jit objects of the function
    g(x, np.int32(5))
    assert g._cache.values()[0].executable.host_syncs == 6


def test_devices_and_arrays(emulated):
    gpu = kiln.devices()[0]
    assert kiln.default_backend() == "gpu" and gpu.platform == "gpu"
    assert gpu.device_kind == D.EmulatedLayer.device_kind and repr(gpu) == "CudaDevice(id=0)"
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = kiln.device_put(host, gpu)
    assert type(x._value) is D.DeviceBuffer and x.devices() == {gpu}
    assert x.block_until_ready() is x
    np.testing.assert_array_equal(np.asarray(x), host)
    got = kiln.device_get({"a": x})["a"]
    assert type(got) is np.ndarray and (got == host).all()
    back = kiln.device_put(x, kiln.devices("cpu")[0])
    assert type(back._value) is np.ndarray and back.devices() == {kiln.devices("cpu")[0]}
    assert float(x[1, 2]) == 6.0 and "Array(" in repr(x)
    with pytest.raises(TypeError, match="not converted to a NumPy array implicitly"):
        np.asarray(x._value)
    again = np.from_dlpack(x)   # the emulated device's memory is the host's
    np.testing.assert_array_equal(again, host)


def test_eager_operations_run_on_the_device(emulated, monkeypatch):
    x = kiln.device_put(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), kiln.devices()[0])
    ran = []
    real = D.EmulatedLayer.launch
    monkeypatch.setattr(D.EmulatedLayer, "launch",
                        lambda self, kernel, *a: ran.append(kernel.name) or real(self, kernel, *a))
    results = {"mul": x * 2.0 + 1.0, "exp": jnp.exp(x), "sum": jnp.sum(x, axis=0),
               "max": jnp.max(x, axis=1), "matmul": x @ x.T, "slice": x[1:, ::2]}
    host = np.asarray(x)
    want = {"mul": host * 2 + 1, "exp": np.exp(host), "sum": host.sum(0), "max": host.max(1),
            "matmul": host @ host.T, "slice": host[1:, ::2]}
    for k, r in results.items():
        assert type(r._value) is D.DeviceBuffer, k
        np.testing.assert_allclose(np.asarray(r), want[k], rtol=1e-6, err_msg=k)
    assert len(ran) >= 5   # mul, add, exp and both reductions are kernels


WEIGHTS = np.arange(12, dtype=np.float32).reshape(3, 4)


def uses_weights(x):
    return jnp.tanh(x @ WEIGHTS)


def test_closed_over_constants_are_copied_to_the_device_once(emulated, monkeypatch):
    """The arrays a function closes over are copied once per specialisation, not per call
    (Executable.hold_constants), counted on the emulated layer; rebinding the global
    re-specialises and copies the new value."""
    global WEIGHTS
    copied = []
    real = D.EmulatedLayer.to_device
    monkeypatch.setattr(D.EmulatedLayer, "to_device",
                        lambda self, host: copied.append(host.shape) or real(self, host))
    f = kiln.jit(uses_weights, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    x = np.ones((2, 3), np.float32)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x @ WEIGHTS), rtol=1e-6)
    assert copied.count((3, 4)) == 1 and copied.count((2, 3)) == 3, copied
    old, WEIGHTS = WEIGHTS, -WEIGHTS
    try:
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x @ WEIGHTS), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x @ WEIGHTS), rtol=1e-6)
    finally:
        WEIGHTS = old
    assert copied.count((3, 4)) == 2


def test_jit_follows_arguments_on_the_gpu(emulated):
    f = kiln.jit(lambda a: jnp.sin(a) * 2.0)
    x = kiln.device_put(np.ones(5, np.float32), kiln.devices()[0])
    out = f(x)
    assert type(out._value) is D.DeviceBuffer
    np.testing.assert_allclose(np.asarray(out), np.sin(1.0) * 2, rtol=1e-6)
    assert type(f(np.ones(5, np.float32))._value) is np.ndarray   # host data: the CPU


def test_platforms_option(emulated, monkeypatch):
    monkeypatch.setenv("KILN_PLATFORMS", "cpu")
    assert kiln.default_backend() == "cpu" and kiln.devices()[0].platform == "cpu"
    monkeypatch.setenv("KILN_PLATFORMS", "cuda,cpu")
    assert kiln.default_backend() == "gpu"
    kiln.config.update("jax_platforms", "cpu")
    try:
        assert kiln.default_backend() == "cpu"
    finally:
        kiln.config.update("jax_platforms", None)


def test_without_a_device_the_errors_say_why(monkeypatch):
    monkeypatch.delenv(D.EMULATE, raising=False)
    if D.available()[0]:
        pytest.skip("a GPU is present")
    with pytest.raises(D.DeviceUnavailableError, match=r"pip install '\.\[cuda\]'|device"):
        kiln.jit(lambda x: x + 1, backend="cuda")(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="KILN_CUDA_EMULATE=1"):
        kiln.devices("gpu")
    assert kiln.default_backend() == "cpu"
    monkeypatch.setenv("KILN_PLATFORMS", "gpu")
    with pytest.raises(RuntimeError, match="Unable to initialize backend 'gpu'"):
        kiln.devices()


def test_from_dlpack_of_host_memory():
    host = np.arange(6, dtype=np.float32)
    out = jnp.from_dlpack(host)
    assert type(out._value) is np.ndarray and (np.asarray(out) == host).all()


def _scaled(a):
    return a * 2.0


def test_the_default_device_puts_new_arrays_and_calls_on_the_gpu(emulated):
    from kiln.compiler.backends.cuda.device import DeviceBuffer
    with kiln.default_device(emulated):
        x = jnp.array([1.0, 2.0, 3.0])
        assert type(x._value) is DeviceBuffer and x.devices() == {emulated}
        assert kiln.device_put(np.ones(2)).devices() == {emulated}
        out = kiln.jit(_scaled)(np.arange(3.0, dtype=np.float32))
        assert type(out._value) is DeviceBuffer
        np.testing.assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    with kiln.default_device("gpu"):
        assert jnp.zeros(2).devices() == {emulated}
    assert type(jnp.array([1.0])._value) is np.ndarray


def scatter_of_a_temporary(x, i, u):
    t = x * 2.0
    return t.at[i].add(u)


def scatter_of_a_kept_temporary(x, i, u):
    t = x * 2.0
    return t.at[i].add(u), t


def _scatter_steps(f):
    program = f._cache.values()[0].executable.program
    return [s for s in program.steps if s.kind == "kernel" and any(
        k.starts_from for k in s.kernels)]


def test_a_scatter_updates_a_dead_operand_in_place(emulated):
    x = np.arange(6, dtype=np.float32)
    i = np.array([1, 1, 4], np.int32)
    u = np.array([1.0, 2.0, 3.0], np.float32)
    f = kiln.jit(scatter_of_a_temporary, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    np.testing.assert_array_equal(np.asarray(f(x, i, u)),
                                  np.asarray(scatter_of_a_temporary(jnp.asarray(x), i, u)))
    (step,) = _scatter_steps(f)
    assert 0 in step.donated   # (the operand; the indices, made here too, may be as well)
    g = kiln.jit(scatter_of_a_kept_temporary, backend="cuda")
    g.clear_cache()   # shared by jit objects of the function
    y, t = g(x, i, u)
    np.testing.assert_array_equal(np.asarray(t), x * 2.0)   # the kept operand is untouched
    np.testing.assert_array_equal(np.asarray(y), np.asarray(scatter_of_a_temporary(jnp.asarray(x), i, u)))
    (step,) = _scatter_steps(g)
    assert 0 not in step.donated
    h = kiln.jit(lambda x, i, u: x.at[i].add(u), backend="cuda")   # the caller's input: copied
    h(x, i, u)
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32))
    assert 0 not in _scatter_steps(h)[0].donated


def running_stats(x):
    return jnp.cumsum(x, axis=0), lax.cummax(x, axis=1, reverse=True), \
        lax.cumlogsumexp(x, axis=1)


def test_cumulative_operations_are_kernels(emulated):
    x = np.random.default_rng(3).standard_normal((40, 7)).astype(np.float32)
    f = kiln.jit(running_stats, backend="cuda")
    f.clear_cache()   # shared by jit objects of the function
    for got, want in zip(f(x), running_stats(jnp.asarray(x))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    steps = f._cache.values()[0].executable.steps()
    assert "per_primitive" not in steps, steps
