"""The CUDA backend's kernels on a GPU (marked `gpu`; skipped, with the reason, without CuPy or
a device): the same random programs as test_cuda_codegen.py, run through CuPy against the
reference backend within the device functions' documented ulps (docs/cuda.md)."""
import numpy as np
import pytest
from hypothesis import given, settings

from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import launch, source

from test_cuda_codegen import programs

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
