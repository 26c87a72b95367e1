"""Results of operations on arrays placed over a mesh whose axes are Auto keep a NamedSharding,
the one JAX 0.10.2 gives (XLA's propagation): eager operations and `jit`, against JAX run in
a subprocess with eight CPU devices (its device count is fixed once JAX starts), values and
shardings (mesh shape and names, spec) compared."""
import numpy as np
import pytest

import kiln
import kiln.numpy as kjnp
from kiln import lax as klax
from kiln.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

import jax_devices


class Lib:
    """What the cases call, from kiln or from JAX."""

    def __init__(self, root, numpy, lax, sharding):
        self.root, self.numpy, self.lax = root, numpy, lax
        self.Mesh, self.NamedSharding = sharding.Mesh, sharding.NamedSharding
        self.P, self.AxisType = sharding.PartitionSpec, sharding.AxisType


def _arrays(lib):
    mesh = lib.Mesh(np.array(lib.root.devices()).reshape(4, 2), ("x", "y"))
    base = lib.numpy.arange(32.).reshape(8, 4)

    def put(*spec):
        return lib.root.device_put(base, lib.NamedSharding(mesh, lib.P(*spec)))
    return mesh, put("x", "y"), put("y", "x"), put("x", None), put(), base


def _cases(lib):
    """{name: thunk} of the operations compared."""
    jnp, jit, lax = lib.numpy, lib.root.jit, lib.lax
    mesh, x, xt, xx, xr, plain = _arrays(lib)
    nsh = lib.NamedSharding

    def constrained(a):
        return lax.with_sharding_constraint(a * 2, nsh(mesh, lib.P(None, "x")))

    def several(a):
        return a.T, a.sum(1), jnp.dot(a, a.T)

    def constrained_argument(a):
        return jnp.cos(lax.with_sharding_constraint(a, nsh(mesh, lib.P("y", None))))

    def looped(a):
        return lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1, a)

    def decomposed(a):   # (full rank: one answer)
        return jnp.linalg.qr(jnp.sin(a * a * 0.37))

    def sorted_rows(a):
        return jnp.sort(a, axis=0), jnp.argsort(a, axis=1)

    def inverted(a):
        return jnp.linalg.inv(a[:4] + 8 * jnp.eye(4))

    def row_dot(r):
        return jnp.dot(r, r)

    def sine_sum(a):
        return jnp.sin(a).sum()

    def twice_transposed(a):
        return a.T.T

    def row_sums(a):
        return (a * 2).sum(1)[:, None] * a

    def constant(a):
        return jnp.ones(3)

    def added(a, b):
        return a + b

    def sine(a):
        return jnp.sin(a) + 1

    def summed(a):
        return a.sum(0)

    def total(a):
        return a.sum()

    def row(a):
        return a[0]

    def cumulative(a):
        return jnp.cumsum(a, 0)

    def reshaped(a):
        return jnp.tanh(a).reshape(32)

    xy = lib.root.device_put(plain, nsh(mesh, lib.P(None, "y")))
    return {
        "scaled": lambda: x * 2, "moved_axis": lambda: xx + xx.T.reshape(8, 4),
        "moved_axis_first": lambda: xx.T.reshape(8, 4) + xx, "one_conflict": lambda: xt + xx,
        "merged": lambda: xx * xy, "merged_jit": lambda: jit(added)(xy, xx),
        "kept_spec": lambda: xx * 2, "transposed_back": lambda: xx.T.T,
        "jit_transposed_back": lambda: jit(twice_transposed)(xx),
        "jit_row_sums": lambda: jit(row_sums)(xx), "dot_kept_spec": lambda: jnp.dot(xx, xy.T),
        "columns_kept_spec": lambda: xx[:, :2],
        "jit_constrained_argument": lambda: jit(constrained_argument)(x),
        "jit_loop": lambda: jit(looped)(x),
        "vmap": lambda: lib.root.vmap(row_dot)(x),
        "vmap_axis1": lambda: lib.root.vmap(sine, in_axes=1)(x),
        "grad": lambda: lib.root.grad(sine_sum)(x),
        "value_and_grad": lambda: lib.root.value_and_grad(sine_sum)(xx),
        "qr": lambda: decomposed(x), "jit_qr": lambda: jit(decomposed)(x),
        "sort": lambda: sorted_rows(x), "jit_sort": lambda: jit(sorted_rows)(x),
        "inv": lambda: inverted(x), "jit_inv": lambda: jit(inverted)(x),
        "svd": lambda: jnp.linalg.svd(jnp.sin(x * x * 0.37), compute_uv=False),
        "cholesky": lambda: jnp.linalg.cholesky(jnp.dot(x.T, x) / 64 + jnp.eye(4)),
        "constraint": lambda: lax.with_sharding_constraint(x, nsh(mesh, lib.P(None, "x"))),
        "constraint_plain": lambda: lax.with_sharding_constraint(plain, nsh(mesh, lib.P("y"))),
        "replicated": lambda: jnp.sin(xr), "conflict": lambda: x + xt,
        "partial": lambda: x + xx, "partial_first": lambda: xx + x,
        "with_plain": lambda: x + plain, "plain_first": lambda: plain + x,
        "transpose": lambda: x.T, "sum": lambda: x.sum(), "sum0": lambda: x.sum(0),
        "sum1": lambda: x.sum(1), "max_replicated": lambda: xr.max(0),
        "dot": lambda: jnp.dot(x, x.T), "dot_t": lambda: jnp.dot(x.T, x),
        "expand": lambda: x[None], "flatten": lambda: x.reshape(32),
        "divide": lambda: x.reshape(8, 2, 2), "broadcast": lambda: jnp.broadcast_to(x, (3, 8, 4)),
        "row": lambda: x[0], "rows": lambda: x[1:3], "column": lambda: x[:, 0],
        "columns": lambda: x[:, :2], "strided": lambda: x[::2],
        "squeeze": lambda: jnp.squeeze(x[None]), "cumsum": lambda: jnp.cumsum(x, 0),
        "astype": lambda: x.astype(jnp.int32),
        "jit_sine": lambda: jit(sine)(x), "jit_sum0": lambda: jit(summed)(x),
        "jit_sum": lambda: jit(total)(x), "jit_constraint": lambda: jit(constrained)(x),
        "jit_plain": lambda: jit(sine)(plain), "jit_conflict": lambda: jit(added)(x, xt),
        "jit_several": lambda: jit(several)(x), "jit_constant": lambda: jit(constant)(x),
        "jit_row": lambda: jit(row)(x), "jit_cumsum": lambda: jit(cumulative)(x),
        "jit_reshape": lambda: jit(reshaped)(x),
    }


def _set_mesh_cases(lib):
    """Over `make_mesh(..., axis_types=(Auto,))` given to `set_mesh`, PartitionSpecs."""
    jnp, jit, lax, P = lib.numpy, lib.root.jit, lib.lax, lib.P
    mesh = lib.root.make_mesh((8,), ("X",), axis_types=(lib.AxisType.Auto,))

    def constrained(a, b):
        return lax.with_sharding_constraint(jnp.dot(a, b) + 1, P("X", None))

    def uneven(a, b):   # 4 rows over 8 devices: XLA leaves them whole
        return lax.with_sharding_constraint(jnp.dot(a.T, b.T), P("X", None))

    with lib.root.set_mesh(mesh):
        a = lib.root.device_put(jnp.arange(64.).reshape(8, 8) / 64, P(None, "X"))
        b = lib.root.device_put(jnp.arange(64.).reshape(8, 8) / 32, P("X", None))
        return {"mesh_dot": jnp.dot(a, b), "mesh_constraint": jit(constrained)(a, b),
                "mesh_uneven": jit(uneven)(a[:4].T, b[:, :4].T),
                "mesh_product": a * b, "mesh_sum": (a * b).sum(1)}


def _described(value):
    """[(values as lists, sharding)] of a result or tuple of results; sharding: ["named",
    mesh axis names, sizes, spec entries] or ["single", device id]."""
    out = []
    for v in value if isinstance(value, tuple) else (value,):
        s = v.sharding
        if hasattr(s, "spec"):
            spec = [list(e) if isinstance(e, tuple) else e for e in s.spec]
            where = ["named", list(s.mesh.axis_names), list(s.mesh.devices.shape), spec]
        else:
            where = ["single", next(iter(s.device_set)).id]
        out.append([np.asarray(v).tolist(), where])
    return out


def _all(lib):
    results = {k: f() for k, f in _cases(lib).items()}
    results.update(_set_mesh_cases(lib))
    return {k: _described(v) for k, v in results.items()}


@pytest.fixture(scope="module")
def jax_results():
    return jax_devices.jax_results(
        "test_auto_sharding", "t._all(t.Lib(jax, jax.numpy, jax.lax, jax.sharding))")


@pytest.fixture(scope="module")
def kiln_results():
    import kiln.sharding
    return _all(Lib(kiln, kjnp, klax, kiln.sharding))


CASES = [*_cases(Lib(kiln, kjnp, klax, kiln.sharding)).keys(), "mesh_dot", "mesh_constraint",
         "mesh_uneven", "mesh_product", "mesh_sum"]


@pytest.mark.parametrize("name", CASES)
def test_result_sharding_as_jax(name, jax_results, kiln_results):
    (mine, theirs) = kiln_results[name], jax_results[name]
    assert len(mine) == len(theirs)
    for (value, where), (want, want_where) in zip(mine, theirs):
        np.testing.assert_allclose(np.asarray(value, dtype=float),
                                   np.asarray(want, dtype=float), rtol=1e-5, atol=1e-6)
        assert where == want_where, (name, where, want_where)


def test_auto_axes_are_not_in_the_type():
    """typeof of values over Auto axes names no axis (JAX: spec P(None, None)), eagerly and
    inside jit; the result's sharding names them."""
    _, x, *_ = _arrays(Lib(kiln, kjnp, klax, kiln.sharding))
    seen = []

    @kiln.jit
    def f(a):
        seen.append(kiln.typeof(a * 2).sharding.spec)
        return a * 2
    y = f(x)
    assert kiln.typeof(x * 2).sharding.spec == PartitionSpec(None, None)
    assert seen == [PartitionSpec(None, None)]
    assert str(kiln.typeof(y)) == "f32[8,4]"
    assert y.sharding.spec == PartitionSpec("x", "y")


def test_explicit_axes_still_typed_and_checked():
    """Over Explicit axes nothing changed: results are typed, and operands split differently
    are an error (where Auto axes give a replicated result)."""
    devices = np.array(kiln.devices()).reshape(4, 2)
    mesh = Mesh(devices, ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    base = kjnp.arange(32.).reshape(8, 4)
    x = kiln.device_put(base, NamedSharding(mesh, PartitionSpec("x", "y")))
    xt = kiln.device_put(base, NamedSharding(mesh, PartitionSpec("y", "x")))
    assert str(kiln.typeof(x * 2)) == "f32[8@x,4@y]"
    with pytest.raises(ValueError, match="split over different mesh axes"):
        x + xt
