"""The CUDA backend on a GPU (marked `gpu`; skipped, with the reason, without CuPy or a
device): the same random programs as test_cuda_codegen.py, run through CuPy against the
reference backend within the device functions' documented ulps (docs/cuda.md), and
jit(f, backend="cuda") with GPU arrays on the programs test_cuda_backend.py runs on the host
emulation (cuda_programs.py)."""
import numpy as np
import pytest
from hypothesis import given, settings

from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import launch, source

from test_cuda_codegen import programs
import cuda_programs

HAVE_GPU, WHY = launch.available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason=WHY)]


@settings(max_examples=40, deadline=None)
@given(programs())
def test_kernels_on_the_gpu_match_the_reference(program):
    fn, data = program
    kernel = source.kernel_source(fn)
    got = launch.run(kernel, data, data[0].size)
    with np.errstate(all="ignore"):
        want = reference.compile_function(fn)(*data)
    for g, w, v in zip(got, want, fn.outvars):
        dtype = v.aval.dtype
        if np.dtype(dtype).kind == "f":   # CUDA's exp/sin/cos/tanh: within 4 ulps
            np.testing.assert_allclose(g, np.asarray(w), rtol=4 * np.finfo(dtype).eps,
                                       atol=4 * np.finfo(dtype).eps, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, np.asarray(w))


@pytest.fixture
def real_device(monkeypatch):
    from kiln.compiler.backends.cuda import device
    monkeypatch.delenv(device.EMULATE, raising=False)
    return device.current()


@pytest.mark.parametrize("name, fn, args", cuda_programs.programs(),
                         ids=[p[0] for p in cuda_programs.programs()])
def test_backend_cuda_on_the_gpu_matches_the_reference(real_device, name, fn, args):
    cuda_programs.check(name, fn, args, tolerance=1e-4)


def test_gpu_arrays_and_eager_operations(real_device):
    import cupy
    import kiln
    import kiln.numpy as jnp
    gpu = kiln.devices()[0]
    assert gpu.platform == "gpu" and kiln.default_backend() == "gpu"
    host = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    x = kiln.device_put(host, gpu)
    assert isinstance(x._value.data, cupy.ndarray)
    for got, want in ((x * 2.0 + 1.0, host * 2 + 1), (jnp.sum(x, axis=0), host.sum(0)),
                      (jnp.exp(x), np.exp(host)), (x @ x.T, host @ host.T)):
        assert isinstance(got._value.data, cupy.ndarray)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    shared = cupy.from_dlpack(x)   # DLPack both ways, no copy
    assert shared.data.ptr == x._value.data.data.ptr
    back = jnp.from_dlpack(shared)
    assert isinstance(back._value.data, cupy.ndarray)
    np.testing.assert_array_equal(np.asarray(back), host)
