"""The PJRT shim (compiler/backends/pjrt) driving the real XLA CPU plug-in (the `pjrt` extra,
which `make test` installs): the client and its devices, buffers both ways for every dtype kiln
moves (0-size and rank 0 included), StableHLO modules written here and emitted by JAX 0.10.2
compiled and run against NumPy, and the runtime's PJRT devices (device_put, arrays that stay on
the device, the executable the staging service calls, kiln.devices("tpu") without a TPU), and
the error paths (a malformed module, a library that is not a plug-in, a missing path, another
API version, a function past the end of the plug-in's table), none of which may crash the
process. The 260 MB plug-in is loaded once per session."""
import ctypes
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.backends.pjrt import api, client as pjrt, plugins

CPU_PLUGIN = [f.path for f in plugins.discover() if f.name == "xla-cpu-pjrt"]
pytestmark = pytest.mark.skipif(not CPU_PLUGIN, reason="xla-cpu-pjrt is not installed "
                                "(pip install -e '.[pjrt]'; make test installs it)")


@pytest.fixture(scope="session")
def cpu():
    return kiln.pjrt.client(CPU_PLUGIN[0])   # the runtime's client: one per plug-in


def test_client_and_devices(cpu):
    assert cpu.platform == "cpu"
    assert cpu.api.version[0] == api.HEADER_VERSION[0]
    assert cpu.devices and [d.id for d in cpu.devices] == list(range(len(cpu.devices)))
    assert {d.kind for d in cpu.devices} == {"cpu"}
    assert {d.process_index for d in cpu.devices} == {0}
    assert plugins.load(CPU_PLUGIN[0]) is cpu.api   # loaded once per process


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (1,), (2, 3, 5)])
@pytest.mark.parametrize("zero_copy", [False, True])
def test_buffers_round_trip(cpu, dtype, shape, zero_copy):
    x = (np.arange(int(np.prod(shape))).reshape(shape) * 7 % 5).astype(dtype)
    b = cpu.put(x, cpu.devices[-1], zero_copy=zero_copy)
    assert (b.shape, b.dtype, b.device) == (shape, np.dtype(dtype), cpu.devices[-1])
    back = b.block_until_ready().to_host()
    assert back.dtype == x.dtype and back.shape == shape
    np.testing.assert_array_equal(back, x)
    b.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        b.to_host()


def test_put_copies_a_strided_array_and_keeps_it(cpu):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    b = cpu.put(x, zero_copy=True)
    np.testing.assert_array_equal(b.to_host(), x)


def _module(args, results, body):
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    return (f"module @m {{\n  func.func public @main({params}) -> ({', '.join(results)}) {{\n"
            f"{body}\n  }}\n}}\n")


# (argument types, result types, body, input arrays, the NumPy function of the result)
HAND_WRITTEN = {
    "add_f32": (["tensor<2x3xf32>"] * 2, ["tensor<2x3xf32>"],
                "%0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>\n return %0 : tensor<2x3xf32>",
                lambda: [np.arange(6, dtype=np.float32).reshape(2, 3),
                         np.full((2, 3), 0.5, np.float32)], lambda a, b: [a + b]),
    "mul_sub_i64": (["tensor<4xi64>"] * 2, ["tensor<4xi64>", "tensor<4xi64>"],
                    "%0 = stablehlo.multiply %arg0, %arg1 : tensor<4xi64>\n"
                    "%1 = stablehlo.subtract %arg0, %arg1 : tensor<4xi64>\n"
                    "return %0, %1 : tensor<4xi64>, tensor<4xi64>",
                    lambda: [np.array([1, -2, 3, 2**40], np.int64), np.array([5, 6, -7, 3])],
                    lambda a, b: [a * b, a - b]),
    "scalar_f64": (["tensor<f64>"], ["tensor<f64>"],
                   "%0 = stablehlo.sqrt %arg0 : tensor<f64>\n return %0 : tensor<f64>",
                   lambda: [np.array(2.0)], lambda a: [np.sqrt(a)]),
    "empty_i32": (["tensor<0x3xi32>"], ["tensor<0x3xi32>"],
                  "%0 = stablehlo.negate %arg0 : tensor<0x3xi32>\n return %0 : tensor<0x3xi32>",
                  lambda: [np.zeros((0, 3), np.int32)], lambda a: [-a]),
    "not_bool": (["tensor<5xi1>"], ["tensor<5xi1>"],
                 "%0 = stablehlo.not %arg0 : tensor<5xi1>\n return %0 : tensor<5xi1>",
                 lambda: [np.array([True, False, True, True, False])], lambda a: [~a]),
    "mul_c64": (["tensor<2xcomplex<f32>>"] * 2, ["tensor<2xcomplex<f32>>"],
                "%0 = stablehlo.multiply %arg0, %arg1 : tensor<2xcomplex<f32>>\n"
                " return %0 : tensor<2xcomplex<f32>>",
                lambda: [np.array([1 + 2j, 3 - 1j], np.complex64),
                         np.array([2 - 1j, 1j], np.complex64)], lambda a, b: [a * b]),
    "no_arguments": ([], ["tensor<3xui8>"],
                     "%0 = stablehlo.constant dense<[1, 2, 255]> : tensor<3xui8>\n"
                     " return %0 : tensor<3xui8>", lambda: [],
                     lambda: [np.array([1, 2, 255], np.uint8)]),
}


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_modules(cpu, name):
    arg_types, result_types, body, inputs, reference = HAND_WRITTEN[name]
    xs = inputs()
    expected = reference(*xs)
    exe = pjrt.Executable(cpu, _module(arg_types, result_types, body), xs, expected)
    for run in range(2):   # device buffers, then host arrays copied in
        args = [cpu.put(x) for x in xs] if run == 0 else xs
        outs = exe(*args)
        assert len(outs) == len(expected)
        for out, want in zip(outs, expected):
            got = out.to_host()
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6)


def _jax_cases():
    return {
        "tanh_matmul": (lambda x, w: np.tanh(x @ w), lambda jnp: lambda x, w: jnp.tanh(x @ w),
                        [((3, 4), "float32"), ((4, 2), "float32")]),
        "where_i32": (lambda x, y: np.where(x > y, x, y * 2),
                      lambda jnp: lambda x, y: jnp.where(x > y, x, y * 2),
                      [((5,), "int32"), ((5,), "int32")]),
        "sum_empty": (lambda x: (x.sum(axis=0), x * 2),
                      lambda jnp: lambda x: (jnp.sum(x, axis=0), x * 2),
                      [((0, 3), "float32")]),
        "cumsum_f16": (lambda x: np.cumsum(x, dtype=np.float16),
                       lambda jnp: lambda x: jnp.cumsum(x), [((6,), "float16")]),
        "bool_any": (lambda x: x.any(axis=1), lambda jnp: lambda x: jnp.any(x, axis=1),
                     [((2, 3), "bool")]),
        "complex_abs": (lambda x: np.abs(x) + 1, lambda jnp: lambda x: jnp.abs(x) + 1,
                        [((1, 4), "complex64")]),
        "while_loop": (lambda n: np.int32(sum(range(int(n)))),
                       None, [((), "int32")]),
    }


def _lowered(jax, name, fn, specs):
    from jax import lax
    import jax.numpy as jnp
    if name == "while_loop":
        def fn(n):
            return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + c[0]),
                                  (jnp.int32(0), jnp.int32(0)))[1]
    else:
        fn = fn(jnp)
    structs = [jax.ShapeDtypeStruct(s, d) for s, d in specs]
    lowered = jax.jit(fn).lower(*structs)
    outs = jax.tree_util.tree_leaves(lowered.out_info)
    return lowered.as_text(), outs


@pytest.mark.parametrize("name", sorted(_jax_cases()))
def test_jax_emitted_modules(cpu, name):
    jax = pytest.importorskip("jax")
    reference, fn, specs = _jax_cases()[name]
    text, out_avals = _lowered(jax, name, fn, specs)
    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal(s) * 4 + (1j if d.startswith("complex") else 0)).astype(d)
          if d != "bool" else rng.random(s) > 0.5 for s, d in specs]
    if name == "while_loop":
        xs = [np.int32(7)]
    exe = pjrt.Executable(cpu, text, xs, out_avals, device=cpu.devices[0])
    outs = [o.to_host() for o in exe(*xs)]
    want = reference(*xs)
    want = list(want) if isinstance(want, tuple) else [want]
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, np.asarray(w), rtol=2e-3 if got.dtype == np.float16
                                   else 1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ error paths

def test_malformed_module_is_the_plugins_message(cpu):
    with pytest.raises(api.PjrtError, match="custom op 'garbage' is unknown") as e:
        pjrt.Executable(cpu, "module { garbage }", [], [])
    assert isinstance(e.value, api.KilnError) and e.value.code == "UNKNOWN"
    with pytest.raises(TypeError, match="mlir_text must be a str"):
        pjrt.Executable(cpu, b"module {}", [], [])


def test_results_and_arguments_are_checked_before_running(cpu):
    body = "%0 = stablehlo.abs %arg0 : tensor<3xf32>\n return %0 : tensor<3xf32>"
    text = _module(["tensor<3xf32>"], ["tensor<3xf32>"], body)
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match=r"results \(float32\[3\]\) are not the output avals "
                                        r"given \(int32\[3\]\)"):
        pjrt.Executable(cpu, text, [x], [np.ones(3, np.int32)])
    exe = pjrt.Executable(cpu, text, [x], [x])
    with pytest.raises(TypeError, match=r"argument 0: expected float32\[3\], got float64\[3\]"):
        exe(np.ones(3))
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        exe(x, x)
    with pytest.raises(ValueError, match="not on this executable's device"):
        exe(cpu.put(x, cpu.devices[-1]))
    with pytest.raises(api.PjrtUnsupportedError, match="no PJRT buffer type for dtype object"):
        cpu.put(np.array([None]))


def _not_a_plugin():
    found = glob.glob("/lib/x86_64-linux-gnu/libm.so.6") + glob.glob("/usr/lib*/libm.so.6")
    if found:
        return found[0]
    import _ctypes
    return _ctypes.__file__


def test_a_library_that_is_not_a_plugin():
    with pytest.raises(api.PjrtError, match="is not a PJRT plug-in: it has no GetPjrtApi"):
        plugins.load(_not_a_plugin())


def test_a_file_that_is_not_a_library(tmp_path):
    path = tmp_path / "plugin.so"
    path.write_text("not ELF")
    with pytest.raises(api.PjrtError, match="cannot load"):
        plugins.load(str(path))


def test_a_missing_plugin_path(tmp_path):
    with pytest.raises(api.PjrtError, match="no PJRT plug-in at .*the file does not exist") as e:
        plugins.load(str(tmp_path / "missing.so"))
    assert "KILN_PJRT_PLUGIN" in str(e.value)


def test_the_variable_names_a_plugin(monkeypatch):
    monkeypatch.setenv("KILN_PJRT_PLUGIN", "/somewhere/plugin.so")
    assert plugins.discover()[0] == plugins.Found("KILN_PJRT_PLUGIN", "/somewhere/plugin.so")


def _table_copy(cpu, **changes):
    """A copy of the CPU plug-in's PJRT_Api with some fields changed, and its address."""
    copy = api._Table()
    ctypes.memmove(ctypes.addressof(copy), ctypes.addressof(cpu.api.table), cpu.api.size)
    copy.struct_size = cpu.api.size
    for name, value in changes.items():
        if name in ("major_version", "minor_version"):
            setattr(copy.pjrt_api_version, name, value)
        else:
            setattr(copy, name, value)
    return copy


def test_another_major_version_is_refused(cpu):
    table = _table_copy(cpu, major_version=1, minor_version=0)
    with pytest.raises(api.PjrtUnsupportedError, match=r"implements PJRT C API 1\.0; kiln speaks "
                                                       r"0\.81"):
        api.Api(ctypes.addressof(table), "old.so", None)
    api.check_version((0, api.HEADER_VERSION[1] + 5), "newer.so")   # minor versions: accepted
    api.check_version((0, 40), "older.so")


def test_functions_past_the_plugins_table_are_refused(cpu):
    # A plug-in built before PJRT_Executable_OutputElementTypes existed: its table ends at
    # PJRT_Compile. kiln refuses what is missing and falls back where it can.
    older = _table_copy(cpu)
    older.struct_size = api._Table.Compile.offset + api._Table.Compile.size
    table = api.Api(ctypes.addressof(older), "older.so", None)
    assert table.has("Compile") and not table.has("Executable_OutputElementTypes")
    with pytest.raises(api.PjrtUnsupportedError, match="does not provide "
                                                       "PJRT_Executable_OutputElementTypes"):
        table.function("Executable_OutputElementTypes")
    nulled = api.Api(ctypes.addressof(_table_copy(cpu, Client_Compile=None)), "n.so", None)
    with pytest.raises(api.PjrtUnsupportedError, match="does not provide PJRT_Client_Compile"):
        nulled.function("Client_Compile")


def test_struct_sizes_follow_the_header():
    # PJRT_STRUCT_SIZE(struct, last_field): offset of the last field plus its size.
    assert api.ApiVersion.STRUCT_SIZE == 24
    assert api.Event.STRUCT_SIZE == 24
    assert api.ErrorGetCode.STRUCT_SIZE == 28      # an enum last: no tail padding
    assert api.BufferFromHostBuffer.STRUCT_SIZE == 120
    assert api.Execute.STRUCT_SIZE == 80
    assert api.ExecuteOptions.STRUCT_SIZE == 112
    assert api.NamedValue.STRUCT_SIZE == 56
    assert api._Table.LoadedExecutable_GetDeviceAssignment.offset + 8 == \
        ctypes.sizeof(api._Table)


def test_every_struct_and_function_offset_matches_the_shipped_header(tmp_path):
    """Compile the plug-in wheel's pjrt_c_api.h with the host C compiler: every struct kiln
    declares has the header's <name>_STRUCT_SIZE, and every function its offset in PJRT_Api."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    header = os.path.join(os.path.dirname(CPU_PLUGIN[0]), "include", "pjrt_c_api.h")
    if compiler is None or not os.path.isfile(header):
        pytest.skip("no C compiler or no pjrt_c_api.h in the plug-in wheel")
    structs = sorted({v.__name__: v for v in vars(api).values() if hasattr(v, "STRUCT_SIZE")
                      and isinstance(v, type)}.items())
    lines = [f'printf("{n} %d\\n", (int){n}_STRUCT_SIZE);' for n, _ in structs]
    lines += [f'printf("{f} %d\\n", (int)offsetof(PJRT_Api, PJRT_{f}));' for f in api.FUNCTIONS]
    lines.append('printf("PJRT_Api %d\\n", (int)sizeof(PJRT_Api));')
    source = tmp_path / "sizes.c"
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"pjrt_c_api.h\"\n"
                      "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
    subprocess.run([compiler, "-I", os.path.dirname(header), str(source), "-o",
                    str(tmp_path / "sizes")], check=True)
    printed = dict(line.split() for line in subprocess.run(
        [str(tmp_path / "sizes")], check=True, capture_output=True, text=True).stdout.split("\n")
        if line)
    ours = {n: s.STRUCT_SIZE for n, s in structs}
    ours.update({f: getattr(api._Table, f).offset for f in api.FUNCTIONS})
    ours["PJRT_Api"] = ctypes.sizeof(api._Table)
    assert {k: int(v) for k, v in printed.items()} == ours


def test_compile_options_are_the_minimal_proto():
    assert pjrt.compile_options(2) == bytes.fromhex("1a0e" "2001" "2801" "4a08" "0801" "1001"
                                                    "1a02" "0802")
    assert pjrt.compile_options(300)[-2:] == bytes([0xAC, 0x02])   # 300 as a varint


# ------------------------------------------------------------------------------ the runtime

@pytest.fixture
def pjrt_devices(cpu, monkeypatch):
    monkeypatch.delenv("KILN_PJRT_PLUGIN", raising=False)
    return kiln.devices("pjrt")


def test_kiln_devices_pjrt(pjrt_devices, cpu):
    assert [d.id for d in pjrt_devices] == [d.id for d in cpu.devices]
    d = pjrt_devices[0]
    assert (d.platform, d.device_kind, d.process_index) == ("cpu", "cpu", 0)
    assert repr(d) == "PjrtDevice(platform='cpu', id=0, plugin='xla-cpu-pjrt')"
    assert d != kiln.devices("cpu")[0] and kiln.devices("cpu")[0] != d
    assert kiln.devices("pjrt") == pjrt_devices and d.layer.info.client is cpu


def test_device_put_keeps_the_buffer_on_the_device(pjrt_devices):
    device = pjrt_devices[1]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = kiln.device_put(x, device)
    assert a.device == device and a.shape == (3, 4) and a.dtype == np.float32
    buffer = a._value.data
    assert isinstance(buffer, pjrt.Buffer) and buffer.device.id == 1
    x[0, 0] = 100.0   # a copy was made: the caller's array stays theirs
    np.testing.assert_array_equal(np.asarray(a), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert kiln.device_put(a, device) is a
    host = kiln.device_put(a, kiln.devices("cpu")[0])
    assert isinstance(np.asarray(host), np.ndarray) and float(host[0, 1]) == 1.0
    b = a + 1   # an eager operation runs on the device, as a jit of it
    assert b.device == device and isinstance(b._value.data, pjrt.Buffer)
    np.testing.assert_array_equal(np.asarray(b), np.arange(12, dtype=np.float32).reshape(3, 4)
                                  + 1)


def test_executable_on_arrays_that_stay_on_the_device(pjrt_devices):
    device = pjrt_devices[0]
    text = _module(["tensor<4xf32>", "tensor<4xf32>"], ["tensor<4xf32>"],
                   "%0 = stablehlo.multiply %arg0, %arg1 : tensor<4xf32>\n"
                   " return %0 : tensor<4xf32>")
    x = np.array([1, 2, 3, 4], np.float32)
    exe = kiln.pjrt.executable(text, [x, x], [x], device)
    a = kiln.device_put(x, device)
    (y,) = exe(a, x)            # an Array on the device and a host array
    (z,) = exe(y, jnp.ones(4))   # the result goes back in without leaving the device
    assert z.device == device and type(z._value.data) is pjrt.Buffer
    np.testing.assert_array_equal(np.asarray(z), x * x)
    with pytest.raises(TypeError, match="not a PJRT device"):
        kiln.pjrt.executable(text, [x, x], [x], kiln.devices("cpu")[0])
    with pytest.raises(ValueError, match="argument 0 is on cpu:1, not on this executable's "
                                         "device cpu:0"):
        exe(kiln.device_put(x, pjrt_devices[1]), x)


def test_tpu_without_libtpu_fails_fast(monkeypatch):
    monkeypatch.delenv("TPU_LIBRARY_PATH", raising=False)
    monkeypatch.setattr(plugins, "_in_package", lambda module, pattern: [])
    with pytest.raises(RuntimeError, match=r"Unable to initialize backend 'tpu': libtpu is not "
                                           r"installed \(pip install libtpu"):
        kiln.devices("tpu")


def test_tpu_without_a_chip_fails_before_loading_libtpu(monkeypatch, tmp_path):
    fake = tmp_path / "libtpu.so"
    fake.write_text("never loaded")
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(fake))
    monkeypatch.setattr(plugins, "tpu_chips", lambda: 0)
    monkeypatch.setattr(plugins, "load", lambda path: pytest.fail("libtpu was loaded"))
    with pytest.raises(RuntimeError, match="this machine has no TPU chip"):
        kiln.devices("tpu")
    monkeypatch.delenv("TPU_SKIP_MDS_QUERY", raising=False)
    plugins.prepare_libtpu()
    assert os.environ["TPU_SKIP_MDS_QUERY"] == "1"


def test_doctor_lists_the_plugins(cpu, monkeypatch):
    from kiln.cli import doctor
    monkeypatch.delenv("KILN_PJRT_PLUGIN", raising=False)
    rows = dict(p for _, probes in doctor.SECTIONS for p in probes)
    line = doctor.probe(rows["plug-ins"])
    assert line.startswith(f"xla-cpu-pjrt ({CPU_PLUGIN[0]}): PJRT C API 0.")
    assert f"platform 'cpu' with {len(cpu.devices)} devices (cpu)" in line
    monkeypatch.setenv("KILN_PJRT_PLUGIN", "/nowhere/plugin.so")
    assert "KILN_PJRT_PLUGIN (/nowhere/plugin.so): error: PJRT error NOT_FOUND: no PJRT " \
           "plug-in at '/nowhere/plugin.so'" in doctor.probe(rows["plug-ins"])


def _double(x):
    return x * 2


def test_jit_sends_pjrt_arrays_to_the_pjrt_backend_not_cuda(pjrt_devices):
    a = kiln.device_put(np.ones(3, np.float32), pjrt_devices[0])
    b = kiln.jit(_double)(a)   # tests/test_pjrt_jit.py tests backend="pjrt" itself
    assert type(b._value.data) is pjrt.Buffer and b.device == pjrt_devices[0]
    np.testing.assert_array_equal(np.asarray(b), [2, 2, 2])
