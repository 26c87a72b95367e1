"""Random-program fuzzing of the CUDA backend against the reference backend, on the host
emulation of a device (KILN_CUDA_EMULATE=1: every generated kernel's CUDA C runs through
emulate.py).

The programs are test_llvm_fuzz's (tests/fuzz_programs.py: elementwise chains, reductions,
reshapes, slices, dots, sorts, indexing and control flow on traced values), compiled with
`kiln.jit(f, backend="cuda")` and with the reference backend, run on the same inputs and
compared with test_llvm_fuzz's tolerances (exact values bit for bit; inexact ones to the
program precision's tolerance, judged against the inputs' magnitude, or the magnitude of the
results on the inputs' absolute values for sums with cancellation). Every kernel is compiled
for the host C++ compiler (about half a second each), so this runs fewer examples than the
LLVM fuzzer, and a failure is reported as drawn, without shrinking.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import kiln
from kiln.compiler.backends.cuda import device as D, emulate
from kiln.tree_util import tree_leaves

from fuzz_programs import programs
from test_llvm_fuzz import absolute_magnitude, compare, load

pytestmark = [pytest.mark.usefixtures("x64_module"),
              pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")]


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cuda_fuzz_programs")


@pytest.fixture(scope="module")
def emulated_device():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(D.EMULATE, "1")
        yield


@settings(max_examples=12, deadline=None,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),   # no shrinking: too slow here
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(program=programs())
def test_random_programs_on_the_emulated_device(program, program_dir, emulated_device):
    prog = load(program.source, program_dir)
    want = [np.asarray(w) for w in
            tree_leaves(kiln.jit(prog, backend="reference")(*program.inputs))]
    got = [np.asarray(g) for g in tree_leaves(kiln.jit(prog, backend="cuda")(*program.inputs))]
    compare(program, got, want, lambda: absolute_magnitude(program, program_dir))
