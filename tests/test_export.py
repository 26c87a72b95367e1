"""kiln.export against JAX 0.10.2's jax.export: the attributes of an Exported, `call` inside
and outside `jit`, serialization round trips (pytrees with registered custom nodes and
namedtuples), `grad` through a deserialized call up to the serialized VJP order, and the
errors (argument structure, shape, dtype, platform, foreign or corrupt blobs). The calls of
JAX's export documentation page run under KILN_AS_JAX=1 and on JAX, with equal results."""
import collections
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import export

jax = pytest.importorskip("jax")
jax_export = pytest.importorskip("jax.export")

PROGRAMS = pathlib.Path(__file__).parent / "compat_programs"


def model(params, x, *, scale):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return {"y": h * scale, "n": (jnp.argmax(h, axis=-1),)}, jnp.sum(h ** 2)


def jmodel(params, x, *, scale):
    jnp_ = jax.numpy
    h = jnp_.tanh(x @ params["w"] + params["b"])
    return {"y": h * scale, "n": (jnp_.argmax(h, axis=-1),)}, jnp_.sum(h ** 2)


def _inputs():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)).astype(np.float32),
              "b": rng.standard_normal(3).astype(np.float32)}
    return params, rng.standard_normal((2, 4)).astype(np.float32), np.float32(0.5)


def _avals(avals):
    return [(tuple(a.shape), np.dtype(a.dtype).name, bool(a.weak_type)) for a in avals]


def _tree(treedef):
    """A treedef as text both libraries spell alike."""
    return repr(treedef).replace("PyTreeDef", "")


@pytest.fixture(scope="module")
def both():
    params, x, scale = _inputs()
    k = export.export(kiln.jit(model))(params, kiln.ShapeDtypeStruct(x.shape, x.dtype),
                                        scale=scale)
    j = jax_export.export(jax.jit(jmodel))(params, jax.ShapeDtypeStruct(x.shape, x.dtype),
                                           scale=scale)
    return k, j


def test_attributes_match_jax(both):
    k, j = both
    assert k.fun_name == "model" and j.fun_name == "jmodel"
    assert _tree(k.in_tree) == _tree(j.in_tree)
    assert _tree(k.out_tree) == _tree(j.out_tree)
    assert _avals(k.in_avals) == _avals(j.in_avals)
    assert _avals(k.out_avals) == _avals(j.out_avals)
    for name in ("in_shardings_hlo", "out_shardings_hlo", "nr_devices", "platforms",
                 "ordered_effects", "unordered_effects", "calling_convention_version",
                 "module_kept_var_idx", "uses_global_constants"):
        want = getattr(j, name)
        assert getattr(k, name) == (tuple(want) if isinstance(want, list) else want), name
    assert tuple(k.disabled_safety_checks) == tuple(j.disabled_safety_checks) == ()
    assert str(k) == "Exported(fun_name=model, ...)"
    assert k.in_shardings_jax(None) == (None,) * 4
    text = k.mlir_module()
    assert "func.func public @main" in text and "tensor<2x4xf32>" in text
    assert k.mlir_module_serialized == text.encode()
    assert (export.minimum_supported_calling_convention_version,
            export.maximum_supported_calling_convention_version) == \
        (jax_export.minimum_supported_calling_convention_version,
         jax_export.maximum_supported_calling_convention_version)
    assert export.default_export_platform() == jax_export.default_export_platform()


def test_vjp_attributes_match_jax(both):
    k, j = both
    kv, jv = k.vjp(), j.vjp()
    assert k.has_vjp() and j.has_vjp()
    assert _avals(kv.in_avals) == _avals(jv.in_avals)    # float0 for the int output's ct
    assert _avals(kv.out_avals) == _avals(jv.out_avals)
    assert _tree(kv.in_tree) == _tree(jv.in_tree)
    assert kv.module_kept_var_idx == (0, 1, 2, 3, 5, 6)   # float0 inputs carry no data


def test_call_matches_jax_inside_and_outside_jit(both):
    k, j = both
    params, x, scale = _inputs()
    want = j.call(params, x, scale=scale)
    got = k.call(params, x, scale=scale)
    inside = kiln.jit(lambda p, x: k.call(p, x, scale=scale))(params, x)
    for out in (got, inside):
        np.testing.assert_allclose(out[0]["y"], want[0]["y"], rtol=1e-6)
        np.testing.assert_array_equal(out[0]["n"][0], want[0]["n"][0])
        np.testing.assert_allclose(out[1], want[1], rtol=1e-6)


def test_round_trip_and_grad_match_jax(both):
    k, j = both
    params, x, scale = _inputs()
    blob = k.serialize(vjp_order=1)
    assert blob == k.serialize(vjp_order=1)   # deterministic
    back = export.deserialize(blob)
    assert _tree(back.in_tree) == _tree(k.in_tree) and back.out_tree == k.out_tree
    assert _avals(back.in_avals) == _avals(k.in_avals)
    assert back.mlir_module() == k.mlir_module() and back.has_vjp()

    want = jax.grad(lambda p: j.call(p, x, scale=scale)[1])(params)
    got = kiln.grad(lambda p: back.call(p, x, scale=scale)[1])(params)
    got_jit = kiln.jit(kiln.grad(lambda p: back.call(p, x, scale=scale)[1]))(params)
    for g in (got, got_jit):
        for name in ("w", "b"):
            np.testing.assert_allclose(g[name], want[name], rtol=1e-5, atol=1e-6)


def cube(x):
    return 7 * x * x * x


def test_grad_stops_at_the_serialized_order():
    exp = export.export(kiln.jit(cube))(1.)
    f1 = export.deserialize(exp.serialize(vjp_order=1)).call
    assert float(kiln.grad(f1)(0.1)) == pytest.approx(0.21, rel=1e-6)
    assert float(kiln.jit(kiln.grad(f1))(0.1)) == pytest.approx(0.21, rel=1e-6)
    with pytest.raises(ValueError, match="No VJP is available.*vjp_order"):
        kiln.grad(kiln.grad(f1))(0.1)
    f0 = export.deserialize(exp.serialize())
    assert not f0.has_vjp()
    with pytest.raises(ValueError, match="No VJP is available"):
        f0.vjp()
    with pytest.raises(ValueError, match="No VJP is available"):
        kiln.grad(f0.call)(0.1)
    with pytest.raises(ValueError, match="No VJP is available"):
        f0.serialize(vjp_order=1)
    # One made by export has every order, as JAX's.
    assert float(kiln.grad(kiln.grad(kiln.grad(exp.call)))(0.1)) == pytest.approx(42.0)


Point = collections.namedtuple("Point", ["x", "y"])


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


kiln.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), "pair"),
                                    lambda aux, ch: Pair(*ch))


def swap(p, q):
    return Pair(p.y, p.x), Point(q.b * 2, q.a)


def test_custom_pytrees_need_registration_then_round_trip():
    p = Point(np.float32(1), np.float32(2))
    q = Pair(np.ones(2, np.float32), np.int32(3))
    exp = export.export(kiln.jit(swap))(p, q)
    with pytest.raises(ValueError, match="unregistered type.*register_namedtuple_serialization"):
        exp.serialize()
    export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")
    with pytest.raises(ValueError, match="unregistered type.*Pair"):
        exp.serialize()
    export.register_pytree_node_serialization(
        Pair, serialized_name="test_export.Pair",
        serialize_auxdata=lambda aux: aux.encode(),
        deserialize_auxdata=lambda b: b.decode())
    with pytest.raises(ValueError, match="Duplicate serialization registration"):
        export.register_namedtuple_serialization(Point, serialized_name="other")
    back = export.deserialize(exp.serialize())
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    r, s = back.call(p, q)
    assert isinstance(r, Pair) and isinstance(s, Point)
    assert float(r.a) == 2 and float(r.b) == 1 and int(s.x) == 6
    np.testing.assert_array_equal(s.y, [1, 1])
    with pytest.raises(ValueError, match="Use `kiln.export.register_pytree_node_serial"):
        export.register_namedtuple_serialization(Pair, serialized_name="x")


def with_callback(x):
    shape = kiln.ShapeDtypeStruct(x.shape, x.dtype)
    return kiln.lax.fori_loop(0, 2, lambda i, c: c + kiln.pure_callback(np.sin, shape, c), x)


def printing(x):
    kiln.debug.print("x = {}", x)
    return x + 1


def test_debug_print_is_exported(capfd):
    exp = export.deserialize(export.export(kiln.jit(printing))(np.float32(2)).serialize())
    assert float(exp.call(np.float32(2))) == 3
    assert "x = 2.0" in capfd.readouterr().out


def test_call_errors_name_the_argument(both):
    k, _ = both
    params, x, scale = _inputs()
    with pytest.raises(ValueError, match="same pytree structure as when the function "
                                         "'model' was exported"):
        k.call(params, x)
    with pytest.raises(ValueError, match=r"Shape mismatch for args\[2\].*\.shape\[0\].*"
                                         r"expected \(2, 4\) and called with \(3, 4\)"):
        k.call(params, np.zeros((3, 4), np.float32), scale=scale)
    with pytest.raises(ValueError, match=r"Dtype mismatch for args\[2\].*float32.*int32"):
        k.call(params, np.zeros((2, 4), np.int32), scale=scale)
    with pytest.raises(ValueError, match=r"Rank mismatch for args\[2\]"):
        k.call(params, np.zeros(4, np.float32), scale=scale)
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(model)
    with pytest.raises(NotImplementedError, match="calls Python functions of this process "
                                                  r"\(pure_callback\)"):
        export.export(kiln.jit(with_callback))(x)
    with pytest.raises(NotImplementedError, match="shape polymorphism is not supported"):
        export.symbolic_shape("b, 4")
    with pytest.raises(NotImplementedError, match="export once per shape"):
        export.symbolic_args_specs((x,), "b, 4")


def test_deserialize_refuses_foreign_and_corrupt_blobs(both):
    k, j = both
    blob = k.serialize()
    header, digest, payload = bytes(blob).split(b"\n", 2)
    assert header == b"kiln.export %d" % export.FORMAT_VERSION
    damaged = bytearray(blob)
    damaged[-5] ^= 1
    with pytest.raises(export.ExportFormatError, match="corrupt"):
        export.deserialize(damaged)
    with pytest.raises(export.ExportFormatError, match="format version 99.*reads version"):
        export.deserialize(b"kiln.export 99\n" + digest + b"\n" + payload)
    with pytest.raises(export.ExportFormatError, match="not a kiln.export blob"):
        export.deserialize(b"hello world")
    doc = json.loads(payload)
    doc["ssa"] = doc["ssa"].replace("tanh(", "no_such_op(")
    payload = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    import hashlib
    forged = b"kiln.export 1\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + \
        payload
    with pytest.raises(export.ExportFormatError, match="SSA form does not read back"):
        export.deserialize(forged)


def test_jax_blobs_are_named_as_such(both):
    pytest.importorskip("flatbuffers", reason="JAX's serialization needs flatbuffers")
    with pytest.raises(export.ExportFormatError,
                       match=r"JAX's jax.export format \(a FlatBuffer.*kiln cannot read"):
        export.deserialize(both[1].serialize())


def test_export_page_runs_as_on_jax():
    pytest.importorskip("flatbuffers", reason="JAX's serialization needs flatbuffers")
    runs = []
    for as_jax in (True, False):
        env = dict(os.environ)
        env.pop("KILN_AS_JAX", None)
        if as_jax:
            env["KILN_AS_JAX"] = "1"
        out = subprocess.run([sys.executable, str(PROGRAMS / "export_page.py")], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout))
    kiln_out, jax_out = runs
    assert kiln_out.keys() == jax_out.keys()
    for key, value in jax_out.items():
        if isinstance(value, list) and value and isinstance(value[0], float):
            np.testing.assert_allclose(kiln_out[key], value, rtol=1e-6, err_msg=key)
        else:
            assert kiln_out[key] == value, key


def ident(x, n):
    return x, n


def test_python_scalars_take_the_exported_types():
    args = (np.ones(2, np.float32), np.int32(1))
    k = export.export(kiln.jit(ident))(*args).call(np.ones(2, np.float32), 5)
    j = jax_export.export(jax.jit(ident))(*args).call(np.ones(2, np.float32), 5)
    assert (k[1].dtype, k[1].weak_type) == (j[1].dtype, j[1].weak_type) == (np.int32, False)
    assert int(k[1]) == int(j[1]) == 5
