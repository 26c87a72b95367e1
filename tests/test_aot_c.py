"""samples/aot_c: the C program calls kiln-compiled functions and prints what `kiln.jit` computes.

The two libraries are compiled as `make aot-sample` compiles them (samples/aot_c/model.py,
the same argument specs, through kiln.compiler.aot), main.c is built against their headers
and libraries with the system C compiler, run, and its printed numbers are compared with
`kiln.jit`'s on the same inputs. Then complex numbers: a program passing complex64 and
complex128 arrays (C99's complex types; C++'s std::complex when built as C++) to a library.
"""
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.cli.aot import compile_library
from kiln.compiler.aot import Target
from kiln.compiler.config import config

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "aot_c"
CC = os.environ.get("CC") or "cc"
CXX = os.environ.get("CXX") or "c++"
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


# ------------------------------------------------------------------------- complex numbers

def rotate(z, w):
    return jnp.exp(1j * z) * w + jnp.conj(z), jnp.abs(z)


# Reads and writes the complex buffers through float/double pointers (the real part first, as
# the header says), so the same source is C99 (float _Complex) and C++ (std::complex<float>).
COMPLEX_PROGRAM = r"""
#include <stdio.h>
#include "rot.h"

static double value(int i, int k) { return (((i + 3 * k) * 37) % 17 - 8) / 16.0; }

int main(void) {
    kiln_complex64 z[4], w[4], out[4];
    kiln_complex128 zd[6], wd[3], outd[6];
    float magnitude[4];
    double magnituded[6];
    for (int i = 0; i < 8; i++) ((float *)z)[i] = (float)value(i, 0);
    for (int i = 0; i < 8; i++) ((float *)w)[i] = (float)value(i, 1);
    for (int i = 0; i < 12; i++) ((double *)zd)[i] = value(i, 2);
    for (int i = 0; i < 6; i++) ((double *)wd)[i] = value(i, 3);
    if (rot_rotate64(z, w, out, magnitude) || rot_rotate128(zd, wd, outd, magnituded)) return 1;
    printf("rotate64:");
    for (int i = 0; i < 8; i++) printf(" %.9g", ((float *)out)[i]);
    for (int i = 0; i < 4; i++) printf(" %.9g", magnitude[i]);
    printf("\nrotate128:");
    for (int i = 0; i < 12; i++) printf(" %.17g", ((double *)outd)[i]);
    for (int i = 0; i < 6; i++) printf(" %.17g", magnituded[i]);
    printf("\n");
    return 0;
}
"""


@pytest.fixture(scope="module")
def complex_build(tmp_path_factory):
    """The library `rot` (rotate on c64 and, compiled with x64 on, c128) and the program."""
    build = tmp_path_factory.mktemp("aot_complex")
    c64, c128 = np.zeros(4, np.complex64), np.zeros((2, 3), np.complex128)
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    try:
        compile_library([Target(rotate, (c64, c64), name="rotate64"),
                         Target(rotate, (c128, c128[0]), name="rotate128")], build, name="rot")
    finally:
        config.update("enable_x64", old)
    (build / "main.c").write_text(COMPLEX_PROGRAM)
    return build


def run_complex_program(build, compiler, flags):
    program = build / f"main_{os.path.basename(compiler)}"
    subprocess.run([compiler, *flags, "-pedantic", "-Wall", "-Wextra", "-Werror", "-o",
                    str(program), str(build / "main.c"), f"-I{build}", f"-L{build}", "-lrot",
                    f"-Wl,-rpath,{build}"], check=True, capture_output=True, text=True)
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return dict(line.split(":", 1) for line in result.stdout.strip().splitlines())


def check_complex_output(lines):
    """The program's numbers are kiln.jit's on the same inputs."""
    def value(n, k):
        i = np.arange(n)
        return (((i + 3 * k) * 37) % 17 - 8) / 16.0
    def operand(shape, k, dtype):   # (the values' pairs are real and imaginary parts)
        return value(2 * int(np.prod(shape)), k).view(np.complex128).astype(dtype).reshape(shape)
    cases = {"rotate64": (np.complex64, (4,), (4,), 0),
             "rotate128": (np.complex128, (2, 3), (3,), 2)}
    for name, (dtype, z_shape, w_shape, k) in cases.items():
        z, w = operand(z_shape, k, dtype), operand(w_shape, k + 1, dtype)
        out, magnitude = (np.asarray(v) for v in kiln.jit(rotate)(z, w))
        part = out.real.dtype
        numbers = np.array(lines[name].split(), part)
        want = np.concatenate([out.view(part).ravel(), magnitude.ravel()])
        np.testing.assert_allclose(numbers, want, rtol=4 * np.finfo(part).eps, atol=0)


def test_c_program_passes_complex_numbers(complex_build, x64):
    check_complex_output(run_complex_program(complex_build, CC, ["-std=c99", "-O2"]))


@pytest.mark.skipif(shutil.which(CXX) is None, reason=f"no C++ compiler: {CXX} is not installed")
def test_cxx_program_passes_complex_numbers(complex_build, x64):
    """The header gives C++ std::complex, of the same layout."""
    check_complex_output(run_complex_program(complex_build, CXX, ["-x", "c++", "-std=c++11",
                                                                 "-O2"]))


def test_makefile_target_uses_the_same_sample():
    makefile = (SAMPLE.parent.parent / "Makefile").read_text()
    assert "aot-sample:" in makefile
    for spec in ("model.py:predict", "model.py:collatz_steps", "--arg 'i32[6]'",
                 "--arg 'list[(f32[4,8],f32[8]),(f32[8,3],f32[3])]' --arg 'f32[2,4]'"):
        assert spec in makefile
