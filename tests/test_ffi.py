"""kiln.ffi against JAX 0.10.2's jax.ffi: the same handlers (tests/ffi/handlers.cc, written with
XLA's C++ FFI bindings as JAX's FFI guide writes them, and samples/ffi/scale_by_two.c, the C
API alone) built once into shared libraries and registered with both; results, attributes,
layouts, aliases, stateful handlers, vmap methods and errors compared, on the llvm, reference
and pjrt backends; the StableHLO kiln writes for a call also run by jaxlib."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.backends.pjrt.api import PjrtError

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build(tmp, source, compiler, *flags):
    out = str(tmp / (os.path.splitext(os.path.basename(source))[0] + ".so"))
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-w", *flags, os.path.join(ROOT, source),
                    "-o", out], check=True)
    return ctypes.cdll.LoadLibrary(out)


def _capsule(address):
    return kiln.ffi.pycapsule(ctypes.c_void_p(address))


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """The two libraries, their targets registered with kiln and with JAX under the same
    names (JAX wants the state type before its handler, and its backend started)."""
    tmp = tmp_path_factory.mktemp("ffi")
    cc = _build(tmp, "tests/ffi/handlers.cc", "g++", "-std=c++17",
                f"-I{kiln.ffi.include_dir()}")
    plain = _build(tmp, "samples/ffi/scale_by_two.c", "gcc")
    cc.CounterTypeId.restype = cc.CounterTypeInfo.restype = ctypes.c_void_p
    jax.devices()
    targets = {"t_rms_norm": cc.RmsNorm, "t_affine": cc.Affine,
               "t_checked_sqrt": cc.CheckedSqrt, "t_raw_copy": cc.RawCopy,
               "t_increment": cc.Increment, "t_scale_by_two": plain.ScaleByTwo}
    for api in (kiln.ffi, jax.ffi):
        api.register_ffi_type("kiln_test_counter", {"type_id": _capsule(cc.CounterTypeId()),
                                                    "type_info": _capsule(cc.CounterTypeInfo())})
        for name, fn in targets.items():
            api.register_ffi_target(name, api.pycapsule(fn), platform="cpu")
        api.register_ffi_target("t_counter", {"instantiate": api.pycapsule(cc.CounterInit),
                                              "execute": api.pycapsule(cc.CounterStep)})
    return cc, plain


def rms_norm(api, x, vmap_method="broadcast_all", eps=1e-5):
    return api.ffi.ffi_call("t_rms_norm", api.ShapeDtypeStruct(x.shape, x.dtype),
                            vmap_method=vmap_method)(x, eps=np.float32(eps))


def expected_rms(x, eps=1e-5):
    x = np.asarray(x, np.float32)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))


X = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_rms_norm_matches_jax(libs, backend):
    want = np.asarray(rms_norm(jax, jjnp.asarray(X)))
    np.testing.assert_allclose(want, expected_rms(X), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(rms_norm(kiln, jnp.asarray(X))), want)
    got = kiln.jit(lambda x: rms_norm(kiln, x), backend=backend)(jnp.asarray(X))
    np.testing.assert_array_equal(np.asarray(got), want)
    for method in ("broadcast_all", "expand_dims", "sequential", "sequential_unrolled",
                   "legacy_vectorized"):
        batched = kiln.jit(kiln.vmap(lambda x: rms_norm(kiln, x, method)), backend=backend)
        np.testing.assert_array_equal(np.asarray(batched(jnp.asarray(X))), want, method)


def test_every_kind_of_attribute(libs):
    xs = np.linspace(0.0, 1.0, 5)
    kw = dict(scale=2.0, offset=np.array([1, 2], np.int64), tag="abc", extra={"k": 7})

    def call(api, x):
        return api.ffi.ffi_call("t_affine", (api.ShapeDtypeStruct((5,), np.float64),
                                             api.ShapeDtypeStruct((1,), np.int64)))(x, **kw)
    with jax.enable_x64(True):
        want = [np.asarray(o) for o in call(jax, jjnp.asarray(xs))]
    with kiln.enable_x64(True):
        eager = call(kiln, jnp.asarray(xs))
        jitted = kiln.jit(lambda x: call(kiln, x))(jnp.asarray(xs))
    assert type(eager) is tuple and len(eager) == 2   # a tuple of specs gives a tuple
    np.testing.assert_array_equal(want[0], xs * 2 + np.array([1, 2, 1, 2, 1]))
    assert want[1].tolist() == [5 + 3 * 1000 + 7 * 100000]
    for got in (eager, jitted):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(np.asarray(g), w)


def test_handler_error_is_jax_runtime_error(libs):
    def call(api, x):
        return api.ffi.ffi_call("t_checked_sqrt", api.ShapeDtypeStruct((2,), np.float32))(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT: negative input"):
        call(jax, jjnp.array([1.0, -1.0]))
    for f in (lambda x: call(kiln, x), kiln.jit(lambda x: call(kiln, x))):
        with pytest.raises(kiln.errors.JaxRuntimeError) as e:
            f(jnp.array([1.0, -1.0]))
        assert "INVALID_ARGUMENT: negative input to sqrt" in str(e.value)
        assert "'t_checked_sqrt'" in str(e.value)
    np.testing.assert_array_equal(np.asarray(call(kiln, jnp.array([4.0, 9.0]))), [2.0, 3.0])


def test_layouts_and_aliases_match_jax(libs):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)

    def raw(api, x, **layouts):
        return api.ffi.ffi_call("t_raw_copy", (api.ShapeDtypeStruct((2, 3), np.int32),
                                               api.ShapeDtypeStruct((2,), np.int64)),
                                **layouts)(x)

    def increment(api, x):
        return api.ffi.ffi_call("t_increment", api.ShapeDtypeStruct((2, 3), np.int32),
                                input_output_aliases={0: 0})(x)
    cases = [{}, {"input_layouts": [(1, 0)]}, {"output_layouts": [(1, 0), None]},
             {"input_layouts": [(1, 0)], "output_layouts": [(1, 0), None]}]
    with jax.enable_x64(True), kiln.enable_x64(True):
        for layouts in cases:
            want = [np.asarray(o) for o in raw(jax, jjnp.asarray(a), **layouts)]
            for f in (lambda x: raw(kiln, x, **layouts),
                      kiln.jit(lambda x: raw(kiln, x, **layouts))):
                got = f(jnp.asarray(a))
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(np.asarray(g), w, str(layouts))
        want = np.asarray(increment(jax, jjnp.asarray(a)))
        np.testing.assert_array_equal(want, a + 1)
        np.testing.assert_array_equal(np.asarray(kiln.jit(lambda x: increment(kiln, x))(a)),
                                      want)


def test_stateful_handler_instantiates_once_per_site(libs):
    def counter(api):
        return api.ffi.ffi_call("t_counter", api.ShapeDtypeStruct((), np.int32),
                                has_side_effect=True)(start=np.int32(5))
    jf, kf = jax.jit(lambda: counter(jax)), kiln.jit(lambda: counter(kiln))
    assert [int(jf()) for _ in range(3)] == [5, 6, 7]
    assert [int(kf()) for _ in range(3)] == [5, 6, 7]


def test_no_derivative_and_no_vmap_method(libs):
    with pytest.raises(ValueError, match="The FFI call to `t_rms_norm` cannot be "
                                         "differentiated"):
        kiln.grad(lambda x: rms_norm(kiln, x).sum())(jnp.asarray(X))
    with pytest.raises(NotImplementedError, match="vmap is only supported for the ffi_call "
                                                  "primitive when vmap_method is one of"):
        kiln.vmap(lambda x: rms_norm(kiln, x, None))(jnp.asarray(X))


def test_call_errors_match_jax(libs):
    spec = kiln.ShapeDtypeStruct((2,), np.float32)
    for api, s in ((jax, jax.ShapeDtypeStruct((2,), np.float32)), (kiln, spec)):
        with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
            api.ffi.ffi_call("t_scale_by_two", s, vmap_method="bogus")
        with pytest.raises(ValueError, match="must have 'shape' and 'dtype' attributes. Got 3 "
                                             "at position 1"):
            api.ffi.ffi_call("t_scale_by_two", (s, 3))
        with pytest.raises(ValueError, match="legacy_backend_config parameter requires"):
            api.ffi.ffi_call("t_scale_by_two", s, legacy_backend_config="x")
        with pytest.raises(ValueError, match="outside the range"):
            api.ffi.ffi_call("t_scale_by_two", s, input_output_aliases={3: 0})(
                np.ones(2, np.float32))
        with pytest.raises(ValueError, match="referring to an input with abstract value "
                                             "float32\\[3\\] and an output with a different "
                                             "abstract value float32\\[2\\]"):
            api.ffi.ffi_call("t_scale_by_two", s, input_output_aliases={0: 0})(
                np.ones(3, np.float32))
        with pytest.raises(ValueError, match="not supported after jaxlib version 381"):
            api.ffi.register_ffi_type_id("x", None)
    with pytest.raises(kiln.errors.JaxRuntimeError, match="NOT_FOUND: no FFI target named "
                                                          "'t_missing'"):
        kiln.ffi.ffi_call("t_missing", spec)(np.ones(2, np.float32))
    kiln.ffi.register_ffi_target("t_gpu_only", kiln.ffi.pycapsule(libs[1].ScaleByTwo),
                                 platform="CUDA")
    with pytest.raises(kiln.errors.JaxRuntimeError, match="registered for cuda only: kiln runs "
                                                          "CPU handlers"):
        kiln.ffi.ffi_call("t_gpu_only", spec)(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="must be a PyCapsule"):
        kiln.ffi.register_ffi_target("t_bad", "not a capsule")
    with pytest.raises(ValueError, match="api_version=0 is XLA's untyped custom-call API"):
        kiln.ffi.register_ffi_target("t_old", kiln.ffi.pycapsule(libs[1].ScaleByTwo),
                                     api_version=0)
    with pytest.raises(ValueError, match="has no 'execute' handler"):
        kiln.ffi.register_ffi_target("t_no_execute", {
            "instantiate": kiln.ffi.pycapsule(libs[0].CounterInit)})
    with pytest.raises(TypeError, match="XLA's FFI passes only 1-D arrays as attributes"):
        kiln.ffi.ffi_call("t_scale_by_two", spec)(np.ones(2, np.float32), m=np.ones((2, 2)))


def test_pjrt_plugin_runs_a_compatible_handler(libs):
    def f(x):
        return kiln.ffi.ffi_call("t_scale_by_two", kiln.ShapeDtypeStruct(x.shape, x.dtype),
                                 vmap_method="expand_dims")(x)
    got = kiln.jit(f, backend="pjrt")(jnp.asarray(X))
    np.testing.assert_array_equal(np.asarray(got), X * 2)
    np.testing.assert_array_equal(np.asarray(kiln.jit(kiln.vmap(f), backend="pjrt")(X)), X * 2)
    # the C++ handlers are built with jaxlib's headers (FFI API 0.3), newer than the plug-in's
    with pytest.raises(PjrtError, match="No FFI handler registered for t_rms_norm.*built for "
                                        "XLA FFI API 0.3, and the plug-in did not take it"):
        kiln.jit(lambda x: rms_norm(kiln, x), backend="pjrt")(jnp.asarray(X))
    with pytest.raises(ValueError, match="stage\\(s\\) instantiate, which a PJRT plug-in "
                                         "cannot run"):
        kiln.jit(lambda: kiln.ffi.ffi_call("t_counter", kiln.ShapeDtypeStruct((), np.int32))(
            start=np.int32(0)), backend="pjrt")()


def test_stablehlo_text_runs_in_jaxlib(libs):
    from jax._src import xla_bridge
    from jax._src.lib import xla_client
    text = kiln.jit(lambda x: rms_norm(kiln, x)).lower(jnp.asarray(X)).as_text("stablehlo")
    assert ("stablehlo.custom_call @t_rms_norm(%arg0) {api_version = 4 : i32, backend_config "
            "= {eps = 0x3727C5AC : f32}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], "
            "result_layouts = [dense<[1, 0]> : tensor<2xindex>]}") in text
    backend = xla_bridge.get_backend("cpu")
    device = backend.devices()[0]
    exe = backend.compile_and_load(text, xla_client.DeviceList((device,)),
                                   xla_client.CompileOptions())
    out = exe.execute([jax.device_put(X, device)])
    np.testing.assert_array_equal(np.asarray(out[0]), np.asarray(rms_norm(jax, jjnp.asarray(X))))


def test_include_dir_and_lowering_rule():
    assert os.path.isfile(os.path.join(kiln.ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))
    rule = kiln.ffi.ffi_lowering("t_rms_norm")
    assert rule.call_target_name == "t_rms_norm"
    with pytest.raises(TypeError, match="kiln does not build"):
        rule(None)


def scale_call(x):
    return kiln.ffi.ffi_call("t_scale_by_two", kiln.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_cuda_backend_runs_it_on_the_host(libs, monkeypatch):
    from kiln.compiler.backends.cuda import device as D
    monkeypatch.setenv(D.EMULATE, "1")
    f = kiln.jit(scale_call, backend="cuda")
    np.testing.assert_array_equal(np.asarray(f(X)), X * 2)
    assert "host_call" in f._cache.values()[0].executable.steps()


def test_kiln_compile_refuses_it_with_its_line(capsys, tmp_path):
    from kiln.cli import commands as cli
    code = cli.main(["compile", f"{__file__}:scale_call", "--arg", "f32[3]", "-o",
                     str(tmp_path / "lib")])
    err = capsys.readouterr().err
    assert code != 0 and "cannot build a library that calls ffi_call" in err
    assert "kiln runs FFI handlers from Python" in err
    assert 'return kiln.ffi.ffi_call("t_scale_by_two"' in err


def test_user_primitive_lowered_to_an_ffi_target(libs):
    """JAX's older FFI pattern: a primitive whose lowering is `ffi_lowering(target)` and whose
    implementation is `partial(xla.apply_primitive, p)`."""
    import functools
    results = {}
    for api in (jax, kiln):
        from importlib import import_module
        core = import_module(f"{api.__name__}.extend.core")
        mlir = import_module(f"{api.__name__}.interpreters.mlir")
        xla = import_module(f"{api.__name__}.interpreters.xla")
        p = core.Primitive("rms_norm_p")
        p.def_impl(functools.partial(xla.apply_primitive, p))
        shaped = import_module(f"{api.__name__}.core").ShapedArray
        p.def_abstract_eval(lambda x, eps, shaped=shaped: shaped(x.shape, x.dtype))
        mlir.register_lowering(p, api.ffi.ffi_lowering("t_rms_norm"), platform="cpu")
        x = np.asarray(X)
        results[api.__name__] = [np.asarray(p.bind(x, eps=np.float32(1e-5))),
                                 np.asarray(api.jit(lambda v: p.bind(v, eps=np.float32(1e-5)))(x))]
    for got, want in zip(results["kiln"], results["jax"]):
        np.testing.assert_array_equal(got, want)
