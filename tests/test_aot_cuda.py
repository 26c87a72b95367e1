"""`kiln compile --target cuda` and `kiln.aot.load` of its output, without a GPU: NVRTC writes
each kernel's PTX and cubin (an ELF image) per arch, the manifest describes the inputs,
outputs and every step, and the loaded functions run on the host emulation of the device
(KILN_CUDA_EMULATE=1) with the results of `kiln.jit`."""
import json

import numpy as np
import pytest

import kiln
from kiln.cli import commands as cli
from kiln.cli.aot import compile_cuda_library
from kiln import aot_cuda
from kiln.compiler.aot import AOTUsageError, Target, cuda_files
from kiln.compiler.backends.cuda import device as D, emulate, nvrtc

import cuda_programs

HAVE_NVRTC, WHY = nvrtc.available()
pytestmark = [pytest.mark.skipif(not HAVE_NVRTC, reason=WHY),
              pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")]
NAMES = ("elementwise", "reductions", "mlp_step", "indexing", "control", "long_scans",
         "whole", "nested")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cudalib")
    programs = {name: (fn, args) for name, fn, args in cuda_programs.programs()}
    targets = [Target(programs[n][0], programs[n][1], name=n) for n in NAMES]
    manifest = compile_cuda_library(targets, directory, name="demo", archs=("sm_80", "sm_90"))
    return directory, manifest, programs


def test_every_kernel_has_its_files(compiled):
    directory, manifest, _ = compiled
    assert manifest["target"] == {"kind": "cuda", "archs": ["sm_80", "sm_90"],
                                  "nvrtc": nvrtc.available()[1]}
    on_disk = json.loads((directory / "manifest.json").read_text())
    assert on_disk == manifest and set(on_disk["files"]) == \
        {p.name for p in directory.iterdir()} - {"manifest.json"}
    for function in manifest["functions"]:
        assert function["kernels"], function["name"]
        for name, files in function["kernels"].items():
            assert f"__global__ void {name}(" in (directory / files["cu"]).read_text()
            for arch in ("sm_80", "sm_90"):
                assert f".target {arch}" in (directory / files[arch]["ptx"]).read_text()
                assert cuda_files.cubin_arch((directory / files[arch]["cubin"]).read_bytes()) \
                    == arch


def test_the_manifest_describes_inputs_outputs_and_steps(compiled):
    _, manifest, programs = compiled
    functions = {f["name"]: f for f in manifest["functions"]}
    mlp = functions["mlp_step"]
    assert [(i["path"], i["shape"], i["dtype"]) for i in mlp["inputs"]][:2] == \
        [("params[0][0]", [6, 8], "float32"), ("params[0][1]", [8], "float32")]
    assert len(mlp["outputs"]) == 4 and mlp["outputs"][0]["shape"] == [6, 8]
    kinds = {s["kind"] for s in mlp["steps"]}
    assert {"kernel", "gemm"} <= kinds
    defined = set(mlp["program_inputs"])
    for step in mlp["steps"]:   # every value a step reads was written before
        assert all(isinstance(v, dict) or v in defined for v in step["inputs"]), step
        defined |= set(step["outputs"])
        if step["kind"] == "kernel":
            assert step["launch"] in ("grid", "thread_per_row", "block_per_row",
                                      "thread_per_part", "block_per_part")
            assert all(n > 0 for _, n in step["scratch"])
            assert step["sizes"] and step["launch_rule"] and step["files"]["sm_90"]["cubin"]
        else:
            assert step["kind"] in ("gemm", "subprogram") and "equation" not in step
            assert step.get("sizes") or step["body"]["steps"]
    assert all(isinstance(v, dict) or v in defined for v in mlp["results"])
    scatter = [s for s in functions["indexing"]["steps"] if s["kernel"].startswith("kiln_scatter")]
    assert scatter and all(s["starts_from"] == [[0, 0]] for s in scatter)
    assert {s["kind"] for s in functions["control"]["steps"]} >= {"cond", "while_loop", "scan"}
    scans = functions["long_scans"]["steps"]   # a split scan's passes, prefixes between them
    prefixes = [v for s in scans for v in s["outputs"] if v.endswith("#prefix")]
    assert len(prefixes) == 3 and all(
        sum(v in s["inputs"] for s in scans) == 1 for v in prefixes), scans


def test_the_loaded_library_matches_jit(compiled, monkeypatch):
    monkeypatch.setenv(D.EMULATE, "1")
    directory, _, programs = compiled
    lib = kiln.aot.load(directory)
    assert sorted(lib) == sorted(NAMES)
    for name in NAMES:
        fn, args = programs[name]
        got = kiln.tree_util.tree_leaves(lib[name](*args))
        want = kiln.tree_util.tree_leaves(kiln.jit(fn)(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.devices() == {kiln.devices("gpu")[0]}
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5,
                                       err_msg=name)
    with pytest.raises(TypeError, match="elementwise"):
        lib.elementwise(np.ones((5, 7), np.float32))


def _walk(plan):
    """Every step of a manifest plan, its regions' plans' included (depth first)."""
    for step in plan["steps"]:
        yield step
        for region in step.get("branches", []) + [step[k] for k in ("test", "body") if k in step]:
            yield from _walk(region)


def test_the_manifest_holds_the_whole_plan(compiled):
    """Control flow carries its regions' plans with their kernels' files, sort is a
    per-primitive step with its parameters, the closed-over array is a file of its own."""
    directory, manifest, _ = compiled
    whole = {f["name"]: f for f in manifest["functions"]}["whole"]
    top = {"inputs": whole["program_inputs"], "steps": whole["steps"],
           "results": whole["results"]}
    steps = list(_walk(top))
    assert {"kernel", "gemm", "per_primitive", "while_loop", "scan"} <= \
        {s["kind"] for s in steps}
    (loop,) = [s for s in whole["steps"] if s["kind"] == "while_loop"]
    assert loop["speculate"] is True and loop["num_consts"] == 0
    assert [s["kind"] for s in loop["test"]["steps"]] == ["kernel"]
    (scan,) = [s for s in whole["steps"] if s["kind"] == "scan"]
    assert scan["length"] == 4 and scan["types"] == [[[4, 7], "float32"]]
    inner = {s["kernel"] for region in (loop["test"], loop["body"], scan["body"])
             for s in _walk(region) if s["kind"] == "kernel"}
    assert inner and inner <= set(whole["kernels"])
    for s in steps:
        if s["kind"] == "kernel":
            assert (directory / s["files"]["sm_90"]["cubin"]).exists()
    sorts = [s for s in steps if s["kind"] == "per_primitive"]
    assert {s["primitive"] for s in sorts} == {"sort"}
    assert all(s["params"]["dimension"] in (0, 1) and s["types"] for s in sorts)
    with np.load(directory / whole["files"]["constants"]) as saved:
        constants = [saved[k] for k in saved.files]
    assert any(c.dtype == np.float32 and c.shape[-1:] == (7,) and (c == cuda_programs.SHIFT).all()
               for c in constants)   # (x + SHIFT's broadcast SHIFT)
    assert len(whole["program_inputs"]) == len(whole["inputs"]) + len(constants)


def test_the_loader_plans_nothing_and_loads_the_constants(compiled, monkeypatch):
    """The loader never reads the fused SSA (the plan is the manifest's), and the closed-over
    array it passes comes from the artifact, not from the module's global."""
    directory, manifest, programs = compiled
    from kiln.compiler.backends.cuda import program
    from kiln.compiler.ir import parser

    def refuse(*args, **kwargs):
        raise AssertionError("the loader planned again")
    monkeypatch.setattr(program, "plan", refuse)
    monkeypatch.setattr(parser, "from_source", refuse)
    spec = {f["name"]: f for f in manifest["functions"]}["whole"]
    device = _FakeDevice("sm_90")
    steps = aot_cuda.Steps(directory, spec, device)
    assert set(steps.sources) == set(spec["kernels"]) and not device.texts
    assert all(name.endswith(".sm_90.cubin") for name, _ in steps.sources.values())
    monkeypatch.setenv(D.EMULATE, "1")
    fn, args = programs["whole"]
    want = [np.asarray(w) for w in kiln.tree_util.tree_leaves(kiln.jit(fn)(*args))]
    lib = kiln.aot.load(directory)
    monkeypatch.setattr(cuda_programs, "SHIFT", cuda_programs.SHIFT + 100.0)
    got = kiln.tree_util.tree_leaves(lib["whole"](*args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_step_parameters_survive_the_manifest(tmp_path):
    """A per-primitive step's parameters (dimension numbers, tuples, dtypes, NumPy scalars)
    come back from the manifest's JSON as they were; a callback is refused, naming it."""
    from kiln.compiler.aot import AOTError, cuda_plan
    from kiln.compiler.backends.cuda import program
    from kiln.compiler.ir.abstract import ShapedArray
    from kiln.compiler.ir.params import PARAM_TYPES
    from kiln.compiler.ir.ssa import Literal, Var
    dnums = PARAM_TYPES["GatherDimensionNumbers"]((1,), (0,), (0,), (), ())
    params = {"dimension_numbers": dnums, "slice_sizes": (1, 3), "fill_value": np.float32(0.5),
              "dtype": np.dtype("int8"), "mode": "fill", "unique": None}
    a, i, out = Var("a", None), Var("i", None), Var("out", None)
    two = Literal(np.int32(2), ShapedArray((), np.dtype("int32")))
    op = program.Op("per_primitive", "gather", params, (a, i, two), (out,),
                    (((4, 3), "float32"),))
    plan = program.Plan((a, i), (op,), (out, two))
    back = cuda_plan.decode(json.loads(json.dumps(cuda_plan.encode(plan, {}))), tmp_path)
    (step,) = back.steps
    assert step.params == params and step.types == op.types
    assert type(step.params["dimension_numbers"]) is type(dnums)
    assert step.params["fill_value"].dtype == np.float32 and step.kind == "per_primitive"
    assert [x.name for x in step.inputs[:2]] == ["a", "i"] and step.inputs[2].value == 2
    assert [x.name for x in back.inputs] == ["a", "i"] and back.results[1].aval.dtype == np.int32
    with pytest.raises(AOTError, match="the primitive 'gather'.*function"):
        cuda_plan.encode(plan._replace(steps=(op._replace(params={"callback": len}),)), {})


def test_the_files_a_device_runs_best_first():
    files = {"cu": "k.cu", **{a: {"ptx": f"k.{a}.ptx", "cubin": f"k.{a}.cubin"}
                              for a in ("sm_80", "sm_86", "sm_90", "sm_90a")}}

    def order(arch):
        return [name for _, _, name in cuda_files.candidates(files, arch)]
    assert order("sm_86") == ["k.sm_86.cubin", "k.sm_80.cubin", "k.sm_86.ptx", "k.sm_80.ptx",
                              "k.cu"]
    assert order("sm_89") == ["k.sm_86.cubin", "k.sm_80.cubin", "k.sm_86.ptx", "k.sm_80.ptx",
                              "k.cu"]
    assert order("sm_90") == ["k.sm_90a.cubin", "k.sm_90.cubin", "k.sm_90a.ptx", "k.sm_90.ptx",
                              "k.sm_86.ptx", "k.sm_80.ptx", "k.cu"]
    assert order("sm_100") == ["k.sm_90.ptx", "k.sm_86.ptx", "k.sm_80.ptx", "k.cu"]
    assert order("sm_75") == ["k.cu"]
    with pytest.raises(ValueError, match="sm_XY"):
        cuda_files.candidates(files, "compute_90")
    for bad, why in ((b"MZ" + bytes(60), "not an ELF"),
                     (b"\x7fELF\x02" + bytes(13) + b"\x3e\x00" + bytes(40), "machine 62")):
        with pytest.raises(ValueError, match=why):
            cuda_files.cubin_arch(bad)


class _FakeDevice(D.EmulatedLayer):
    """The emulated layer posing as a device of `arch`, recording which files it loads;
    `refuse`: the kinds of file its driver refuses."""

    def __init__(self, arch, refuse=()):
        self.arch, self.refuse, self.loaded, self.texts = arch, refuse, [], []

    def load_module(self, kernel, path):
        if path.suffix[1:] in self.refuse or not path.exists():
            raise D.ModuleLoadError(f"refused {path.name}")
        self.loaded.append(path.name)

    def prepare(self, kernels):
        self.texts += [k.name for k in kernels]


@pytest.mark.parametrize("arch, suffix", [("sm_90", ".sm_90.cubin"), ("sm_86", ".sm_80.cubin"),
                                          ("sm_120", ".sm_90.ptx"), ("sm_75", ".cu")])
def test_the_loader_takes_the_device_s_cubin_then_ptx_then_text(compiled, arch, suffix):
    directory, manifest, _ = compiled
    spec = {f["name"]: f for f in manifest["functions"]}["reductions"]
    device = _FakeDevice(arch)
    steps = aot_cuda.Steps(directory, spec, device)
    assert set(steps.sources) == set(spec["kernels"])
    assert all(name.endswith(suffix) and not passed for name, passed in steps.sources.values())
    assert (device.texts == sorted(steps.sources)) == (suffix == ".cu")
    assert len(device.loaded) == (0 if suffix == ".cu" else len(spec["kernels"]))


def test_the_loader_passes_over_what_the_driver_refuses(compiled, tmp_path):
    directory, manifest, _ = compiled
    spec = {f["name"]: f for f in manifest["functions"]}["elementwise"]
    steps = aot_cuda.Steps(directory, spec, _FakeDevice("sm_90", refuse=("cubin",)))
    for name, passed in steps.sources.values():
        assert name.endswith(".sm_90.ptx") and passed == [
            f"{name[:-len('ptx')]}cubin: refused {name[:-len('ptx')]}cubin"]
    kernel = steps.program.kernels()[0]
    files = spec["kernels"][kernel.name]
    cubin = (directory / files["sm_80"]["cubin"]).read_bytes()
    (tmp_path / files["sm_90"]["cubin"]).write_bytes(cubin)    # an sm_80 cubin labelled sm_90
    (tmp_path / files["sm_80"]["cubin"]).write_bytes(cubin[:40])             # a damaged one
    (tmp_path / files["sm_80"]["ptx"]).write_text((directory / files["sm_80"]["ptx"])
                                                  .read_text())
    device = _FakeDevice("sm_90")   # its cubin is sm_80's, its PTX missing: sm_80's PTX
    name, passed = aot_cuda.load_kernel(device, kernel, tmp_path, files)
    assert name == files["sm_80"]["ptx"] and device.loaded == [name]
    assert "a cubin for sm_80, not sm_90" in passed[0] and "refused" in passed[1]
    name, passed = aot_cuda.load_kernel(_FakeDevice("sm_86"), kernel, tmp_path, files)
    assert name == files["sm_80"]["ptx"] and "not an ELF image" in passed[0]


def test_without_a_device_load_says_why(compiled, monkeypatch):
    monkeypatch.delenv(D.EMULATE, raising=False)
    if D.available()[0]:
        pytest.skip("a CUDA device is present")
    with pytest.raises(D.DeviceUnavailableError, match="needs a GPU"):
        kiln.aot.load(compiled[0])


def test_the_command_line(tmp_path, capsys):
    source = tmp_path / "model.py"
    source.write_text("import kiln.numpy as jnp\n\n\ndef f(x):\n"
                      "    return jnp.sum(x * x, axis=0)\n")
    out = tmp_path / "out"
    code = cli.main(["compile", f"{source}:f", "--arg", "f32[5,3]", "--target", "cuda",
                     "--arch", "sm_80,sm_90", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "CUDA kernels for sm_80, sm_90 (model_f)" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["functions"][0]["inputs"][0]["shape"] == [5, 3]
    with pytest.raises(AOTUsageError, match="bad CUDA architecture 'compute_90'"):
        compile_cuda_library([Target(cuda_programs.softmax, (np.ones((2, 3), np.float32),))],
                             tmp_path / "bad", archs=("compute_90",))
