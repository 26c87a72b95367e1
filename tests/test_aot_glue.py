"""The C glue's own defaults, used when a library runs without kiln.aot.load's bindings (from C,
or through ctypes): how lib<NAME>.so finds its BLAS routines ($KILN_BLAS_LIBRARY, the library
recorded at compile time, the routines already in the process, the system's BLAS libraries), and
what its default kiln_debug_print prints.

BLAS: each case loads the library with ctypes in a fresh subprocess, whose environment decides
what the library's constructor finds, and calls a matrix-vector product through BLAS (real
matrix products run kiln's own kernel). A library "moved to
another machine" is one whose recorded BLAS path does not exist.

Printing: the C printer (kiln/compiler/aot/c/debug_print.c) is built on its own and fed print sites
and operands; its text must be what kiln's Python callback prints (NumPy's str, str.format) for
arrays of every dtype and shape and for format specs, but for the documented differences. Then
a compiled library prints from a subprocess that binds nothing, as kiln.jit prints.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.aot
import kiln.cli.commands
from kiln.cli.aot import compile_library
from kiln.compiler.aot import Target, native
from kiln.compiler.aot.glue import c_source
from kiln.compiler.aot.glue import BLAS_SOURCES
from kiln.compiler.primitives.callbacks import render

F32 = np.float32


def matvec(a, v):
    return a @ v


def zeros(*shape):
    return np.zeros(shape, F32)


MATVEC = [Target(matvec, (zeros(160, 80), zeros(80)))]   # large enough to call BLAS (sgemv)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A library as compiled here: its recorded BLAS is NumPy's OpenBLAS."""
    directory = tmp_path_factory.mktemp("recorded")
    manifest = compile_library(MATVEC, directory, name="rec")
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
        return directory, compile_library(MATVEC, directory, name="moved")


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
    a = np.arange(160 * 80, dtype=np.float32).reshape(160, 80) % 7 / 4
    v = np.arange(80, dtype=np.float32) % 5 - 2
    out = np.zeros(160, np.float32)
    init = getattr(lib, f"{name}_init")()
    code = getattr(lib, f"{name}_matvec")(*[ctypes.c_void_p(x.ctypes.data) for x in (a, v, out)])
    strerror = getattr(lib, f"{name}_strerror")
    strerror.restype = ctypes.c_char_p
    print(json.dumps({"init": init, "code": code, "ok": bool(np.allclose(out, a @ v)),
                      "message": strerror(code).decode()}))
""")


def run_matvec(built, env=None, preload=""):
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
    assert bound(run_matvec(recorded))


def test_moved_library_without_blas_returns_2(moved):
    outcome = run_matvec(moved)
    if system_blas(64):   # then the glue finds it: the fallback works
        assert bound(outcome)
        return
    assert outcome["init"] == 2 and outcome["code"] == 2
    assert "KILN_BLAS_LIBRARY" in outcome["message"]


@pytest.mark.parametrize("suffix", ["", ":scipy_{}_64_"])
def test_environment_variable_names_the_library(moved, blas_copy, suffix):
    assert bound(run_matvec(moved, {"KILN_BLAS_LIBRARY": f"{blas_copy}{suffix}"}))


def test_environment_variable_with_a_wrong_pattern_is_passed_over(moved, recorded, blas_copy):
    setting = {"KILN_BLAS_LIBRARY": f"{blas_copy}:nothing_{{}}_here"}
    assert bound(run_matvec(recorded, setting))   # the recorded library comes next
    assert run_matvec(moved, setting)["code"] == 2 or system_blas(64)
    missing = {"KILN_BLAS_LIBRARY": "/nonexistent/libblas.so"}
    assert bound(run_matvec(recorded, missing))


def test_routines_already_in_the_process(moved, blas_copy):
    assert bound(run_matvec(moved, preload=blas_copy))


def test_python_loader_binds_its_own_blas(moved):
    lib = kiln.aot.load(moved[0])
    a, v = np.ones((160, 80), F32), np.full(80, 2, F32)
    np.testing.assert_allclose(np.asarray(lib.matvec(a, v)), a @ v)


def test_32_bit_blas(tmp_path, blas_copy):
    """Compiled against SciPy's cython_blas (32-bit integers, no recorded path): the glue finds
    SciPy's OpenBLAS through KILN_BLAS_LIBRARY (spelled scipy_sgemv_), or not at all."""
    import scipy
    scipy_blas = sorted(Path(scipy.__file__).parent.parent.glob("scipy.libs/*openblas*.so"))
    source = tmp_path / "m.py"
    source.write_text("def matvec(a, v):\n    return a @ v\n")
    environment = {**os.environ, "KILN_BLAS": "scipy"}
    result = subprocess.run([sys.executable, "-m", "kiln.cli", "compile",
                             f"{source}:matvec", "--arg", "f32[160,80]", "--arg", "f32[80]",
                             "-o", str(tmp_path / "lib32")], capture_output=True, text=True,
                            timeout=300, env=environment)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "lib32" / "manifest.json").read_text())
    assert manifest["blas"]["int_bits"] == 32 and manifest["name"] == "m"
    built = (tmp_path / "lib32", manifest)
    if not system_blas(32):
        assert run_matvec(built)["init"] == 2
    # NumPy's OpenBLAS has 64-bit integers: none of the 32-bit spellings is found there
    assert run_matvec(built, {"KILN_BLAS_LIBRARY": str(blas_copy)})["code"] == 2 or \
        system_blas(32)
    assert bound(run_matvec(built, {"KILN_BLAS_LIBRARY": str(scipy_blas[0])}))


# ------------------------------------------------------------------------------ printing

PRINTER_MAIN = """
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
%s
void kiln_test_print(const char *site, void **operands) {
    _kiln_default_debug_print(site, operands);
}
"""


@pytest.fixture(scope="module")
def printer(tmp_path_factory):
    """The glue's C printer on its own, as a shared library with one entry, kiln_test_print."""
    directory = tmp_path_factory.mktemp("printer")
    (directory / "printer.c").write_text(PRINTER_MAIN % c_source("debug_print.c"))
    subprocess.run([os.environ.get("CC") or "cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror",
                    "-o", str(directory / "printer.so"), str(directory / "printer.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    library = ctypes.CDLL(str(directory / "printer.so"))
    library.kiln_test_print.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    return library.kiln_test_print


def site(operands, fmt, template, sep=" ", end="\n"):
    """The print site's JSON, as lower_callbacks.py writes it."""
    return json.dumps({"operands": [[a.dtype.str, list(a.shape)] for a in operands], "fmt": fmt,
                       "template": template, "sep": sep, "end": end},
                      sort_keys=True).encode() + b"\0"


def c_printed(printer, operands, fmt, template, sep=" ", end="\n"):
    """What the C printer writes to stdout (file descriptor 1)."""
    arrays = [np.require(np.asarray(a), requirements="C") for a in operands]
    pointers = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 1)
        try:
            printer(site(arrays, fmt, template, sep, end), pointers)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read().decode()


def python_printed(operands, fmt, template, sep=" ", end="\n"):
    return render([np.asarray(a) for a in operands], fmt, [tuple(t) for t in template], sep, end)


def same_print(printer, operands, fmt, template, sep=" ", end="\n"):
    got = c_printed(printer, operands, fmt, template, sep, end)
    assert got == python_printed(operands, fmt, template, sep, end)
    return got


DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
magnitudes = st.sampled_from([1e-30, 1e-9, 1e-5, 1e-3, 1.0, 10.0, 1e3, 1e5, 1e7, 1e12])


@st.composite
def arrays(draw):
    """Arrays of every printable dtype: any bit pattern, or values of one magnitude (which
    decides between NumPy's positional and scientific layouts); shapes with 0s and 1s, and now
    and then over 1000 elements (summarised with ...)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(st.one_of(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
                           st.sampled_from([(1001,), (3, 400), (2, 2, 300)])))
    if dtype.kind in "fc" and draw(st.booleans()):
        scale = draw(magnitudes)
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 32)))
        values = rng.standard_normal(shape)
        if dtype.kind == "c":   # (the parts of one magnitude, or of two)
            values = values + 1j * rng.standard_normal(shape) * draw(st.sampled_from([1, 1e-6]))
        rounded = draw(st.booleans())
        with np.errstate(over="ignore"):
            return (np.round(values * 100) if rounded else values * scale).astype(dtype)
    data = draw(st.binary(min_size=int(np.prod(shape)) * dtype.itemsize,
                          max_size=int(np.prod(shape)) * dtype.itemsize))
    array = np.frombuffer(data, np.uint8).copy().view(dtype).reshape(shape)
    return array.astype(bool) if dtype.kind == "b" else array


@settings(max_examples=60, deadline=None)
@given(arrays())
def test_arrays_print_as_numpy_str(printer, array):
    same_print(printer, [array], None, [["v", 0]])
    same_print(printer, [array], "a = {} and {x}", [["v", 0], ["kv", "x", 0]])


@pytest.mark.parametrize("operands, fmt, template", [
    ([np.float32(1.5), np.int32(7)],
     "x = {0} and n={n}! {{lit}} {0:8.3f}|{n:>5}|{n:#x}|{1:+08d}|{2:^9}|{s:_<6}|",
     [["v", 0], ["v", 1], ["s", "hi"], ["kv", "n", 1], ["ks", "s", "ab"]]),
    ([np.float32(2.5), np.bool_(True)],
     "{1:>6} {1} {0:e} {0:%} {0:g} {0:G} {0:010.2f} {0:=+10.1f} {1:d} {0:.0f} {0:#.0e}",
     [["v", 0], ["v", 1]]),
    ([np.int64(-5), np.uint8(200), np.uint64(2 ** 64 - 1)],
     "{0:b} {0:#o} {1:#b} {1:c} {1:X} {0:n} {1:08.3f} {2} {2:x} {0: d}",
     [["v", 0], ["v", 1], ["v", 2]]),
    ([np.float16(0.1), np.float64(1 / 3), np.float32(np.nan), np.float64(-np.inf)],
     "{0:.5f} {1:.3e} {0:%} {1} {0} {2:f} {2:+F} {3:E} {3:>8}",
     [["v", 0], ["v", 1], ["v", 2], ["v", 3]]),
    ([], "static {} {} {} {} {} {} {:5d} {:.2f} {:>6} {:.2s}| {:e}",
     [["s", 3], ["s", 1.5], ["s", True], ["s", "str"], ["s", 1e-7], ["s", -0.0], ["s", 3],
      ["s", 1.5], ["s", True], ["s", "str"], ["s", 1e-7]]),
    ([], "unicode \u00e9 {}{{ {:\u00e9^7} \"quoted\" \\ \t",
     [["s", "\u00fc\U0001f600"], ["s", "ab"]]),
    ([np.array([1.0, 2.0]), np.array(3, np.int16)], None,
     [["s", "plain"], ["v", 0], ["s", 3], ["v", 1], ["s", 2.5], ["s", False]]),
    ([np.complex64(0.1 + 2j), np.complex128(-1j), np.complex64(complex(0, np.nan)),
      np.complex128(complex(-0.0, -np.inf)), np.complex64(complex(np.nan, -0.0))],
     "{} {} {} {} {}|", [["v", k] for k in range(5)]),
    ([np.complex64(0.1 + 2j), np.complex128(-1j), np.complex64(complex(0, np.nan)),
      np.complex128(complex(-0.0, -np.inf)), np.complex64(complex(1e7, 1e-5))], None,
     [["v", k] for k in range(5)]),
])
def test_format_strings_as_python(printer, operands, fmt, template):
    same_print(printer, operands, fmt, template)


def test_sep_and_end(printer):
    assert same_print(printer, [np.arange(3)], None, [["v", 0], ["s", "|"]], sep="--",
                      end="!\n") == "[0 1 2]--|!\n"
    assert same_print(printer, [], None, [], end="") == ""


def test_documented_differences(printer):
    """Where Python raises or prints a repr, the C printer prints str or the field as written."""
    x, v = np.float32(2.5), np.array([1.0, 2.0], np.float32)
    template = [["v", 0], ["v", 1]]
    assert c_printed(printer, [x, v], "{0!r} {1:>20} {1!r}", template) == "2.5 [1. 2.] [1. 2.]\n"
    text = "{x.shape} {0[1]} {0:{w}} {0:,} {9} {nope} {0:q} {"
    assert c_printed(printer, [x, v], text, template) == text + "\n"
    z = np.complex64(1 + 2j)
    assert c_printed(printer, [z], "{0:.2f} {0:>8} {0}", [["v", 0]]) == "{0:.2f} {0:>8} (1+2j)\n"


SHOUT = textwrap.dedent("""
    import kiln

    def shout(x, n):
        kiln.debug.print("x = {} and n={n}!", x, n=n)
        print("plain", x, n, sep=", ")
        return x + 1
""")

CALLER = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    lib = ctypes.CDLL(sys.argv[1])
    x = np.array([1.5, -2.0, 3.0, 1e-5], np.float32)
    n, out = np.array(7, np.int32), np.zeros(4, np.float32)
    print("status", lib.shout_shout(*[ctypes.c_void_p(a.ctypes.data) for a in (x, n, out)]))
""")


def test_compiled_library_prints_as_jit(tmp_path, capsys):
    (tmp_path / "shout.py").write_text(SHOUT)
    x, n = np.array([1.5, -2.0, 3.0, 1e-5], F32), np.int32(7)
    manifest = compile_library([Target(kiln.cli.commands.load_target(f"{tmp_path}/shout.py:shout"),
                                       (x, n), source=f"{tmp_path}/shout.py:shout")],
                               tmp_path / "lib")
    assert manifest["name"] == "shout" and "debug_print" in manifest["functions"][0]["uses"]
    assert "_kiln_default_debug_print" in (tmp_path / "lib" / "shout_glue.c").read_text()
    result = subprocess.run([sys.executable, "-c", CALLER, str(tmp_path / "lib" / "libshout.so")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    capsys.readouterr()
    kiln.jit(kiln.cli.commands.load_target(f"{tmp_path}/shout.py:shout"))(x, n)
    assert result.stdout == capsys.readouterr().out + "status 0\n"
    assert result.stdout.startswith("x = [ 1.5e+00 -2.0e+00  3.0e+00  1.0e-05] and n=7!\n")


def test_libraries_that_do_not_print_have_no_printer(recorded):
    assert "_kiln_default_debug_print" not in (recorded[0] / "rec_glue.c").read_text()
