"""The C that kiln ships (kiln/compiler/aot/c/): package data, read at run time and pasted into
the glue of `kiln compile` libraries; each glue they make compiles with -Wall -Werror.

tests/test_aot_glue.py runs the printer and the BLAS lookup; tests/test_aot_c.py builds C
programs against compiled libraries."""
import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kiln.compiler.aot import glue
from kiln.compiler.aot.glue import c_source, glue_source, GlueFunction, Module, Param

CC = os.environ.get("CC") or "cc"
C_DIR = Path(glue.__file__).with_name("c")
SHIPPED = {"debug_print.c", "glue_mpi.c", "glue_prelude.h", "glue_runtime.c"}
ROOT = Path(__file__).resolve().parents[1]

needs_cc = pytest.mark.skipif(shutil.which(CC) is None,
                              reason=f"no C compiler: {CC} is not installed")
BLAS = {"name": "openblas", "path": "/nowhere/libopenblas.so", "int_bits": 64,
        "symbols": {"sgemm": "sgemm_64_"}}


def test_the_c_files_are_package_data():
    assert {p.name for p in C_DIR.iterdir()} == SHIPPED
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    patterns = [p.strip() for p in config["options.package_data"]["kiln.compiler.aot"].split(",")]
    assert all(any(Path("c", name).match(p) for p in patterns) for name in SHIPPED)
    assert c_source("debug_print.c") == (C_DIR / "debug_print.c").read_text()


def _function(name, entry):
    return GlueFunction(name=name, entry=entry, inputs=[Param("x", "float", "f32[4]", "x")],
                        outputs=[Param("y", "float", "f32[4]", "result")], constants=[],
                        workspace=256,
                        blas=["kiln_sgemm"],
                        summary=f"{name}(f32[4]) -> f32[4]")


@needs_cc
@pytest.mark.parametrize("prints", [False, True], ids=["plain", "printing"])
def test_the_glue_compiles_with_warnings_as_errors(tmp_path, prints):
    externs = ["kiln_num_threads", "kiln_sgemm"] + (["kiln_debug_print"] if prints else [])
    source = glue_source("demo", [_function("f", "kiln.f.0.kiln_main")],
                         [Module("kiln.f.0", externs)], BLAS, "0.test", -7)
    assert ("_kiln_default_debug_print" in source) == prints
    # glue_mpi.c joins only libraries compiled for several processes (test_aot_mpi.py)
    for name in SHIPPED - {"glue_mpi.c"} - ({"debug_print.c"} if not prints else set()):
        assert c_source(name) in source, name
    path = tmp_path / "demo_glue.c"
    path.write_text(source)
    done = subprocess.run([CC, "-c", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
                           str(tmp_path / "demo_glue.o"), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["nm", str(tmp_path / "demo_glue.o")], capture_output=True,
                             text=True).stdout if shutil.which("nm") else ""
    for exported in ("demo_init", "demo_bind_extern", "demo_strerror", "demo_f"):
        assert not symbols or exported in symbols, exported
