"""Committed arrays, as JAX 0.10.2 has them: `device_put` onto a device or sharding commits an
array there, results computed from committed arrays (eagerly, by `jit`, `vmap`, `grad`) stay
there and are committed, operands committed to different devices are a ValueError, and a `jit`
reused over meshes of one shape places its results on each call's mesh. Compared with JAX run
in a subprocess with eight CPU devices (its device count is fixed once JAX starts): values,
`committed`, and the devices and spec of each result's sharding."""
import numpy as np
import pytest

import kiln
import kiln.numpy as kjnp
from kiln.sharding import NamedSharding

import jax_devices


def _cases(jax, jnp, NamedSharding):
    """{name: thunk} of the operations compared."""
    d = jax.devices()
    P = jax.sharding.PartitionSpec
    a = jax.device_put(1.0, d[1])
    b = jax.device_put(2.0, d[0])
    m0 = jax.make_mesh((1,), ("x",), devices=d[:1])
    m1 = jax.make_mesh((1,), ("x",), devices=d[1:2])
    e = jax.device_put(1.0, NamedSharding(m0, P()))
    f = jax.device_put(2.0, NamedSharding(m1, P()))
    mesh_a = jax.make_mesh((4,), ("x",), devices=d[:4])
    mesh_b = jax.make_mesh((4,), ("x",), devices=d[4:])
    xa = jax.device_put(np.arange(8.0), NamedSharding(mesh_a, P("x")))
    plain = jnp.arange(4.0)

    def staged():   # one jitted function over four meshes of the same shape
        stage = jax.jit(lambda x: jnp.sin(x) + 1.0)
        outs = []
        for i in range(4):
            m = jax.make_mesh((2,), ("x",), devices=d[2 * i:2 * i + 2])
            outs.append(stage(jax.device_put(np.full((4, 2), float(i)), NamedSharding(m, P("x")))))
        return tuple(outs)

    def twice(fn, *args):   # the second call takes jit's fast path
        jitted = jax.jit(fn)
        jitted(*args)
        return jitted(*args)

    def put_inside(x):
        return jax.device_put(x, NamedSharding(mesh_b, P("x")))

    def replicate_inside(x):
        return jax.device_put(x * 2, NamedSharding(mesh_a, P()))

    return {
        "uncommitted": lambda: plain,
        "put_nowhere": lambda: jax.device_put(np.ones(3)),
        "put_device": lambda: a,
        "eager_on_device": lambda: (a + 1, a * jnp.float32(2), jnp.sin(a), a + plain),
        "jit_on_device": lambda: twice(lambda p, q: (p * q, jnp.ones(2)), a, plain),
        "jit_on_device_only": lambda: twice(lambda p: {"y": p * 3}, a)["y"],
        "jit_uncommitted": lambda: jax.jit(jnp.sin)(plain),
        "on_device_0": lambda: (b, b + plain),
        "one_device_mesh": lambda: (e + 1, f * 2, jax.jit(lambda q: q * 2)(f)),
        "vmap_grad_on_device": lambda: (jax.vmap(lambda q: q * 2)(jax.device_put(plain, d[3])),
                                        jax.grad(lambda q: q * 2)(a)),
        "explicit_untyped_results": lambda: (xa.sum(), jax.jit(lambda x: (x, x.sum()))(xa)),
        "jit_over_meshes": staged,
        "replicate_inside_jit": lambda: jax.jit(replicate_inside)(xa),
        "zeros_like_uncommitted": lambda: jnp.zeros_like(a),
        "sampler_on_device": lambda: [   # (from the 17th call, kiln compiles the sampler)
            jax.random.normal(jax.device_put(jax.random.key(i), d[3]), (3,)) for i in range(20)][-1],
        "error_eager_devices": lambda: a + b,
        "error_jit_devices": lambda: jax.jit(lambda p, q: p + q)(a, b),
        "error_mesh_devices": lambda: e + f,
        "error_put_inside_jit": lambda: jax.jit(put_inside)(xa),
    }


def _described(value):
    """[[values, committed, devices, spec]] per result (tuples flattened); spec without
    trailing Nones, None for a SingleDeviceSharding."""
    if isinstance(value, tuple):
        return [r for v in value for r in _described(v)]
    s = value.sharding
    if hasattr(s, "spec"):
        spec = [list(x) if isinstance(x, tuple) else x for x in s.spec]
        while spec and spec[-1] is None:
            spec.pop()
        devices = [dev.id for dev in s.mesh.devices.flat]
    else:
        spec, devices = None, [next(iter(s.device_set)).id]
    return [[np.asarray(value).tolist(), bool(value.committed), devices, spec]]


def _all(jax, jnp, NamedSharding):
    results = {}
    for name, thunk in _cases(jax, jnp, NamedSharding).items():
        try:
            results[name] = _described(thunk())
        except ValueError as e:
            results[name] = ["ValueError", str(e)]
    return results


@pytest.fixture(scope="module")
def jax_results():
    return jax_devices.jax_results(
        "test_committed", "t._all(jax, jax.numpy, jax.sharding.NamedSharding)")


@pytest.fixture(scope="module")
def kiln_results():
    return _all(kiln, kjnp, NamedSharding)


@pytest.mark.parametrize("name", list(_cases(kiln, kjnp, NamedSharding)))
def test_as_jax(name, jax_results, kiln_results):
    mine, theirs = kiln_results[name], jax_results[name]
    if theirs[0] == "ValueError":
        assert mine[0] == "ValueError", (name, mine)
        return
    assert len(mine) == len(theirs), (name, mine, theirs)
    for (value, committed, devices, spec), (want, w_committed, w_devices, w_spec) in \
            zip(mine, theirs):
        np.testing.assert_allclose(np.asarray(value, dtype=float), np.asarray(want, dtype=float),
                                   rtol=1e-6)
        assert (committed, devices, spec) == (w_committed, w_devices, w_spec), name


def test_messages(kiln_results):
    """The errors name both operands' devices, and the device_put's line inside jit."""
    eager = kiln_results["error_eager_devices"][1]
    assert "argument 0 of add (f32[]) is committed to devices [1]" in eager
    assert "argument 1 (f32[]) to devices [0]" in eager and "device_put" in eager
    assert "argument 0 of jit(" in kiln_results["error_jit_devices"][1]
    inside = kiln_results["error_put_inside_jit"][1]
    assert "device_put inside it puts a value onto devices [4, 5, 6, 7]" in inside
    assert "test_committed.py" in inside and "def put_inside" not in inside
    assert "return jax.device_put(x, NamedSharding(mesh_b" in inside
