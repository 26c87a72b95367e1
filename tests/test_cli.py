"""The `kiln` command line: `kiln show` stages (Python, fused, LLVM IR, assembly), targets,
argument specs, colours, `kiln doctor`, `kiln cache`, and every error path's message and exit code.

Most tests run `main([...])` in-process on small functions written to files under tmp_path; one
test runs the installed `kiln` console script and one runs the command in a fresh interpreter
where llvmlite cannot be imported. The argument-spec grammar is tested directly (every form,
canonical round trip, example values) and through the command (carets). Doctor's probes of
optional backends are tested against absent and fake packages (CuPy, mpi4py, nvcc, PJRT
plug-ins), and the highlighters both through Pygments and with Pygments made unimportable.
"""
import os
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
from kiln.cli import commands as cli, doctor
from kiln.compiler import argspec, highlight

ROOT = Path(__file__).resolve().parents[1]
MLP_PARAMS = "list[(f32[784,512],f32[512]),(f32[512,512],f32[512]),(f32[512,10],f32[10])]"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

SAMPLE = '''
import kiln
import kiln.numpy as jnp
import helper

SCALE = 3.0

def dead(x):
    unused = x * SCALE
    return x + 1.0

def reshape(x, n, scale=1.0):
    return jnp.reshape(x, (n, -1)) * scale

def tree(p, xs, d):
    a, b = p
    return a @ b, xs[0] + xs[1], d['W'] @ d['b']

def kinds(m, i, z):
    return jnp.where(m, i, 0), z * 2

def uses_helper(x):
    return helper.double(x)

def bad_syntax(x):
    for _ in range(2):
        x = x + 1
    else:
        x = x * 2
    return x

def bad_shapes(x, y):
    return x + y

def concrete(x):
    return jnp.zeros((x.sum(),))

class Model:
    @staticmethod
    def forward(x):
        return jnp.tanh(x)

    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale

model = Model(2.0)

@kiln.jit
def jitted(x):
    return jnp.sin(x)

NOT_A_FUNCTION = 3
'''


@pytest.fixture(autouse=True)
def _isolated_imports(monkeypatch, tmp_path):
    """Keep sys.path as it was and forget the modules imported from tmp_path."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.fixture
def sample(tmp_path):
    (tmp_path / "helper.py").write_text("def double(x):\n    return x * 2\n")
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    return path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def show(capsys, target, *args, stage="simplified", static=(), extra=()):
    argv = ["show", target, "--stage", stage, *extra]
    for spec in args:
        argv += ["--arg", spec]
    for item in static:
        argv += ["--static", item]
    return run(capsys, *argv)


def sample_module(path):
    return next(m for m in sys.modules.values()
                if getattr(m, "__file__", None) == str(path))


# ------------------------------------------------------------------------------------ stages

def test_source_stage_prints_the_function(capsys, sample):
    code, out, err = show(capsys, f"{sample}:dead", stage="source")
    assert code == 0 and err == ""
    assert out == "def dead(x):\n    unused = x * SCALE\n    return x + 1.0\n"


def test_source_stage_of_a_method_is_dedented(capsys, sample):
    code, out, _ = show(capsys, f"{sample}:Model.forward", stage="source")
    assert code == 0
    assert out.startswith("@staticmethod\ndef forward(x):\n")


def test_ssa_and_simplified_stages_match_the_python_api(capsys, sample):
    code, ssa, _ = show(capsys, f"{sample}:dead", "f32[3]", stage="ssa")
    assert code == 0
    code, simplified, _ = show(capsys, f"{sample}:dead", "f32[3]", stage="simplified")
    assert code == 0
    fn = sample_module(sample).dead
    x = np.zeros(3, np.float32)
    assert ssa.rstrip("\n") == str(kiln.make_ir(fn)(x)).rstrip("\n")
    assert simplified.rstrip("\n") == kiln.jit(fn).lower(x).as_text().rstrip("\n")
    assert "mul(" in ssa and "mul(" not in simplified  # the dead multiply is gone
    assert "x: 'f32[3]'" in simplified


def test_default_stage_is_simplified(capsys, sample):
    code, out, _ = run(capsys, "show", f"{sample}:dead", "--arg", "f32[3]")
    assert code == 0 and "mul(" not in out and "add(" in out


def test_mlp_sample_simplified(capsys):
    code, out, err = show(capsys, f"{ROOT / 'samples' / 'mlp.py'}:loss", MLP_PARAMS,
                          "f32[128,784]", "f32[128,10]")
    assert code == 0, err
    assert out.startswith("def loss(")
    assert out.count("dot_general(") == 3 and out.count("tanh(") == 3
    assert "'f32[128,784]'" in out and "-> 'f32[]'" in out


def test_installed_console_script(tmp_path):
    script = Path(sys.executable).with_name("kiln")
    if not script.exists():
        pytest.skip("the kiln console script is not installed (pip install -e .)")
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"kiln {kiln.__version__}"
    proc = subprocess.run(
        [str(script), "show", "samples/mlp.py:loss", "--arg", MLP_PARAMS, "--arg",
         "f32[128,784]", "--arg", "f32[128,10]", "--stage", "simplified"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("def loss(") and "\x1b[" not in proc.stdout
    bad = subprocess.run([str(script), "show", "samples/mlp.py:loss", "--arg", "f32[3,4"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "expected ']' after the dimensions" in bad.stderr


# ------------------------------------------------------------------------------ static args

def test_positional_literal_is_static(capsys, sample):
    code, out, err = show(capsys, f"{sample}:reshape", "f32[6]", "2")
    assert code == 0, err
    assert "-> 'f32[2,3]'" in out
    assert "n:" not in out.splitlines()[0]  # static: not an SSA input


def test_static_keyword(capsys, sample):
    code, out, err = show(capsys, f"{sample}:reshape", "f32[6]", static=["n=3", "scale=2.0"])
    assert code == 0, err
    assert "-> 'f32[3,2]'" in out and "2.0" in out


def test_static_value_with_arrays_is_a_usage_error(capsys, sample):
    code, _, err = show(capsys, f"{sample}:reshape", "f32[6]", static=["n=f32[3]"])
    assert code == 2 and "holds array specs" in err


@pytest.mark.parametrize("item", ["n", "=3", "1n=3"])
def test_static_needs_name_equals_value(capsys, sample, item):
    code, _, err = show(capsys, f"{sample}:reshape", "f32[6]", static=[item])
    assert code == 2 and "expected NAME=VALUE" in err


def test_bad_static_value_has_a_caret(capsys, sample):
    code, _, err = show(capsys, f"{sample}:reshape", "f32[6]", static=["n=(3,"])
    assert code == 2
    assert "bad --static value for n: expected a value" in err
    assert err.rstrip("\n").endswith("    (3,\n       ^")


# ------------------------------------------------------------------------- spec forms (CLI)

def test_containers_tuple_list_dict(capsys, sample):
    code, out, err = show(capsys, f"{sample}:tree", "(f32[2,3],f32[3,4])",
                          "list[f32[5],f32[5]]", "{'W':f32[2,3],b:f32[3]}")
    assert code == 0, err
    assert "-> '(f32[2,4], f32[5], f32[2])'" in out


def test_bool_int_and_scalar_dtypes(capsys, sample):
    code, out, err = show(capsys, f"{sample}:kinds", "bool[3]", "i32[]", "u8[2,2]")
    assert code == 0, err
    assert "'bool[3]'" in out and "'i32[]'" in out and "'u8[2,2]'" in out
    assert "-> '(i32[3], u8[2,2])'" in out


def test_file_imports_its_neighbours(capsys, sample):
    code, out, err = show(capsys, f"{sample}:uses_helper", "f32[2]")
    assert code == 0, err
    assert "mul(" in out


# ------------------------------------------------------------------------------------ targets

def test_bound_method_and_jitted_targets(capsys, sample):
    code, out, err = show(capsys, f"{sample}:model.apply", "f32[2]")
    assert code == 0, err
    assert "mul(" in out and "2.0" in out
    code, out, err = show(capsys, f"{sample}:jitted", "f32[2]")
    assert code == 0, err
    assert "sin(" in out


def test_module_target(capsys, tmp_path, monkeypatch):
    package = tmp_path / "kiln_cli_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text("import kiln.numpy as jnp\n\n"
                                    "def f(x):\n    return jnp.exp(x)\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = show(capsys, "kiln_cli_pkg.ops:f", "f32[4]")
    assert code == 0, err
    assert "exp(" in out


@pytest.mark.parametrize("target, message", [
    ("{dir}/missing.py:f", "no such file"),
    ("{sample}:nope", "has no attribute 'nope'"),
    ("{sample}:Model.nope", "has no attribute 'Model.nope'"),
    ("{sample}:NOT_A_FUNCTION", "is a int, not a function"),
    ("{sample}", "expected FILE.py:FUNC or package.module:FUNC"),
    ("{sample}:", "expected FILE.py:FUNC or package.module:FUNC"),
    ("no_such_kiln_module.sub:f", "no module named 'no_such_kiln_module'"),
])
def test_bad_targets_are_usage_errors(capsys, sample, target, message):
    target = target.format(dir=sample.parent, sample=sample)
    code, out, err = show(capsys, target, "f32[3]")
    assert code == 2 and out == ""
    assert "kiln show: error: bad target" in err and message in err


def test_unknown_stage_is_a_usage_error(capsys, sample):
    code, _, err = show(capsys, f"{sample}:dead", "f32[3]", stage="llvm-nope")
    assert code == 2 and "invalid choice: 'llvm-nope'" in err


def test_wrong_number_of_args_is_a_usage_error(capsys, sample):
    code, _, err = show(capsys, f"{sample}:bad_shapes", "f32[3]")
    assert code == 2
    assert "bad_shapes(x, y): missing a required argument: 'y'" in err
    code, _, err = show(capsys, f"{sample}:dead", "f32[3]", "f32[3]")
    assert code == 2 and "too many positional arguments" in err


def test_importing_a_broken_file_exits_1_with_its_traceback(capsys, tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nraise RuntimeError('boom at import')\n")
    code, out, err = show(capsys, f"{path}:f", "f32[3]")
    assert code == 1 and out == ""
    assert f"importing {path} failed" in err and "boom at import" in err
    assert str(path) in err and "importlib" not in err


def test_syntax_error_in_file_exits_1(capsys, tmp_path):
    path = tmp_path / "syntax.py"
    path.write_text("def f(x):\n    return x +\n")
    code, _, err = show(capsys, f"{path}:f", "f32[3]")
    assert code == 1 and "SyntaxError" in err and "line 2" in err


# ----------------------------------------------------------------------------- compile errors

def _assert_located(err, path, line, source):
    assert "Traceback" not in err
    assert f'File "{path}", line {line}' in err
    lines = err.splitlines()
    i = next(k for k, text in enumerate(lines) if text.strip() == source)
    assert lines[i + 1].strip().startswith("^")


def test_unsupported_syntax_exits_1_with_location(capsys, sample):
    code, out, err = show(capsys, f"{sample}:bad_syntax", "f32[3]")
    assert code == 1 and out == ""
    assert err.startswith("kiln show: error: CompileError:")
    _assert_located(err, sample, SAMPLE.splitlines().index("    for _ in range(2):") + 1,
                    "for _ in range(2):")


def test_shape_error_exits_1_with_location(capsys, sample):
    code, _, err = show(capsys, f"{sample}:bad_shapes", "f32[3]", "f32[4]", stage="ssa")
    assert code == 1
    assert "(3,)" in err and "(4,)" in err
    _assert_located(err, sample, SAMPLE.splitlines().index("    return x + y") + 1,
                    "return x + y")


def test_concretization_exits_1_with_location(capsys, sample):
    code, _, err = show(capsys, f"{sample}:concrete", "i32[3]")
    assert code == 1
    _assert_located(err, sample, SAMPLE.splitlines().index(
        "    return jnp.zeros((x.sum(),))") + 1, "return jnp.zeros((x.sum(),))")


# ------------------------------------------------------------------------- malformed specs

BAD_SPECS = [
    ("f32[3,4", "expected ']' after the dimensions", 7),
    ("f32[3 4]", "expected ']' after the dimensions", 6),
    ("f32", "expected '[' after the dtype (write f32[] for a scalar)", 3),
    ("f33[3]", "unknown dtype 'f33'", 0),
    ("(f32[3],f32[2]", "expected ',' or ')' in the tuple", 14),
    ("[f32[3] f32[2]]", "expected ',' or ']' in the list", 8),
    ("{'W' f32[3]}", "expected ':' after the dict key", 5),
    ("{W:f32[3] b:f32[2]}", "expected ',' or '}' in the dict", 10),
    ("{3:f32[3]}", "expected a dict key", 1),
    ("{a:1,a:2}", "duplicate key 'a'", 5),
    ("f32[-1]", "expected a dimension", 4),
    ("f32[2.5]", "expected ']' after the dimensions", 5),
    ("f32[3] i32[]", "unexpected 'i' after the end of the spec", 7),
    ("", "expected a value", 0),
    ("(f32[3],", "expected a value", 8),
    ("'abc", "unterminated string", 0),
    ("@", "unexpected '@'", 0),
    ("-", "expected a number", 0),
    ("list(f32[3])", "expected '[' after 'list'", 4),
    ("[1, 2]", "must be hashable", 0),
    ("(1, {'a': 2})", "must be hashable", 4),
    ("(f32[3], 'relu')", "a string can only be a static argument", 9),
]


@pytest.mark.parametrize("text, message, pos", BAD_SPECS)
def test_malformed_spec_error(text, message, pos):
    with pytest.raises(argspec.SpecError) as info:
        argspec.parse(text)
    assert message in info.value.message
    assert info.value.pos == pos
    assert str(info.value).splitlines()[-1] == "    " + " " * pos + "^" * _width(str(info.value))


def _width(message):
    return message.splitlines()[-1].count("^")


@pytest.mark.parametrize("text, message, pos", BAD_SPECS[:4])
def test_malformed_spec_is_a_usage_error_with_caret(capsys, sample, text, message, pos):
    code, out, err = show(capsys, f"{sample}:dead", text)
    assert code == 2 and out == ""
    lines = err.rstrip("\n").splitlines()
    assert f"kiln show: error: bad --arg spec: {message}" in err
    assert lines[-2] == "    " + text
    assert lines[-1].index("^") == 4 + pos


def test_the_briefs_example_message(capsys, sample):
    code, _, err = show(capsys, f"{sample}:dead", "f32[3,4")
    assert code == 2
    assert err.endswith("kiln show: error: bad --arg spec: expected ']' after the dimensions\n"
                        "    f32[3,4\n"
                        "           ^\n")


# ---------------------------------------------------------------------- spec forms (parser)

GOOD_SPECS = [
    ("f32[784,512]", "f32[784,512]", False),
    ("i32[]", "i32[]", False),
    (" bool[ 3 ] ", "bool[3]", False),
    ("f32[3,]", "f32[3]", False),
    ("f32[0,1]", "f32[0,1]", False),
    ("(f32[3],i32[])", "(f32[3],i32[])", False),
    ("(f32[3],)", "(f32[3],)", False),
    ("(f32[3])", "f32[3]", False),
    ("[f32[3], f32[3]]", "[f32[3],f32[3]]", False),
    ("[f32[2]]", "[f32[2]]", False),
    ("[]", "[]", False),
    ("{}", "{}", False),
    ("([], None)", "([],None)", False),
    ("list[(f32[784,512],f32[512]),(f32[512,10],f32[10])]",
     "[(f32[784,512],f32[512]),(f32[512,10],f32[10])]", False),
    ("{'W':f32[3,4],b:f32[4]}", "{'W':f32[3,4],'b':f32[4]}", False),
    ('{"W": f32[3], }', "{'W':f32[3]}", False),
    ("(f32[3], 2, None)", "(f32[3],2,None)", False),
    ("3", "3", True),
    ("-3", "-3", True),
    ("2.5", "2.5", True),
    ("1e-3", "0.001", True),
    (".5", "0.5", True),
    ("True", "True", True),
    ("False", "False", True),
    ("None", "None", False),
    ("'relu'", "'relu'", True),
    ('"a\\"b"', "'a\"b'", True),
    ("()", "()", False),
    ("(1, (2.0, 'x'), None)", "(1,(2.0,'x'),None)", True),
]


@pytest.mark.parametrize("text, canonical, static", GOOD_SPECS)
def test_spec_forms(text, canonical, static):
    spec = argspec.parse(text)
    assert str(spec) == canonical
    assert spec.static is static
    again = argspec.parse(canonical)
    assert again.value == spec.value and type(again.value) is type(spec.value)


@pytest.mark.parametrize("name", argspec.DTYPE_NAMES)
def test_every_short_dtype_name(name):
    spec = argspec.parse(f"{name}[2,3]")
    value = spec.example()
    assert value.shape == (2, 3) and kiln.compiler.ir.dtypes.short_name(value.dtype) == name
    assert not value.any()


def test_examples_are_zeros_of_each_leaf():
    spec = argspec.parse("{'p': [(f32[2,3], i8[]), None], 'n': 4}")
    value = spec.example()
    (w, s), none = value["p"]
    assert none is None and value["n"] == 4
    assert (w.shape, w.dtype, s.shape, s.dtype) == ((2, 3), np.float32, (), np.int8)
    huge = argspec.parse("f32[100000,100000]").example()  # no memory for a large spec
    assert huge.shape == (100000, 100000) and huge.strides == (0, 0)


_dtype_names = st.sampled_from(argspec.DTYPE_NAMES)
_arrays = st.builds(argspec.ArraySpec, _dtype_names.map(kiln.compiler.ir.dtypes.from_short_name),
                    st.lists(st.integers(0, 1000), max_size=4))
_leaves = st.one_of(_arrays, st.integers(-10**6, 10**6), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False))
_trees = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner), st.tuples(inner, inner),
    st.dictionaries(st.from_regex(r"[A-Za-z_]\w{0,5}", fullmatch=True), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(_trees)
def test_canonical_form_round_trips(tree):
    text = argspec._format(tree)
    try:
        spec = argspec.parse(text)
    except argspec.SpecError as e:  # only the static-hashability rule may refuse it
        assert "must be hashable" in e.message
        return
    assert spec.value == tree
    assert str(spec) == text


# ------------------------------------------------------------------------- colour, version

@pytest.fixture
def no_pygments(monkeypatch):
    """Make `import pygments` fail, so that the built-in highlighter runs."""
    monkeypatch.setitem(sys.modules, "pygments", None)


def test_builtin_color_highlights_and_strips_to_plain(capsys, sample, no_pygments):
    _, plain, _ = show(capsys, f"{sample}:dead", "f32[3]", stage="ssa", extra=["--color", "never"])
    code, colored, _ = show(capsys, f"{sample}:dead", "f32[3]", stage="ssa",
                            extra=["--color", "always"])
    assert code == 0 and "\x1b[" not in plain
    assert ANSI.sub("", colored) == plain
    assert "\x1b[1;35mdef\x1b[0m" in colored            # keyword
    assert "\x1b[1;36mmul\x1b[0m(" in colored           # primitive
    assert "\x1b[32m# f32[3]\x1b[0m" in colored         # type comment


def test_color_auto_is_off_when_not_a_tty(capsys, sample):
    code, out, _ = show(capsys, f"{sample}:dead", "f32[3]", extra=["--color", "auto"])
    assert code == 0 and "\x1b[" not in out


@pytest.mark.parametrize("tty, no_color, expected", [
    (True, None, True), (True, "1", False), (False, None, False)])
def test_color_auto_follows_the_terminal_and_no_color(monkeypatch, tty, no_color, expected):
    monkeypatch.setattr(sys, "stdout", type("Out", (), {"isatty": lambda self: tty})())
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert cli._use_color("auto") is expected
    assert cli._use_color("always") and not cli._use_color("never")


def test_highlighter_leaves_non_python_alone():
    text = "define i32 @f() {\n  ret i32 0\n"
    assert highlight.highlight_python(text) == text


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"kiln {kiln.__version__}"


def test_no_command_is_a_usage_error(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "required" in err


def test_help_documents_the_grammar_and_the_docs_match(capsys):
    code, out, _ = run(capsys, "show", "--help")
    assert code == 0
    assert all(line.strip() in out for line in argspec.GRAMMAR.splitlines())
    for stage in cli.STAGES:
        assert stage in out
    docs = (ROOT / "docs" / "cli.md").read_text()
    assert argspec.GRAMMAR in docs
    for stage in cli.STAGES:
        assert f"`{stage}`" in docs
    for text in ("## `kiln doctor`", "## `kiln cache`", "`--cache-dir DIR`", "`KILN_CACHE_DIR`",
                 "`--color auto|always|never`", "`NO_COLOR`", "`--stage STAGE`"):
        assert text in docs.replace("\\|", "|"), text
    for title, probes in doctor.SECTIONS:
        assert title in docs and all(label in docs for label, _ in probes)



def test_located_type_error_exits_1(capsys, sample):
    code, out, err = show(capsys, f"{sample}:reshape", "f32[6]", "2", static=["scale=None"])
    assert code == 1 and out == ""
    assert err.startswith("kiln show: error: TypeError:")
    _assert_located(err, sample, SAMPLE.splitlines().index(
        "    return jnp.reshape(x, (n, -1)) * scale") + 1, "return jnp.reshape(x, (n, -1)) * scale")


def test_unhashable_static_value_is_a_usage_error(capsys, sample):
    code, _, err = show(capsys, f"{sample}:reshape", "f32[6]", static=["n=[]"])
    assert code == 2 and "is not hashable" in err


def test_concretization_error_mentions_the_command_line(capsys, sample):
    _, _, err = show(capsys, f"{sample}:concrete", "i32[3]")
    assert "--static NAME=VALUE" in err


# ------------------------------------------------------------------ native and fused stages

NATIVE = '''
import kiln.numpy as jnp

def f(x, y):
    return jnp.sum(jnp.tanh(x * 2.0 + y), axis=1)

def cosine(x):
    return jnp.cos(x) + 1.0

def vector(x):
    return jnp.sin(x) * 2.0
'''


@pytest.fixture
def native(tmp_path):
    path = tmp_path / "native.py"
    path.write_text(NATIVE)
    return path


def test_fused_stage_is_the_llvm_pipelines_output(capsys, native):
    code, out, err = show(capsys, f"{native}:f", "f32[4,5]", "f32[5]", stage="fused")
    assert code == 0, err
    assert "fusion(" in out and "body=" in out
    fn = sample_module(native).f
    x, y = np.zeros((4, 5), np.float32), np.zeros(5, np.float32)
    assert out.rstrip("\n") == kiln.jit(fn, backend="llvm").lower(x, y).as_text().rstrip("\n")


def test_llvm_stages_print_ir_and_assembly(capsys, native):
    target = f"{native}:f"
    code, optimised, err = show(capsys, target, "f32[4,5]", "f32[5]", stage="llvm")
    assert code == 0, err
    assert "define" in optimised and "kiln_main" in optimised
    code, unoptimised, err = show(capsys, target, "f32[4,5]", "f32[5]", stage="llvm-unoptimized")
    assert code == 0, err
    assert "define" in unoptimised and unoptimised != optimised
    code, asm, err = show(capsys, target, "f32[4,5]", "f32[5]", stage="asm")
    assert code == 0, err
    assert "kiln_main" in asm and re.search(r"^\s+ret", asm, re.M)  # an instruction


def test_native_stages_of_static_arguments_and_jitted_targets(capsys, sample):
    code, out, err = show(capsys, f"{sample}:reshape", "f32[6]", "2", stage="asm")
    assert code == 0, err
    assert "kiln_main" in out
    code, out, err = show(capsys, f"{sample}:jitted", "f32[2]", stage="llvm")
    assert code == 0, err
    assert "define" in out and "sin" in out


def test_missing_lowering_is_a_located_compile_error(capsys, native, monkeypatch):
    from kiln.compiler.primitives import PRIMITIVES
    code, _, err = show(capsys, f"{native}:cosine", "f32[3]", stage="llvm")
    assert code == 0, err
    from kiln.compiler.primitives.core import LLVM, LLVM_SCALAR
    for table in (LLVM_SCALAR, LLVM):
        monkeypatch.delitem(table, PRIMITIVES["cos"], raising=False)
    code, out, err = show(capsys, f"{native}:cosine", "f32[5]", stage="asm")
    assert code == 1 and out == ""
    assert err.startswith("kiln show: error: CompileError:") and "'cos'" in err
    _assert_located(err, native, NATIVE.splitlines().index("    return jnp.cos(x) + 1.0") + 1,
                    "return jnp.cos(x) + 1.0")


@pytest.mark.parametrize("stage", ["pjrt"])
def test_stages_of_absent_backends_are_not_offered(capsys, native, stage):
    """Only what this build has is listed; a stage of a backend it lacks is argparse's
    'invalid choice', with the valid ones."""
    code, out, err = show(capsys, f"{native}:vector", "f32[3]", stage=stage)
    assert code == 2 and out == ""
    assert f"invalid choice: '{stage}'" in err


def test_show_stablehlo(capsys, native):
    code, out, err = show(capsys, f"{native}:cosine", "f32[3]", stage="stablehlo")
    assert code == 0, err
    assert "func.func public @main(%arg0: tensor<3xf32>)" in out and "stablehlo.cosine" in out


def test_stage_help_lists_every_stage(capsys):
    code, out, _ = run(capsys, "show", "--help")
    assert code == 0
    for name in cli.STAGES:
        assert re.search(rf"^  {re.escape(name)} ", out, re.M), name
    for absent in ("pjrt", "not available"):
        assert absent not in out


def test_show_grad_and_compile_grad_agree_on_argnums(capsys, native, tmp_path):
    """`kiln show --stage grad` differentiates what `kiln compile --grad` exports: argument 0
    by default (as kiln.grad), or --argnums on both."""
    source = tmp_path / "two.py"
    source.write_text("def loss(w, x):\n    return (w * x).sum()\n")
    target = f"{source}:loss"
    for argnums, returns in ((None, "f32[3]"), ("1", "f32[3]"), ("0,1", "f32[3], f32[3]")):
        extra = [] if argnums is None else ["--argnums", argnums]
        code, out, err = show(capsys, target, "f32[3]", "f32[3]", stage="grad", extra=extra)
        assert code == 0, err
        assert f"-> ({returns})" in out.replace("'", "") or f"-> {returns}" in out.replace("'", "")
        code, out, err = run(capsys, "compile", target, "--arg", "f32[3]", "--arg", "f32[3]",
                             "--grad", *extra, "-o", str(tmp_path / f"lib{argnums}"))
        assert code == 0, err
        manifest = json.loads((tmp_path / f"lib{argnums}" / "manifest.json").read_text())
        assert len(manifest["functions"][0]["outputs"]) == returns.count("f32")
    code, _, err = show(capsys, target, "f32[3]", "f32[3]", stage="jvp", extra=["--argnums", "0"])
    assert code == 2 and "--argnums is an option of --stage grad" in err
    code, _, err = run(capsys, "compile", target, "--arg", "f32[3]", "--arg", "f32[3]",
                       "--argnums", "1", "-o", str(tmp_path / "x"))
    assert code == 2 and "give one of them too" in err


def test_vmap_options_belong_to_the_vmap_stage(capsys, native):
    code, _, err = show(capsys, f"{native}:vector", "f32[3]", stage="llvm", extra=["--in-axes", "0"])
    assert code == 2 and "--in-axes and --axis-name are options of --stage vmap" in err


def test_grad_of_a_non_scalar_output_is_a_clean_error(capsys, native):
    code, out, err = show(capsys, f"{native}:vector", "f32[3]", stage="grad")
    assert code == 1 and out == ""
    assert err.startswith("kiln show: error: TypeError: Gradient only defined for scalar-output "
                          "functions. Output had shape: (3,).")
    assert "Traceback" not in err and str(native) in err


def test_a_bug_in_kiln_still_shows_its_traceback(capsys, native, monkeypatch):
    def broken(fn, call):
        return argspec.ArraySpec(np.float32, None)  # TypeError inside kiln: not a `raise`
    monkeypatch.setitem(cli.STAGES, "ssa", cli.STAGES["ssa"]._replace(run=broken))
    code, _, err = show(capsys, f"{native}:vector", "f32[3]", stage="ssa")
    assert code == 1 and "compiling vector failed" in err and "Traceback" in err


def test_only_deliberate_errors_count_as_the_users():
    with pytest.raises(argspec.SpecError) as deliberate:
        argspec.parse("f32[")
    with pytest.raises(TypeError) as accidental:
        argspec.ArraySpec(np.float32, None)
    assert cli._is_user_error(deliberate.value)
    assert not cli._is_user_error(accidental.value)
    assert not cli._is_user_error(RuntimeError("x"))


@pytest.mark.parametrize("argv, message", [
    (["show", "{native}:vector", "--bogus"], "unrecognized arguments: --bogus"),
    (["show", "{native}:vector", "--color", "sometimes"], "invalid choice: 'sometimes'"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["cache"], "the following arguments are required: action"),
    (["cache", "empty"], "invalid choice: 'empty'"),
    (["doctor", "--verbose"], "unrecognized arguments: --verbose"),
])
def test_bad_options_are_usage_errors(capsys, native, argv, message):
    code, out, err = run(capsys, *[a.format(native=native) for a in argv])
    assert code == 2 and out == "" and message in err and err.startswith("usage: kiln")


# ------------------------------------------------------------------------------- colours

COLOR_STAGES = ["source", "ssa", "fused", "llvm", "llvm-unoptimized", "asm"]


@pytest.mark.parametrize("pygments", [True, False], ids=["pygments", "builtin"])
@pytest.mark.parametrize("stage", COLOR_STAGES)
def test_color_always_and_never(capsys, native, monkeypatch, stage, pygments):
    if not pygments:
        monkeypatch.setitem(sys.modules, "pygments", None)
    elif highlight.highlight_pygments("x", "python") is None:
        pytest.skip("Pygments is not installed")
    _, plain, _ = show(capsys, f"{native}:f", "f32[4,5]", "f32[5]", stage=stage,
                       extra=["--color", "never"])
    code, colored, err = show(capsys, f"{native}:f", "f32[4,5]", "f32[5]", stage=stage,
                              extra=["--color", "always"])
    assert code == 0, err
    assert "\x1b[" not in plain and "\x1b[" in colored
    assert ANSI.sub("", colored) == plain


def test_builtin_llvm_and_asm_colours(no_pygments):
    ir = "; c\ndefine i32 @f(ptr %a) {\nentry:\n  %x = load i32, ptr %a, !tbaa !0\n  ret i32 7\n}\n"
    colored = highlight.highlight(ir, "llvm")
    for piece, style in [("; c", "comment"), ("define", "keyword"), ("i32", "type"),
                         ("@f", "name"), ("%x", "name"), ("entry:", "label"), ("!0", "comment"),
                         ("7", "number"), ("load", "keyword")]:
        assert f"{highlight.STYLES[style]}{piece}{highlight.RESET}" in colored, piece
    asm = "f:\n\t.p2align 4\n\tmovq\t8(%rdi), %rax   # load\n\taddq\t$1, %rax\n\tret\n"
    colored = highlight.highlight(asm, "asm")
    for piece, style in [("f:", "label"), ("\t.p2align", "directive"), ("\tmovq", "keyword"),
                         ("%rdi", "name"), ("# load", "comment"), ("$1", "number")]:
        assert f"{highlight.STYLES[style]}{piece}{highlight.RESET}" in colored, piece
    assert ANSI.sub("", colored) == asm


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abi32%@!;#$.:_- \t\n\"0x9(),[]{}<>'")),
               max_size=80), st.sampled_from(["python", "llvm", "asm"]))
def test_builtin_highlighters_only_add_escapes(text, language):
    assert ANSI.sub("", highlight.BUILTIN[language](text)) == text


# -------------------------------------------------------------------------------- doctor

def test_doctor_prints_every_section(capsys):
    import llvmlite
    import llvmlite.binding as llvm
    code, out, err = run(capsys, "doctor")
    assert code == 0 and err == ""
    lines = out.splitlines()
    for title, probes in doctor.SECTIONS:
        assert title in lines
        for label, _ in probes:
            assert any(line.startswith(f"  {label} ") for line in lines), label
    row = {line[2:2 + doctor.LABEL_WIDTH].strip(): line[2 + doctor.LABEL_WIDTH:].strip()
           for line in lines if line.startswith("  ") and line[2] != " "}
    assert row["version"].startswith(kiln.__version__)
    assert row["numpy"] == np.__version__
    assert row["llvmlite"] == llvmlite.__version__
    assert row["LLVM"] == ".".join(map(str, llvm.llvm_version_info))
    assert row["host CPU"] == llvm.get_host_cpu_name()
    assert "enabled:" in row["CPU features"]
    assert "sgemm found" in row["kiln calls"] and "dgemm found" in row["kiln calls"]
    assert "error:" not in out


def test_probes_never_raise():
    def unavailable():
        raise doctor.Unavailable("thing not installed")
    assert doctor.probe(lambda: 1 / 0) == "error: ZeroDivisionError: division by zero"
    assert doctor.probe(unavailable) == "no: thing not installed"
    assert doctor.probe(lambda: 3) == "3"
    text = doctor.report([("broken", [("a", lambda: 1 / 0), ("b", lambda: "ok")])])
    assert text == "broken\n  a" + " " * (doctor.LABEL_WIDTH - 1) + \
        "error: ZeroDivisionError: division by zero\n  b" + " " * (doctor.LABEL_WIDTH - 1) + "ok\n"


def _doctor_row(label):
    probe = dict(p for _, probes in doctor.SECTIONS for p in probes)[label]
    return doctor.probe(probe)


def test_doctor_threads(monkeypatch):
    monkeypatch.setenv("KILN_NUM_THREADS", "3")
    assert _doctor_row("compiled loops") == "3 (KILN_NUM_THREADS)"
    monkeypatch.setenv("KILN_NUM_THREADS", "lots")
    assert _doctor_row("compiled loops").startswith("error: ValueError: KILN_NUM_THREADS='lots'")
    assert _doctor_row("BLAS").startswith("1 per call")


def test_doctor_reports_only_what_this_build_has():
    """No advice for backends kiln does not have."""
    text = doctor.report()
    assert _doctor_row("backends") == "cuda, exact, llvm, pjrt, reference"
    assert "not in this build" not in text


def test_doctor_mpi_rows(monkeypatch):
    """Whether several processes can run: mpi4py, the MPI library it loads, mpirun."""
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        assert _doctor_row("mpi4py") == "no: mpi4py not installed (pip install 'kiln[mpi]')"
    else:
        import mpi4py
        assert _doctor_row("mpi4py").startswith(mpi4py.__version__ + " (")
        assert "MPI" in _doctor_row("MPI library") and "error" not in _doctor_row("MPI library")
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert _doctor_row("mpi4py") == "no: mpi4py not installed (pip install 'kiln[mpi]')"
    assert _doctor_row("MPI library") == "no: needs mpi4py, which is not installed"
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    assert _doctor_row("mpirun").startswith("no: no mpirun beside this Python or on PATH")


def test_doctor_cache_rows(monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    assert _doctor_row("path") == str(tmp_path / "llvm")
    assert _doctor_row("size") == "0 entries, 0 bytes"
    monkeypatch.setenv("KILN_CACHE_DIR", "off")
    assert _doctor_row("path") == "no: disabled (KILN_CACHE_DIR='off')"


def test_format_bytes():
    assert doctor.format_bytes(0) == "0 bytes"
    assert doctor.format_bytes(1023) == "1023 bytes"
    assert doctor.format_bytes(1536) == "1.5 KiB (1536 bytes)"
    assert doctor.format_bytes(3 * 2**30) == "3.0 GiB (3221225472 bytes)"


WITHOUT_LLVMLITE = '''
import sys
sys.modules["llvmlite"] = None      # `import llvmlite` fails as if it were not installed
from kiln.cli import commands as cli
codes = [cli.main(["doctor"]), cli.main(["cache", "info"]),
         cli.main(["show", sys.argv[1], "--arg", "f32[3]", "--stage", "llvm"]),
         cli.main(["show", sys.argv[1], "--arg", "f32[3]", "--stage", "fused"])]
print("codes", codes)
'''


def test_without_llvmlite_doctor_reports_and_native_stages_fail_cleanly(native):
    proc = subprocess.run([sys.executable, "-c", WITHOUT_LLVMLITE, f"{native}:vector"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("codes [0, 1, 1, 0]")
    assert re.search(r"^  llvmlite +no: llvmlite not installed", proc.stdout, re.M)
    assert re.search(r"^  host CPU +no: needs llvmlite", proc.stdout, re.M)
    assert re.search(r"^  numpy +" + re.escape(np.__version__), proc.stdout, re.M)
    assert "fusion(" in proc.stdout
    assert proc.stderr.count("error: the LLVM backend is unavailable") == 2
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------- cache

def _fill_cache(root, sizes):
    from kiln.compiler.backends.llvm import disk_cache
    cache = disk_cache.DiskCache(root / "llvm")
    for i, size in enumerate(sizes):
        assert cache.store(disk_cache.key(str(i)), b"x" * size)
    return cache.info()["bytes"]


def test_cache_info_and_clear(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    total = _fill_cache(tmp_path, [100, 2000])
    code, out, _ = run(capsys, "cache", "info")
    assert code == 0
    assert out == (f"path     {tmp_path / 'llvm'}\nentries  2\n"
                   f"size     {doctor.format_bytes(total)}\n")
    code, out, _ = run(capsys, "cache", "clear")
    assert code == 0
    assert out == f"removed 2 entries ({doctor.format_bytes(total)}) from {tmp_path / 'llvm'}\n"
    code, out, _ = run(capsys, "cache", "info")
    assert code == 0 and "entries  0\n" in out and "size     0 bytes" in out


def test_cache_dir_option_overrides_the_environment(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "env"))
    _fill_cache(tmp_path / "option", [10])
    code, out, _ = run(capsys, "cache", "info", "--cache-dir", tmp_path / "option")
    assert code == 0 and f"path     {tmp_path / 'option' / 'llvm'}" in out and "entries  1" in out
    assert os.environ["KILN_CACHE_DIR"] == str(tmp_path / "env")   # restored
    monkeypatch.delenv("KILN_CACHE_DIR")
    code, out, _ = run(capsys, "cache", "clear", "--cache-dir", tmp_path / "option")
    assert code == 0 and out.startswith("removed 1 entries")
    assert "KILN_CACHE_DIR" not in os.environ


@pytest.mark.parametrize("action", ["info", "clear"])
def test_disabled_cache(capsys, monkeypatch, action):
    monkeypatch.setenv("KILN_CACHE_DIR", "off")
    code, out, _ = run(capsys, "cache", action)
    assert code == 0 and out == "the disk cache is disabled (KILN_CACHE_DIR='off')\n"


def test_doctor_devices():
    # the suite runs with KILN_NUM_CPU_DEVICES=8 (conftest.py)
    assert _doctor_row("devices") == ("8 CPU devices (KILN_NUM_CPU_DEVICES), for pmap and "
                                      "shard_map")
    assert _doctor_row("processes") == "process 0 of 1"


def test_show_cuda_and_ptx(capsys, native):
    code, out, err = show(capsys, f"{native}:vector", "f32[3]", stage="cuda")
    assert code == 0, err
    assert '__global__ void kiln_' in out and "blockIdx.x" in out
    from kiln.compiler.backends.cuda import nvrtc
    if not nvrtc.available()[0]:
        pytest.skip(nvrtc.available()[1])
    code, out, err = show(capsys, f"{native}:vector", "f32[3]", stage="ptx")
    assert code == 0, err
    assert ".target sm_90" in out


def test_doctor_cuda_rows(monkeypatch):
    from kiln.compiler.backends.cuda import launch, nvrtc
    monkeypatch.setattr(nvrtc, "available", lambda: (False, "NVRTC not found (pip install x)"))
    assert _doctor_row("NVRTC") == "no: NVRTC not found (pip install x)"
    monkeypatch.setattr(nvrtc, "available", lambda: (True, "13.5"))
    assert _doctor_row("NVRTC").startswith("13.5 (compiles the CUDA backend's kernels")
    monkeypatch.setattr(launch, "available", lambda: (False, "CuPy is not installed"))
    assert _doctor_row("GPU") == "no: CuPy is not installed"
