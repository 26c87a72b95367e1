"""kiln.ops (segment reductions), kiln.flatten_util, kiln.ref, kiln.stages and kiln.version
against JAX 0.10.2's modules of the same names."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import ops, flatten_util, ref, stages, version

jax = pytest.importorskip("jax")
jnp = jax.numpy
import jax.flatten_util  # noqa: E402

rng = np.random.default_rng(0)
DATA = rng.standard_normal((10, 3)).astype(np.float32)
IDS = np.array([0, 2, 2, 1, 5, -1, 0, 7, 3, 3], np.int32)
NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kw", [dict(num_segments=6), dict(), dict(num_segments=4, bucket_size=3),
                                dict(num_segments=6, mode="clip"), dict(num_segments=1)])
def test_segment_reductions_as_jax(name, kw):
    mine, theirs = getattr(ops, name), getattr(jax.ops, name)
    for data in (DATA, np.arange(10, dtype=np.int32), DATA[:, 0].astype(np.float16)):
        expected = theirs(data, IDS, **kw)
        got = mine(data, IDS, **kw)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64),
                                   rtol=2e-3 if data.dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_segment_reductions_under_transforms(name):
    mine, theirs = getattr(ops, name), getattr(jax.ops, name)
    np.testing.assert_allclose(kiln.jit(lambda d, i: mine(d, i, num_segments=4))(DATA, IDS),
                               theirs(DATA, IDS, num_segments=4), rtol=1e-6)
    loss = lambda f, np_: lambda d: (f(d, IDS, 4) * np_.arange(1.0, 4.0)).sum()  # noqa: E731
    if name != "segment_prod":
        np.testing.assert_allclose(kiln.grad(loss(mine, knp))(DATA),
                                   jax.grad(loss(theirs, jnp))(DATA), rtol=1e-5)
    else:   # JAX has no gradient of a scatter-multiply with repeated ids: finite differences
        data = DATA.astype(np.float64)
        with kiln.enable_x64(True):
            got = np.asarray(kiln.grad(loss(mine, knp))(data))
            f = lambda d: float(loss(mine, knp)(d))  # noqa: E731
            eps = np.eye(data.size).reshape((data.size,) + data.shape) * 1e-6
            numeric = np.array([(f(data + e) - f(data - e)) / 2e-6 for e in eps])
        np.testing.assert_allclose(got.ravel(), numeric, rtol=1e-5, atol=1e-8)
    stacked = np.stack([DATA, 2 * DATA])
    np.testing.assert_allclose(kiln.vmap(lambda d: mine(d, IDS, 3))(stacked),
                               jax.vmap(lambda d: theirs(d, IDS, 3))(stacked), rtol=1e-6)


def test_segment_errors():
    with pytest.raises(kiln.errors.ConcretizationTypeError, match="Pass num_segments"):
        kiln.jit(lambda d, i: ops.segment_sum(d, i))(DATA, IDS)
    with pytest.raises(ValueError, match="segment_ids is empty"):
        ops.segment_sum(np.ones((0, 2), np.float32), np.zeros(0, np.int32))
    np.testing.assert_array_equal(ops.segment_sum(np.ones((0, 2)), np.zeros(0, np.int32), 2),
                                  np.zeros((2, 2)))
    with pytest.raises(TypeError, match="add does not accept dtype bool"):
        ops.segment_sum(np.array([True, False]), np.array([0, 1]), 2)
    np.testing.assert_array_equal(ops.segment_min(np.array([True, False, True]),
                                                  np.array([0, 0, 1]), 3),
                                  jax.ops.segment_min(np.array([True, False, True]),
                                                      np.array([0, 0, 1]), 3))


TREE = {"a": np.ones((2, 3), np.float32), "b": np.arange(3, dtype=np.int32), "c": 2.0,
        "d": [np.float16(1)]}


@pytest.mark.parametrize("tree", [TREE, {}, None, [1, 2], (np.ones(2, np.complex64),
                                                           np.ones(1, np.float32))])
def test_ravel_pytree_as_jax(tree):
    flat, unravel = flatten_util.ravel_pytree(tree)
    expected, their_unravel = jax.flatten_util.ravel_pytree(tree)
    assert flat.dtype == expected.dtype and flat.weak_type == expected.weak_type
    np.testing.assert_array_equal(flat, expected)
    back, their_back = unravel(flat * 2), their_unravel(expected * 2)
    assert kiln.tree_util.tree_structure(back) == kiln.tree_util.tree_structure(tree)
    for mine, theirs in zip(kiln.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(their_back)):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)
    assert unravel == flatten_util.ravel_pytree(tree)[1]
    assert hash(unravel) == hash(flatten_util.ravel_pytree(tree)[1])


def test_ravel_pytree_errors_and_transforms():
    flat, unravel = flatten_util.ravel_pytree(TREE)
    with pytest.raises(TypeError, match="^unravel function given array of dtype int32, but "
                                        "expected dtype float32$"):
        unravel(knp.ones(11, np.int32))
    with pytest.raises(ValueError, match=r"Sum of sizes 11 must be equal to dimension 0 of the "
                                         r"operand shape \[2, 5\]"):
        unravel(knp.ones((2, 5)))
    tree = {"x": np.ones(2, np.float32), "y": np.zeros((1, 2), np.float32)}
    np.testing.assert_array_equal(kiln.jit(lambda t: flatten_util.ravel_pytree(t)[0])(tree),
                                  [1, 1, 0, 0])
    grads = kiln.grad(lambda t: (flatten_util.ravel_pytree(t)[0] ** 2).sum())(
        {"x": np.ones(2, np.float32), "y": 3.0})
    np.testing.assert_array_equal(grads["x"], [2, 2])
    assert float(grads["y"]) == 6.0
    assert kiln.vmap(unravel)(knp.stack([flat, flat]))["a"].shape == (2, 2, 3)


def swapped(a):
    cell = kiln.new_ref(a)
    old = ref.swap(cell, 0, 7.0)
    ref.addupdate(cell, 1, old)
    ref.set(cell, None, ref.get(cell) * 2)
    return kiln.freeze(cell)


def test_ref_functions_eager_and_compiled():
    cell = kiln.new_ref(knp.arange(4.0))
    assert float(ref.get(cell, 1)) == 1.0 and float(ref.swap(cell, 2, 9.0)) == 2.0
    ref.set(cell, 0, 5.0)
    ref.addupdate(cell, None, knp.ones(4))
    np.testing.assert_array_equal(cell[...], [6, 2, 10, 4])
    np.testing.assert_array_equal(kiln.jit(swapped)(knp.arange(3.0)), [14, 2, 4])
    np.testing.assert_array_equal(swapped(knp.arange(3.0)), [14, 2, 4])


def test_stages_types_and_version():
    f = kiln.jit(lambda x: x * 2)
    assert isinstance(f, stages.Wrapped) and not isinstance(lambda x: x, stages.Wrapped)
    assert isinstance(f.trace(1.0), stages.Traced)
    assert isinstance(f.lower(1.0), stages.Lowered)
    assert isinstance(f.lower(1.0).compile(), stages.Compiled)
    info = stages.ArgInfo(kiln.ShapeDtypeStruct((2,), np.float32), False)
    assert info.shape == (2,) and info.dtype == np.float32 and not info.donated
    assert version.__version__ == version._version == kiln.__version__
