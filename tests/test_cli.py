"""The `kiln` command line: `kiln show` stages, targets, argument specs, colours and exit codes.

Most tests run `main([...])` in-process on small functions written to files under tmp_path; one
test runs the installed `kiln` console script. The argument-spec grammar is tested directly
(every form, canonical round trip, example values) and through the command (carets).
"""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
from kiln.compiler import argspec, cli

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
    try:
        return x
    except ValueError:
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
    _assert_located(err, sample, SAMPLE.splitlines().index("    try:") + 1, "try:")


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

def test_color_always_highlights_and_strips_to_plain(capsys, sample):
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


def test_highlighter_leaves_non_python_alone():
    text = "define i32 @f() {\n  ret i32 0\n"
    assert cli.highlight_python(text) == text


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
