"""samples/aot_c: the C program calls kiln-compiled functions and prints what `kiln.jit` computes.

The two libraries are compiled as `make aot-sample` compiles them (samples/aot_c/model.py,
the same argument specs, through kiln.compiler.aot), main.c is built against their headers
and libraries with the system C compiler, run, and its printed numbers are compared with
`kiln.jit`'s on the same inputs.
"""
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.compiler.aot import Target, compile_library

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "aot_c"
CC = os.environ.get("CC") or "cc"
pytestmark = pytest.mark.skipif(shutil.which(CC) is None,
                                reason=f"no C compiler: {CC} is not installed")


def load_model():
    spec = importlib.util.spec_from_file_location("aot_c_model", SAMPLE / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fill(n, k):
    """main.c's `fill`: the k-th leaf's n values."""
    i = np.arange(n)
    return ((((i + 3 * k) * 37) % 17) - 8).astype(np.float32) / np.float32(16)


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """{name: [numbers]} that the C program prints."""
    build = tmp_path_factory.mktemp("aot_c")
    model = load_model()
    f32 = np.float32
    params = [(np.zeros((4, 8), f32), np.zeros(8, f32)), (np.zeros((8, 3), f32), np.zeros(3, f32))]
    compile_library([Target(model.predict, (params, np.zeros((2, 4), f32)))], build / "mlp",
                    name="mlp")
    compile_library([Target(model.collatz_steps, (np.zeros(6, np.int32),))], build / "collatz",
                    name="collatz")
    program = build / "main"
    command = [CC, "-O2", "-Wall", "-Werror", "-o", str(program), str(SAMPLE / "main.c")]
    for lib in ("mlp", "collatz"):
        command += [f"-I{build / lib}", f"-L{build / lib}", f"-l{lib}", f"-Wl,-rpath,{build / lib}"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(":", 1) for line in result.stdout.strip().splitlines())
    return {name: [float(v) for v in values.split()] for name, values in lines.items()}, model


def test_c_program_prints_what_jit_computes(printed):
    numbers, model = printed
    params = [(fill(32, 0).reshape(4, 8), fill(8, 1)), (fill(24, 2).reshape(8, 3), fill(3, 3))]
    x = fill(8, 4).reshape(2, 4)
    want = np.asarray(kiln.jit(model.predict)(params, x))
    np.testing.assert_allclose(np.array(numbers["predict"], np.float32), want.ravel(),
                               rtol=2e-6, atol=1e-6)
    steps = kiln.jit(model.collatz_steps)(np.array([1, 2, 3, 6, 7, 27], np.int32))
    assert numbers["collatz_steps"] == np.asarray(steps).tolist() == [0, 1, 7, 8, 16, 111]


def test_makefile_target_uses_the_same_sample():
    makefile = (SAMPLE.parent.parent / "Makefile").read_text()
    assert "aot-sample:" in makefile
    for spec in ("model.py:predict", "model.py:collatz_steps", "--arg 'i32[6]'",
                 "--arg 'list[(f32[4,8],f32[8]),(f32[8,3],f32[3])]' --arg 'f32[2,4]'"):
        assert spec in makefile
