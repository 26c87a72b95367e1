"""Eager calls of the other composite functions of `kiln.numpy`, `kiln.numpy.linalg`,
`kiln.nn`, `kiln.scipy.linalg` and `kiln.scipy.special` run as one unit from the second call
of a signature (runtime/eager_tiers.py, `composite`): the SSA on the `exact` backend gives the
eager calls' bits, dtypes and weak types; every Python value is fixed (a new value is a new
signature); errors, the float checks and the calls that must stay eager are as before."""
import numpy as np
import pytest

import kiln
import kiln.nn as knn
import kiln.numpy as jnp
import kiln.scipy.linalg as ksl
import kiln.scipy.special as kss
from kiln import eager_tiers
from test_eager_composites import eager_only, same as same_values

RNG = np.random.default_rng(3)
M8 = RNG.standard_normal((8, 8)).astype(np.float32)
SPD = (M8 @ M8.T + 8 * np.eye(8)).astype(np.float32)
B8 = RNG.standard_normal((8, 3)).astype(np.float32)
X = RNG.standard_normal((16, 64)).astype(np.float32)
V = RNG.standard_normal(100).astype(np.float32) * 3
XP = np.sort(RNG.standard_normal(20)).astype(np.float32)
M64 = RNG.standard_normal((64, 64)).astype(np.float64)

# Composites of several dozen primitives each, among them the ones whose compiled (LLVM) code
# rounds otherwise: exp, log, erf, sums along an axis, products and factorisations.
CALLS = {
    "linalg.inv": lambda: jnp.linalg.inv(M8),
    "linalg.solve": lambda: jnp.linalg.solve(M8, B8),
    "linalg.det": lambda: jnp.linalg.det(M8),
    "linalg.slogdet": lambda: jnp.linalg.slogdet(M8),
    "linalg.cholesky": lambda: jnp.linalg.cholesky(SPD),
    "linalg.norm": lambda: jnp.linalg.norm(X, axis=1),
    "linalg.pinv": lambda: jnp.linalg.pinv(M8[:, :5]),
    "interp": lambda: jnp.interp(V, XP, XP * 2, left=-1.0),
    "var": lambda: jnp.var(X, axis=0),
    "std": lambda: jnp.std(M64, ddof=1),
    "mean": lambda: jnp.mean(X, axis=1, keepdims=True),
    "cov": lambda: jnp.cov(X[:4]),
    "trapezoid": lambda: jnp.trapezoid(X, dx=0.5),
    "logspace": lambda: jnp.logspace(0.0, V[:3], 7),
    "nn.softmax": lambda: knn.softmax(X),
    "nn.log_softmax": lambda: knn.log_softmax(X, axis=0),
    "nn.logsumexp": lambda: knn.logsumexp(X, axis=1),
    "nn.gelu": lambda: knn.gelu(X),
    "nn.standardize": lambda: knn.standardize(X),
    "scipy.linalg.expm": lambda: ksl.expm(M8 / 4),
    "scipy.linalg.lu": lambda: ksl.lu(M8),
    "scipy.special.logsumexp": lambda: kss.logsumexp(X, axis=0),
    "scipy.special.xlogy": lambda: kss.xlogy(np.abs(X), np.abs(X)),
}


def function(name):
    module = {"linalg": jnp.linalg, "nn": knn, "scipy.linalg": ksl,
              "scipy.special": kss}.get(name.rpartition(".")[0], jnp)
    return getattr(module, name.rpartition(".")[2])


def units(fn):
    return [v for v in fn._kiln_units.values() if isinstance(v, eager_tiers._Unit)]


def same(got, want):
    """`same_values`, and the same bytes (-0.0 and NaN payloads too)."""
    same_values(got, want)
    for g, w in zip(kiln.tree_util.tree_leaves(got), kiln.tree_util.tree_leaves(want)):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_units_give_the_eager_bits(name, monkeypatch):
    fn, call = function(name), CALLS[name]
    fn._kiln_units.clear()
    fn._kiln_unit_state.update(on=True, small=0)   # (other tests may have made small units)
    want = eager_only(monkeypatch, call)
    first = call()
    assert not units(fn)
    outs = [first] + [call() for _ in range(3)]
    assert len(units(fn)) == 1, "the second call of the signature runs as one unit"
    assert units(fn)[0].size >= eager_tiers.MIN_UNIT
    for out in outs:
        same(out, want)


def test_every_python_value_is_part_of_the_signature(monkeypatch):
    """A Python number is fixed in the unit (it could choose another path eagerly), so a new
    value is a new signature; -0.0 is not 0.0."""
    jnp.interp._kiln_units.clear()
    for left in [0.0, 0.0, -0.0, -0.0, 0.0]:
        got = jnp.interp(V, XP, XP, left=left)
        same(got, eager_only(monkeypatch, lambda: jnp.interp(V, XP, XP, left=left)))
        assert np.signbit(np.asarray(got)[V < XP[0]]).all() == (str(left) == "-0.0")
    assert len(units(jnp.interp)) == 2


def test_thin_functions_stay_eager():
    """A unit of fewer than MIN_UNIT equations leaves its signature eager (it would only add
    its dispatch); after SMALL_UNITS such units the function runs eagerly from then on (until
    then, one small case does not stop the function's other signatures)."""
    jnp.transpose._kiln_units.clear()
    jnp.transpose._kiln_unit_state.update(on=True, small=0)
    x = jnp.asarray(X)
    for _ in range(3):
        jnp.transpose(x)
    assert list(jnp.transpose._kiln_units.values()) == [eager_tiers._EAGER]
    assert jnp.transpose._kiln_unit_state == {"on": True, "small": 1}
    for rows in (2, 3):
        for _ in range(2):
            jnp.transpose(x[:rows])
    assert jnp.transpose._kiln_unit_state["on"] is False and not jnp.transpose._kiln_units


def test_results_that_are_not_arrays_and_host_io_stay_eager(tmp_path):
    for _ in range(3):
        assert jnp.ndim(X) == 2 and type(jnp.ndim(X)) is int
        assert isinstance(jnp.array_str(jnp.asarray(V[:3])), str)
    assert list(jnp.ndim._kiln_units.values()) == [eager_tiers._EAGER]
    assert not hasattr(jnp.save, "_kiln_units") and not hasattr(jnp.load, "_kiln_units")
    assert not hasattr(jnp.array_str, "_kiln_units")


def inverse_of(a):
    return jnp.linalg.inv(a)


def test_errors_are_the_eager_ones_and_name_the_users_line():
    jnp.linalg.inv._kiln_units.clear()
    for _ in range(3):
        jnp.linalg.inv(M8)
        with pytest.raises(ValueError, match="requires square matrices") as caught:
            inverse_of(M8[:, :5])
    assert len(units(jnp.linalg.inv)) == 1
    assert len(jnp.linalg.inv._kiln_units) == 1   # a call that raises is never counted
    files = [str(entry.path) for entry in caught.traceback]
    assert files[1] == __file__ and caught.traceback[1].name == "inverse_of"


def test_a_unit_that_raises_reruns_eagerly(monkeypatch):
    jnp.var._kiln_units.clear()
    jnp.var(X)
    want = jnp.var(X)
    (unit,) = units(jnp.var)

    def broken(*values):
        raise RuntimeError("a unit's failure is never the user's error")
    monkeypatch.setattr(unit, "executable", broken)
    same(jnp.var(X), want)


def test_traced_calls_disable_jit_and_float_checks_stay_eager(monkeypatch):
    jnp.linalg.det._kiln_units.clear()
    for _ in range(3):
        kiln.jit(jnp.linalg.det)(M8)
        kiln.grad(lambda a: jnp.linalg.det(a))(M8)
        kiln.vmap(jnp.linalg.det)(np.stack([M8, M8]))
    with kiln.disable_jit():
        for _ in range(3):
            jnp.linalg.det(M8)
    assert not jnp.linalg.det._kiln_units
    # under debug_nans each eager operation is checked, as before: the error names the
    # operation that made the NaN inside logsumexp, where a unit would only see its result
    knn.logsumexp._kiln_units.clear()
    with kiln.debug_nans(True):
        with pytest.raises(FloatingPointError) as eager:
            eager_only(monkeypatch, lambda: knn.logsumexp(np.float32([1.0, 2.0]),
                                                          b=np.float32([-1.0, -3.0])))
        for _ in range(3):
            with pytest.raises(FloatingPointError) as caught:
                knn.logsumexp(np.float32([1.0, 2.0]), b=np.float32([-1.0, -3.0]))
            assert str(caught.value) == str(eager.value)
    assert not knn.logsumexp._kiln_units


def test_units_follow_enable_x64():
    jnp.var._kiln_units.clear()
    with kiln.enable_x64(True):
        for _ in range(2):
            wide = jnp.var(np.arange(5))
    narrow = [jnp.var(np.arange(5)) for _ in range(2)]
    assert wide.dtype == np.float64 and narrow[1].dtype == np.float32
    assert len(units(jnp.var)) == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.float16])
def test_lu_of_one_matrix_is_the_batched_elimination(dtype):
    """lu's NumPy definition takes a shorter path for one matrix (what eager `inv`, `solve`
    and `det` call): the same operations on each element, so the batch's bits."""
    from kiln.compiler.primitives import PRIMITIVES
    lu = PRIMITIVES["lu"].impl
    rng = np.random.default_rng(5)
    for m, n in [(1, 1), (8, 8), (5, 9), (9, 5)]:
        for trial in range(6):
            a = rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n))
                                               if dtype == np.complex64 else 0)
            a = (np.round(a) if trial % 2 else a).astype(dtype)   # (ties between pivots)
            if trial == 3:
                a[:, 0] = 0
            if trial == 5:
                a[-1, :] = np.nan
            for one, batched in zip(lu(a), lu(np.stack([a, a]))):
                assert one.tobytes() == batched[0].tobytes()


def test_gather_along_one_axis_takes_the_general_path_s_values():
    """gather's NumPy definition takes whole slices along one axis with `np.take`: the
    values, clamping and fill of the general path (a window index per axis)."""
    from kiln.compiler.primitives import indexing
    x = RNG.standard_normal((5, 6, 7)).astype(np.float32)
    for axis in range(3):
        indices = np.array([[0], [4], [-3], [9], [2]], np.int32)
        window = list(x.shape)
        window[axis] = 1
        taken = indexing._taken_windows(x, indices, (axis,), tuple(window))
        starts, fits = indexing._window_starts(x.shape, indices, (axis,), tuple(window))
        general = x[indexing._window_index(starts, tuple(window))]
        assert taken[0].tobytes() == general.tobytes()
        np.testing.assert_array_equal(taken[1], fits)


def test_a_changed_option_makes_the_units_again():
    """The library reads options while it is specialised (rank promotion here): a change
    drops every unit, so the next calls see it as the eager ones do."""
    knn.logsumexp._kiln_units.clear()
    x, b = np.float32([[1.0, 2.0]]), np.float32([1.0, 1.0])
    for _ in range(3):
        knn.logsumexp(x, b=b)
    assert units(knn.logsumexp)
    with kiln.numpy_rank_promotion("raise"):
        assert not units(knn.logsumexp)
        for _ in range(3):
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
                knn.logsumexp(x, b=b)


def test_arrays_committed_to_a_device_stay_eager():
    """The eager operations place the results of committed arrays where they are; a unit
    would not, so such calls run op by op."""
    device = kiln.devices()[-1]
    a = kiln.device_put(M8, device)
    jnp.linalg.det._kiln_units.clear()
    outs = [jnp.linalg.det(a) for _ in range(3)]
    assert not jnp.linalg.det._kiln_units
    assert all(out.committed and out.devices() == {device} for out in outs)
