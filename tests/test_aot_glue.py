"""The C glue's own defaults, used when a library runs without kiln.aot.load's bindings (from C,
or through ctypes): how lib<NAME>.so finds its BLAS routines ($KILN_BLAS_LIBRARY, the library
recorded at compile time, the routines already in the process, the system's BLAS libraries).

Each case loads the library with ctypes in a fresh subprocess, whose environment decides what
the library's constructor finds, and calls a matmul through BLAS. A library "moved to another
machine" is one whose recorded BLAS path does not exist.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kiln.aot
from kiln.compiler.aot import Target, compile_library, native
from kiln.compiler.aot.glue import BLAS_SOURCES

F32 = np.float32


def matmul(a, b):
    return a @ b


def zeros(*shape):
    return np.zeros(shape, F32)


MATMUL = [Target(matmul, (zeros(96, 80), zeros(80, 64)))]   # large enough to call BLAS


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A library as compiled here: its recorded BLAS is NumPy's OpenBLAS."""
    directory = tmp_path_factory.mktemp("recorded")
    manifest = compile_library(MATMUL, directory, name="rec")
    assert manifest["functions"][0]["uses"] == ["blas"]
    return directory, manifest


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """A library whose recorded BLAS path does not exist (as on another machine)."""
    directory = tmp_path_factory.mktemp("moved")
    with pytest.MonkeyPatch.context() as patch:
        real = native.blas_info()
        patch.setattr(native, "blas_info",
                      lambda: {**real, "path": "/nonexistent/kiln/libopenblas64_.so"})
        return directory, compile_library(MATMUL, directory, name="moved")


@pytest.fixture(scope="module")
def blas_copy(recorded, tmp_path_factory):
    """A copy of the directory holding NumPy's OpenBLAS (with the libraries it needs)."""
    source = Path(recorded[1]["blas"]["path"])
    target = tmp_path_factory.mktemp("blas") / "libs"
    shutil.copytree(source.parent, target)
    return target / source.name


DRIVER = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np

    directory, name, preload = sys.argv[1:4]
    if preload:   # its symbols become visible to every library (dlsym(RTLD_DEFAULT, ...))
        ctypes.CDLL(preload, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(f"{directory}/lib{name}.so")
    a = np.arange(96 * 80, dtype=np.float32).reshape(96, 80) % 7 / 4
    b = np.arange(80 * 64, dtype=np.float32).reshape(80, 64) % 5 - 2
    out = np.zeros((96, 64), np.float32)
    init = getattr(lib, f"{name}_init")()
    code = getattr(lib, f"{name}_matmul")(*[ctypes.c_void_p(x.ctypes.data) for x in (a, b, out)])
    strerror = getattr(lib, f"{name}_strerror")
    strerror.restype = ctypes.c_char_p
    print(json.dumps({"init": init, "code": code, "ok": bool(np.allclose(out, a @ b)),
                      "message": strerror(code).decode()}))
""")


def run_matmul(built, env=None, preload=""):
    directory, manifest = built
    environment = {k: v for k, v in os.environ.items() if k != "KILN_BLAS_LIBRARY"}
    environment.update(env or {})
    result = subprocess.run([sys.executable, "-c", DRIVER, str(directory), manifest["name"],
                             str(preload)], capture_output=True, text=True, timeout=120,
                            env=environment)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def bound(outcome):
    return outcome["init"] == 0 and outcome["code"] == 0 and outcome["ok"]


def system_blas(bits):
    """Whether a system BLAS library the glue falls back to is installed here."""
    for library, _ in BLAS_SOURCES[bits]:
        try:
            if library:
                ctypes.CDLL(library)
                return True
        except OSError:
            pass
    return False


def test_recorded_library(recorded):
    assert bound(run_matmul(recorded))


def test_moved_library_without_blas_returns_2(moved):
    outcome = run_matmul(moved)
    if system_blas(64):   # then the glue finds it: the fallback works
        assert bound(outcome)
        return
    assert outcome["init"] == 2 and outcome["code"] == 2
    assert "KILN_BLAS_LIBRARY" in outcome["message"]


@pytest.mark.parametrize("suffix", ["", ":scipy_{}_64_"])
def test_environment_variable_names_the_library(moved, blas_copy, suffix):
    assert bound(run_matmul(moved, {"KILN_BLAS_LIBRARY": f"{blas_copy}{suffix}"}))


def test_environment_variable_with_a_wrong_pattern_is_passed_over(moved, recorded, blas_copy):
    setting = {"KILN_BLAS_LIBRARY": f"{blas_copy}:nothing_{{}}_here"}
    assert bound(run_matmul(recorded, setting))   # the recorded library comes next
    assert run_matmul(moved, setting)["code"] == 2 or system_blas(64)
    missing = {"KILN_BLAS_LIBRARY": "/nonexistent/libblas.so"}
    assert bound(run_matmul(recorded, missing))


def test_routines_already_in_the_process(moved, blas_copy):
    assert bound(run_matmul(moved, preload=blas_copy))


def test_python_loader_binds_its_own_blas(moved):
    lib = kiln.aot.load(moved[0])
    a, b = np.ones((96, 80), F32), np.full((80, 64), 2, F32)
    np.testing.assert_allclose(np.asarray(lib.matmul(a, b)), a @ b)


def test_32_bit_blas(tmp_path, blas_copy):
    """Compiled against SciPy's cython_blas (32-bit integers, no recorded path): the glue finds
    SciPy's OpenBLAS through KILN_BLAS_LIBRARY (spelled scipy_sgemm_), or not at all."""
    import scipy
    scipy_blas = sorted(Path(scipy.__file__).parent.parent.glob("scipy.libs/*openblas*.so"))
    source = tmp_path / "m.py"
    source.write_text("def matmul(a, b):\n    return a @ b\n")
    environment = {**os.environ, "KILN_BLAS": "scipy"}
    result = subprocess.run([sys.executable, "-m", "kiln.compiler.cli", "compile",
                             f"{source}:matmul", "--arg", "f32[96,80]", "--arg", "f32[80,64]",
                             "-o", str(tmp_path / "lib32")], capture_output=True, text=True,
                            timeout=300, env=environment)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "lib32" / "manifest.json").read_text())
    assert manifest["blas"]["int_bits"] == 32 and manifest["name"] == "m"
    built = (tmp_path / "lib32", manifest)
    if not system_blas(32):
        assert run_matmul(built)["init"] == 2
    # NumPy's OpenBLAS has 64-bit integers: none of the 32-bit spellings is found there
    assert run_matmul(built, {"KILN_BLAS_LIBRARY": str(blas_copy)})["code"] == 2 or \
        system_blas(32)
    assert bound(run_matmul(built, {"KILN_BLAS_LIBRARY": str(scipy_blas[0])}))
