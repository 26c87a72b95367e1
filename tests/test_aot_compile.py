"""`kiln compile` and kiln.cli.aot.compile_library: the files an ahead-of-time build writes,
the manifest, and the library itself, called here with ctypes (not through kiln.aot.load, which
has its own tests) and compared with kiln.jit; every error path of the command.

Compiling is slow, so each library is built once per module (module-scoped fixtures), with
several functions per library where their signatures agree.
"""
import ctypes
import hashlib
import json
import os
import pathlib
import tempfile
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy
from kiln.cli import commands as cli
from kiln.cli.aot import compile_library
from kiln.compiler.aot import AOTUsageError, Target
from kiln.compiler.aot.targets import library_name

SAMPLES = textwrap.dedent('''
    import collections
    import numpy as np
    import kiln
    import kiln.numpy as jnp

    TABLE = np.arange(16384, dtype=np.float32).reshape(128, 128) / 16384   # closed over: a constant

    def ew(x, y):
        return jnp.tanh(x) * y + 1.0

    def mm(x, y):   # a matrix times a vector: BLAS (sgemv)
        return x @ y[0] + TABLE[0]

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    def collatz(n):
        steps = 0
        while n != 1:
            n = jnp.where(n % 2 == 0, n // 2, 3 * n + 1)
            steps = steps + 1
        return steps

    def double_until(x):
        while jnp.sum(x) < 100.0:
            x = x * 2.0
        return jnp.sum(x * x)

    def tree(p, x, scale=1.0):
        h = jnp.tanh(x @ p["W"] + p["b"]) * scale
        return {"h": h, "stats": (jnp.mean(h), jnp.max(h) > 0.5)}

    def big(x):
        return jnp.sin(x) * jnp.cos(x) + jnp.exp(-x * x)

    def shout(x):
        kiln.debug.print("x = {}", x)
        return x + 1

    def located(x):
        return x.reshape(7)

    def text(x):
        return "hello"

    def ordered(x):
        return collections.OrderedDict(a=x)

    def reserved(args, status):   # parameters named like the C glue's locals
        return args * status

    def init(x):
        return x

    def twice(x):
        return x + x

    def static_first(n, x):
        return jnp.sum(x) * n

    def normalize(x):   # a collective over the vmapped axis "i"
        return x / kiln.lax.psum(jnp.sum(x), "i")
''')


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    directory = tmp_path_factory.mktemp("aot_samples")
    (directory / "aot_samples.py").write_text(SAMPLES)
    return directory


@pytest.fixture(scope="module")
def module(samples):
    return cli.load_target(f"{samples}/aot_samples.py:ew").__globals__


def run(argv, capsys):
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def built(samples, tmp_path_factory):
    """Libraries compiled once for the module: name -> (directory, manifest)."""
    root = tmp_path_factory.mktemp("aot_libs")
    src = f"{samples}/aot_samples.py"
    commands = {
        "multi": [f"{src}:ew", f"{src}:mm", f"{src}:reserved", "--arg", "f32[128,128]", "--arg", "f32[128,128]",
                  "--name", "multi"],
        "grads": [f"{src}:loss", "--arg", "f32[4,3]", "--arg", "f32[5,4]", "--grad", "0,1"],
        "batched": [f"{src}:loss", "--arg", "f32[4,3]", "--arg", "f32[6,5,4]", "--vmap",
                    "None,0", "--value-and-grad"],
        "loops": [f"{src}:collatz", "--arg", "i32[]", "--name", "loops"],
        "taped": [f"{src}:double_until", "--arg", "f32[3]", "--grad"],
        "trees": [f"{src}:tree", "--arg", "{'W':f32[3,2],'b':f32[2]}", "--arg", "f32[5,3]",
                  "--static", "scale=2.0", "--cpu", "generic", "--name", "trees"],
        "misc": [f"{src}:big", f"{src}:shout", "--arg", "f32[1024,2048]", "--name", "misc"],
        "collective": [f"{src}:normalize", "--arg", "f32[3,5]", "--vmap", "1", "--axis-name",
                       "i", "--name", "coll"],
    }
    out = {}
    for name, argv in commands.items():
        directory = root / name
        code = cli.main(["compile", *argv, "-o", str(directory)])
        assert code == 0, name
        out[name] = (directory, json.loads((directory / "manifest.json").read_text()))
    return out


# ---------------------------------------------------------------------------- calling

def call(directory, manifest, name, *args):
    """Call function `name` of the library with ctypes: flat NumPy inputs -> flat outputs."""
    fn = next(f for f in manifest["functions"] if f["name"] == name)
    library = ctypes.CDLL(str(directory / manifest["library"]))
    inputs = [np.require(a, leaf["dtype"], "C") for a, leaf in zip(args, fn["inputs"])]
    for a, leaf in zip(inputs, fn["inputs"]):
        assert list(a.shape) == leaf["shape"], leaf["path"]
    outputs = [np.empty(leaf["shape"], leaf["dtype"]) for leaf in fn["outputs"]]
    entry = getattr(library, fn["symbol"])
    entry.argtypes = [ctypes.c_void_p] * (len(inputs) + len(outputs))
    status = entry(*[a.ctypes.data for a in inputs + outputs])
    assert status == 0, status
    return outputs


def jit_leaves(fn, *args, **kwargs):
    out = kiln.jit(fn, static_argnames=tuple(kwargs))(*args, **kwargs)
    return [np.asarray(leaf) for leaf in kiln.tree_util.tree_leaves(out)]


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_elementwise_and_blas_matmul_share_one_library(built, module):
    directory, manifest = built["multi"]
    x, y = rand(128, 128), rand(128, 128, seed=1)
    assert_close(call(directory, manifest, "ew", x, y), jit_leaves(module["ew"], x, y))
    # float32 sums of 128 terms of size ~10: the library's BLAS may round differently
    assert_close(call(directory, manifest, "mm", x, y), jit_leaves(module["mm"], x, y),
                 atol=1e-4)
    assert_close(call(directory, manifest, "reserved", x, y), [x * y])
    mm = manifest["functions"][1]
    assert mm["uses"] == ["blas"] and mm["constants"] == [{"dtype": "float32", "shape": [128]}]
    assert [f["symbol"] for f in manifest["functions"]] == ["multi_ew", "multi_mm",
                                                              "multi_reserved"]


def test_grad_with_several_argnums(built, module):
    directory, manifest = built["grads"]
    w, x = rand(4, 3), rand(5, 4, seed=1)
    fn = manifest["functions"][0]
    assert fn["name"] == "grad_loss" and fn["symbol"] == "aot_samples_grad_loss"
    assert manifest["library"] == "libaot_samples.so"   # named after the target's file
    assert fn["transform"] == "grad" and fn["transforms"] == [{"kind": "grad",
                                                                 "argnums": [0, 1]}]
    assert fn["out_tree"] == {"tuple": [{"leaf": True}, {"leaf": True}]}
    assert [o["path"] for o in fn["outputs"]] == ["out[0]", "out[1]"]
    want = jit_leaves(kiln.grad(module["loss"], argnums=(0, 1)), w, x)
    assert_close(call(directory, manifest, "grad_loss", w, x), want)


def test_vmap_of_value_and_grad(built, module):
    directory, manifest = built["batched"]
    w, xs = rand(4, 3), rand(6, 5, 4, seed=2)
    fn = manifest["functions"][0]
    assert fn["name"] == "vmap_value_and_grad_loss" and fn["transform"] == "vmap_value_and_grad"
    want = jit_leaves(kiln.vmap(kiln.value_and_grad(module["loss"]), in_axes=(None, 0)), w, xs)
    assert [o["shape"] for o in fn["outputs"]] == [[6], [6, 4, 3]]
    assert_close(call(directory, manifest, "vmap_value_and_grad_loss", w, xs), want,
                 rtol=1e-4)


def test_vmap_with_an_axis_name_for_collectives(built, module):
    directory, manifest = built["collective"]
    fn = manifest["functions"][0]
    assert fn["transforms"] == [{"kind": "vmap", "in_axes": 1, "axis_name": "i"}]
    assert "vmap(normalize, in_axes=1, axis_name='i')" in (directory / "coll.h").read_text()
    x = rand(3, 5)
    want = jit_leaves(kiln.vmap(module["normalize"], in_axes=1, axis_name="i"), x)
    assert_close(call(directory, manifest, "vmap_normalize", x), want)
    np.testing.assert_allclose(np.sum(want[0]), 1.0, rtol=1e-4)   # divided by the total


def test_collective_without_an_axis_name(src, tmp_path, capsys):
    argv = ["compile", f"{src}:normalize", "--arg", "f32[3,5]", "-o", str(tmp_path)]
    code, _, err = run([*argv, "--vmap", "0"], capsys)
    assert code == 1 and "unbound axis name: i" in err and "--axis-name NAME" in err
    code, _, err = run([*argv, "--axis-name", "i"], capsys)
    assert code == 2 and "--axis-name names the mapped axis of --vmap" in err


@pytest.mark.parametrize("n", [1, 6, 27])
def test_while_loop_on_values(built, module, n):
    directory, manifest = built["loops"]
    got = call(directory, manifest, "collatz", np.int32(n))
    assert_close(got, jit_leaves(module["collatz"], np.int32(n)))
    assert manifest["functions"][0]["outputs"][0]["weak_type"] is True   # steps = 0 + 1 + ...


def test_grad_through_a_data_dependent_while_loop(built, module):
    directory, manifest = built["taped"]
    x = np.array([0.5, 1.0, 2.0], np.float32)
    want = jit_leaves(kiln.grad(module["double_until"]), x)
    assert_close(call(directory, manifest, "grad_double_until", x), want)


def test_pytree_in_and_out_generic_cpu(built, module):
    directory, manifest = built["trees"]
    fn = manifest["functions"][0]
    assert manifest["target"]["mode"] == "generic" and manifest["target"]["cpu"] == "x86-64-v2"
    assert "sse4_2" in manifest["target"]["features"]
    assert "avx2" not in manifest["target"]["features"]
    assert [i["path"] for i in fn["inputs"]] == ["p['W']", "p['b']", "x"]
    assert [o["path"] for o in fn["outputs"]] == ["out['h']", "out['stats'][0]",
                                                  "out['stats'][1]"]
    assert [o["dtype"] for o in fn["outputs"]] == ["float32", "float32", "bool"]
    leaf = {"leaf": True}
    assert fn["in_tree"] == {"tuple": [{"dict": {"keys": ["W", "b"], "children": [leaf, leaf]}},
                                       leaf]}
    assert fn["out_tree"] == {"dict": {"keys": ["h", "stats"],
                                       "children": [leaf, {"tuple": [leaf, leaf]}]}}
    assert fn["static"] == {"scale": 2.0}
    p, x = {"W": rand(3, 2), "b": rand(2, seed=1)}, rand(5, 3, seed=2)
    got = call(directory, manifest, "tree", p["W"], p["b"], x)
    assert_close(got, jit_leaves(module["tree"], p, x, scale=2.0))


def test_parallel_loops_and_debug_print_default(built, module, capfd):
    directory, manifest = built["misc"]
    big, shout = manifest["functions"]
    assert big["uses"] == ["threads"] and "debug_print" in shout["uses"]
    x = rand(1024, 2048)
    assert_close(call(directory, manifest, "big", x), jit_leaves(module["big"], x), rtol=2e-6)
    capfd.readouterr()
    assert_close(call(directory, manifest, "shout", x), [x + 1])
    printed = capfd.readouterr().out   # by the C glue's default kiln_debug_print
    kiln.jit(module["shout"])(x)
    assert printed == capfd.readouterr().out and printed.startswith("x = [[")


# ------------------------------------------------------------------------------- files

def function_files(name):
    return {f"{name}.ssa.py", f"{name}.simplified.ssa.py", f"{name}.fused.ssa.py",
            f"{name}.ll", f"{name}.s", f"{name}.o"}


@pytest.mark.parametrize("which", ["multi", "grads", "trees"])
def test_every_file_is_written_and_hashed(built, which):
    directory, manifest = built[which]
    lib = manifest["name"]
    expected = {f"lib{lib}.so", f"{lib}.h", f"{lib}_glue.c", "kiln_runtime.o"}
    for fn in manifest["functions"]:
        expected |= function_files(fn["name"])
    assert set(manifest["files"]) == expected
    assert set(os.listdir(directory)) == expected | {"manifest.json"}
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == digest, name


def test_manifest_header_and_stages(built):
    directory, manifest = built["multi"]
    assert manifest["format"] == "kiln-aot" and manifest["manifest_version"] == 2
    assert manifest["kiln_version"] == kiln.__version__
    assert manifest["library"] == "libmulti.so" and manifest["header"] == "multi.h"
    assert manifest["target"]["mode"] == "native"
    assert manifest["blas"]["path"] and os.path.isfile(manifest["blas"]["path"])
    if os.path.exists("/proc/cpuinfo"):   # every feature the code requires is a flag here
        flags = set(open("/proc/cpuinfo").read().split())
        assert set(manifest["target"]["features"]) <= flags
    ew = manifest["functions"][0]
    assert ew["inputs"] == [{"path": name, "dtype": "float32", "shape": [128, 128],
                             "weak_type": False} for name in ("x", "y")]
    assert ew["in_tree"] == {"tuple": [{"leaf": True}, {"leaf": True}]}
    assert ew["out_tree"] == {"leaf": True} and ew["source"].endswith("aot_samples.py:ew")
    header = (directory / "multi.h").read_text()
    for prototype in ("int multi_ew(const float *x,", "int multi_mm(const float *x,",
                      "int multi_init(void);", "const char *multi_strerror(int code);",
                      "void multi_bind_extern(const char *name, void *value);"):
        assert prototype in header
    assert "f32[128,128]" in header and "KILN_COMPLEX_TYPES" not in header   # (where used)
    assert (directory / "ew.ssa.py").read_text().startswith("def ew(")
    assert "fusion(" in (directory / "ew.fused.ssa.py").read_text()
    assert "define" in (directory / "ew.ll").read_text()


def test_only_the_c_interface_is_exported(built):
    directory, manifest = built["multi"]
    library = ctypes.CDLL(str(directory / "libmulti.so"))
    for symbol in ("multi_ew", "multi_mm", "multi_init", "multi_bind_extern", "multi_strerror"):
        assert hasattr(library, symbol)
    for symbol in ("kiln_parallel_for", "kiln_set", "kiln_externs"):
        assert not hasattr(library, symbol)
    library.multi_strerror.restype = ctypes.c_char_p
    assert b"workspace" in library.multi_strerror(1)
    assert library.multi_init() == 0


def test_blas_unbound_returns_2(built):
    directory, manifest = built["multi"]
    library = ctypes.CDLL(str(directory / "libmulti.so"))
    library.multi_bind_extern(b"kiln_sgemv", None)
    try:
        x = np.ones((128, 128), np.float32)
        assert library.multi_mm(*[a.ctypes.data for a in (x, x, x.copy())]) == 2
    finally:   # rebind what the glue found at load time
        library.multi_bind_extern(b"kiln_sgemv", ctypes.c_void_p(_sgemv_address(manifest)))


def _sgemv_address(manifest):
    blas = manifest["blas"]
    return ctypes.cast(getattr(ctypes.CDLL(blas["path"]), blas["symbols"]["sgemv"]),
                       ctypes.c_void_p).value


DTYPES = ["float32", "float16", "int8", "int32", "uint16", "uint64", "bool", "complex64",
          "complex128"]


@settings(max_examples=8, deadline=None)
@given(dtype=st.sampled_from(DTYPES),
       shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple))
def test_dtypes_and_shapes_through_the_c_abi(module, dtype, shape):
    """Every dtype with a C type, rank 0 (a pointer to one element), empty and size-1 arrays."""
    twice = module["twice"]
    k = np.arange(int(np.prod(shape)))
    x = (k % 3 - (1j * (k % 5) if np.dtype(dtype).kind == "c" else 0)).reshape(shape).astype(dtype)
    with tempfile.TemporaryDirectory() as directory:
        manifest = compile_library([Target(twice, (x,))], directory)
        canonical = np.asarray(kiln.numpy.asarray(x)).dtype   # 64-bit narrows without x64
        assert manifest["functions"][0]["inputs"][0]["dtype"] == canonical.name
        got = call(pathlib.Path(directory), manifest, "twice", x)
        assert_close(got, jit_leaves(twice, x))


@pytest.mark.parametrize("source, expected", [
    ("path/to/model.py:predict", "model"), ("pkg.sub.model:predict", "model"),
    ("model:predict", "model"), ("my-model.v2.py:predict", "my_model_v2"),
    ("__main__:predict", "predict"), ("2d.py:predict", "predict"),
    ("x/__init__.py:predict", "predict"), (None, "predict")])
def test_default_library_name_is_the_module(source, expected):
    def predict(x):
        return x
    predict.__module__ = "__main__"
    assert library_name(Target(predict, source=source)) == expected
    assert library_name(Target(predict, transforms=(("vmap", 0),), source="__main__:f")) == \
        "vmap_predict"


def test_default_library_name_from_a_package_module(tmp_path, monkeypatch, capsys):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "net.py").write_text("def predict(x):\n    return x * 2\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(["compile", "pkg.net:predict", "--arg", "f32[2]", "-o", "build"], capsys)
    assert code == 0, err
    assert out.startswith("wrote build/libnet.so (net_predict), build/net.h")


def test_python_api_compiles_and_rejects_duplicates(tmp_path, module):
    x = np.zeros((2,), np.float32)
    seen = []
    manifest = compile_library([Target(module["ew"], (x, x), name="first")], tmp_path,
                               name="api", progress=lambda *a: seen.append(a))
    assert [f["symbol"] for f in manifest["functions"]] == ["api_first"]
    assert [stage for *_, stage in seen] == ["specialise", "simplify", "fuse", "llvm", "link"]
    with pytest.raises(AOTUsageError, match="exported as 'ew'"):
        compile_library([Target(module["ew"], (x, x)), Target(module["ew"], (x, x))], tmp_path)


# ------------------------------------------------------------------------------ errors

@pytest.fixture
def src(samples):
    return f"{samples}/aot_samples.py"


def test_every_target_is_checked_before_compiling(src, tmp_path, capsys):
    code, out, err = run(["compile", f"{src}:ew", f"{src}:big", "--arg", "f32[2]", "--arg",
                          "f32[2]", "--name", "p", "-o", str(tmp_path)], capsys)
    assert code == 2 and "big(x)" in err   # arity checked for every target before compiling
    code, out, err = run(["compile", f"{src}:ew", f"{src}:ew", "--arg", "f32[2]", "--arg",
                          "f32[2]", "--vmap", "0", "--name", "p", "-o", str(tmp_path)], capsys)
    assert code == 2 and "two functions would be exported as 'vmap_ew'" in err


def test_progress_is_printed(src, tmp_path, capsys):
    code, out, err = run(["compile", f"{src}:ew", f"{src}:loss", "--arg", "f32[3,3]", "--arg",
                          "f32[3,3]", "--name", "two", "-o", str(tmp_path)], capsys)
    assert code == 0
    lines = err.splitlines()
    assert "[1/2] ew: specialise" in lines and "[2/2] loss: llvm" in lines
    assert lines[-1] == "link libtwo.so"
    assert out.startswith(f"wrote {tmp_path}/libtwo.so (two_ew, two_loss)")


@pytest.mark.parametrize("extra, message", [
    (["--arg", "f32[3"], "bad --arg spec"),
    (["--arg", "f32[3]", "--cpu", "arm"], "invalid choice: 'arm'"),
    (["--arg", "f32[3]", "--grad=0,x"], "bad --grad '0,x'"),
    (["--arg", "f32[3]", "--grad", "1"], "grad argnums 1 is out of range"),
    (["--arg", "f32[3]", "--vmap", "0,y"], "bad --vmap '0,y'"),
    (["--arg", "f32[3]", "--name", "9lib"], "bad library name '9lib'"),
    (["--arg", "f32[3]", "--name", "_lib"], "bad library name '_lib'"),
    (["--arg", "f32[3]", "--static", "3"], "bad --static '3'"),
    (["--arg", "f32[3]", "--arg", "f32[3]"], "big(x): too many positional arguments"),
])
def test_usage_errors_exit_2(src, tmp_path, capsys, extra, message):
    code, out, err = run(["compile", f"{src}:big", *extra, "-o", str(tmp_path)], capsys)
    assert code == 2 and message in err, err
    assert not os.path.exists(tmp_path / "manifest.json")


def test_function_named_like_the_library_api(src, tmp_path, capsys):
    code, _, err = run(["compile", f"{src}:init", "--arg", "f32[3]", "--name", "m", "-o",
                        str(tmp_path)], capsys)
    assert code == 2 and "would be exported as m_init, a name the library itself uses" in err


def test_carets_under_the_bad_character(src, tmp_path, capsys):
    code, _, err = run(["compile", f"{src}:big", "--arg", "f32[3", "-o", str(tmp_path)], capsys)
    assert code == 2 and err.rstrip("\n").endswith("    f32[3\n         ^")
    code, _, err = run(["compile", f"{src}:big", "--arg", "f32[3]", "--grad=0,x", "-o",
                        str(tmp_path)], capsys)
    assert code == 2 and err.rstrip("\n").endswith("    0,x\n      ^")


def test_output_directory_is_required(src, capsys):
    code, _, err = run(["compile", f"{src}:big", "--arg", "f32[3]"], capsys)
    assert code == 2 and "-o/--output" in err


def test_missing_c_compiler_exit_1(src, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    code, _, err = run(["compile", f"{src}:big", "--arg", "f32[3]", "-o", str(tmp_path)], capsys)
    assert code == 1 and "no C compiler: /nonexistent/cc (from $CC) was not found" in err
    assert "set CC" in err


def test_failed_link_exit_1(src, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CC", "false")
    code, _, err = run(["compile", f"{src}:big", "--arg", "f32[3]", "-o", str(tmp_path)], capsys)
    assert code == 1 and "linking libaot_samples.so failed" in err
    assert not os.path.exists(tmp_path / "manifest.json")


def test_located_compile_error_exit_1(src, tmp_path, capsys):
    code, _, err = run(["compile", f"{src}:located", "--arg", "f32[3]", "-o", str(tmp_path)],
                       capsys)
    assert code == 1
    assert "cannot reshape array of shape (3,)" in err and "aot_samples.py\", line" in err
    assert "return x.reshape(7)" in err and "^^^" in err and "Traceback" not in err


@pytest.mark.parametrize("target, extra, message", [
    ("text", [], "returned a value of type <class 'str'>"),
    ("ordered", [], "collections.OrderedDict cannot be described"),
    ("static_first", ["--grad"], "need static arguments after the dynamic ones"),
    ("loss", ["--grad"], None),
])
def test_unsupported_functions_exit_1(src, tmp_path, capsys, target, extra, message):
    specs = {"static_first": ["--arg", "3", "--arg", "f32[3]"],
             "loss": ["--arg", "f32[3,2]", "--arg", "f32[4,3]", "--vmap", "0,0,0"]}
    argv = ["compile", f"{src}:{target}", *specs.get(target, ["--arg", "f32[3]"]), *extra,
            "-o", str(tmp_path)]
    code, _, err = run(argv, capsys)
    assert code == 1 and (message or "in_axes") in err, err
    assert "Traceback" not in err


def test_complex_arguments_and_results(src, tmp_path, capsys):
    """c64 is kiln_complex64 in the header: C99's float _Complex (std::complex<float> in C++)."""
    code, _, err = run(["compile", f"{src}:twice", "--arg", "c64[2]", "-o", str(tmp_path)],
                       capsys)
    assert code == 0, err
    header = (tmp_path / "aot_samples.h").read_text()
    assert "const kiln_complex64 *x," in header and "kiln_complex64 *out);" in header
    for line in ("typedef float _Complex kiln_complex64;",
                 "typedef std::complex<float> kiln_complex64;"):
        assert line in header


def test_help_documents_the_command(capsys):
    code, out, _ = run(["compile", "--help"], capsys)
    assert code == 0
    for option in ("--arg", "--static", "--grad", "--value-and-grad", "--vmap", "--axis-name",
                   "--name", "--cpu", "--output", "grad_<f>", "lib<NAME>.so", "exit codes"):
        assert option in out



def test_runtime_objects_come_from_the_disk_cache(tmp_path, monkeypatch):
    """kiln_runtime.o / kiln_mpi.o are compiled once per machine and then read from the disk
    cache; a cached payload that is not an object file is dropped and rebuilt."""
    from kiln.compiler.aot import native
    from kiln.compiler.backends.llvm import disk_cache, target
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    mach = native.machine("generic")
    source = "define i32 @one() {\n  ret i32 1\n}\n"
    compiled = []

    def compile_():
        compiled.append(1)
        return ["kiln_sgemm"], target.object_code(target.optimize(source, "t", mach.machine),
                                                  mach.machine)
    first = native._cached("t", source, mach, compile_)
    assert native._cached("t", source, mach, compile_) == first and len(compiled) == 1
    assert native._cached("t", source + "\n", mach, compile_) == first and len(compiled) == 2
    monkeypatch.setattr(disk_cache, "load", lambda key: b"kiln_sgemm\0not an object")
    assert native._cached("t", source, mach, compile_) == first and len(compiled) == 3
