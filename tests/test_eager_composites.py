"""Eager calls of the composite functions of `kiln.numpy`, `kiln.numpy.linalg`, `kiln.nn`,
`kiln.scipy.linalg` and `kiln.scipy.special` that JAX jits compile once their signature
repeats (runtime/eager_tiers.py, each namespace's `tier_names` table): the compiled calls give
the eager calls' bits, dtypes and weak types, the static parameters are JAX's, errors are the
eager ones, and the calls that must stay eager do."""
import inspect

import numpy as np
import pytest

import kiln
import kiln.nn as knn
import kiln.numpy as jnp
import kiln.scipy.linalg as ksl
import kiln.scipy.special as kss
from kiln import eager_tiers

NAMESPACES = {"jnp": jnp, "jnp.linalg": jnp.linalg, "nn": knn, "scipy.linalg": ksl,
              "scipy.special": kss}
RNG = np.random.default_rng(0)
X = RNG.standard_normal((9, 33)).astype(np.float32)
XN = np.where(RNG.random((9, 33)) < 0.2, np.nan, X).astype(np.float32)
V = RNG.standard_normal(40).astype(np.float32)
BINS = np.sort(RNG.standard_normal(12)).astype(np.float32)
I = RNG.integers(-60, 60, 30).astype(np.int32)
M = RNG.standard_normal((12, 12)).astype(np.float32)
SYM = M + M.T
W = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)

# One call of each tiered function (name in its namespace -> call); the arguments mix arrays,
# Python numbers (passed to the compiled code) and static values.
CALLS = {
    ("jnp", "diff"): lambda: jnp.diff(X, n=2, axis=0),
    ("jnp", "ediff1d"): lambda: jnp.ediff1d(V, to_begin=V[:2]),
    ("jnp", "gradient"): lambda: jnp.gradient(X, 0.5, 2.0),
    ("jnp", "isclose"): lambda: jnp.isclose(X, X * 1.0000001, rtol=1e-7),
    ("jnp", "allclose"): lambda: jnp.allclose(XN, XN, equal_nan=True),
    ("jnp", "round"): lambda: jnp.round(X * 100, 1),
    ("jnp", "around"): lambda: jnp.around(X, 2),
    ("jnp", "nan_to_num"): lambda: jnp.nan_to_num(W, nan=2.5, posinf=7.0),
    ("jnp", "unwrap"): lambda: jnp.unwrap(X * 4, axis=1),
    ("jnp", "cross"): lambda: jnp.cross(X[:, :3], X[:, 3:6]),
    ("jnp", "kron"): lambda: jnp.kron(M[:3, :4], M[:2, :5]),
    ("jnp", "vander"): lambda: jnp.vander(V[:7], 5, increasing=True),
    ("jnp", "gcd"): lambda: jnp.gcd(I, I[::-1]),
    ("jnp", "lcm"): lambda: jnp.lcm(I, 12),
    ("jnp", "packbits"): lambda: jnp.packbits(I > 3, bitorder="little"),
    ("jnp", "unpackbits"): lambda: jnp.unpackbits(I.astype(np.uint8), count=200),
    ("jnp", "fmin"): lambda: jnp.fmin(XN, 0.25),
    ("jnp", "fmax"): lambda: jnp.fmax(XN, X),
    ("jnp", "searchsorted"): lambda: jnp.searchsorted(BINS, V, side="right"),
    ("jnp", "digitize"): lambda: jnp.digitize(V, BINS),
    ("jnp", "isin"): lambda: jnp.isin(I, I[:7], invert=True),
    ("jnp", "lexsort"): lambda: jnp.lexsort((I, I % 3)),
    ("jnp", "partition"): lambda: jnp.partition(X, 4, axis=1),
    ("jnp", "argpartition"): lambda: jnp.argpartition(V, 11),
    ("jnp", "ptp"): lambda: jnp.ptp(X, axis=1, keepdims=True),
    ("jnp", "count_nonzero"): lambda: jnp.count_nonzero(X > 0.5, axis=0),
    ("jnp", "nanmin"): lambda: jnp.nanmin(XN, axis=1),
    ("jnp", "nanmax"): lambda: jnp.nanmax(XN),
    ("jnp", "nancumsum"): lambda: jnp.nancumsum(XN, axis=1),
    ("jnp", "nancumprod"): lambda: jnp.nancumprod(XN[:, :8], axis=0),
    ("jnp", "quantile"): lambda: jnp.quantile(X, V[:3] * 0 + np.float32([0.1, 0.5, 0.93])),
    ("jnp", "nanquantile"): lambda: jnp.nanquantile(XN, 0.3, axis=1, method="midpoint"),
    ("jnp", "percentile"): lambda: jnp.percentile(X, 37.5, axis=0),
    ("jnp", "nanpercentile"): lambda: jnp.nanpercentile(XN, 80, axis=0, keepdims=True),
    ("jnp", "median"): lambda: jnp.median(X, axis=1),
    ("jnp", "nanmedian"): lambda: jnp.nanmedian(XN, axis=0),
    ("jnp", "linspace"): lambda: jnp.linspace(-1.5, 3.25, 101, retstep=True),
    ("jnp", "polyval"): lambda: jnp.polyval(V[:6], X),
    ("jnp", "polyint"): lambda: jnp.polyint(V[:6], m=2, k=3.0),
    ("jnp", "polyder"): lambda: jnp.polyder(V[:6], 2),
    ("jnp", "polyadd"): lambda: jnp.polyadd(V[:6], V[:3]),
    ("jnp", "polysub"): lambda: jnp.polysub(V[:3], V[:6]),
    ("jnp.linalg", "eigh"): lambda: jnp.linalg.eigh(SYM),
    ("jnp.linalg", "eigvalsh"): lambda: jnp.linalg.eigvalsh(SYM, UPLO="U"),
    ("jnp.linalg", "eigvals"): lambda: jnp.linalg.eigvals(M),
    ("nn", "one_hot"): lambda: knn.one_hot(I % 5, 5, axis=0),
    ("nn", "squareplus"): lambda: knn.squareplus(X, 2.0),
    ("nn", "sparse_plus"): lambda: knn.sparse_plus(X),
    ("nn", "sparse_sigmoid"): lambda: knn.sparse_sigmoid(X),
    ("nn", "hard_sigmoid"): lambda: knn.hard_sigmoid(X * 4),
    ("nn", "hard_silu"): lambda: knn.hard_silu(X * 4),
    ("nn", "hard_tanh"): lambda: knn.hard_tanh(X * 2),
    ("scipy.linalg", "block_diag"): lambda: ksl.block_diag(M[:2, :3], V[:4], 1.5),
    ("scipy.special", "gammasgn"): lambda: kss.gammasgn(X * 5),
}

# JAX 0.10.2's static argnames of each tiered function (of its jitted core where the public
# function is a wrapper), where kiln's parameter list has them.
JAX_STATIC = {
    "diff": {"n", "axis"}, "gradient": {"axis", "edge_order"}, "isclose": {"equal_nan"},
    "allclose": {"equal_nan"}, "round": {"decimals"}, "around": {"decimals"},
    "unwrap": {"axis"}, "cross": {"axisa", "axisb", "axisc", "axis"},
    "vander": {"N", "increasing"}, "packbits": {"axis", "bitorder"},
    "unpackbits": {"axis", "count", "bitorder"}, "searchsorted": {"side", "method"},
    "digitize": {"right", "method"}, "isin": {"assume_unique", "invert", "method"},
    "lexsort": {"axis"}, "partition": {"kth", "axis"}, "argpartition": {"kth", "axis"},
    "ptp": {"axis", "keepdims"}, "count_nonzero": {"axis", "keepdims"},
    "nanmin": {"axis", "keepdims"}, "nanmax": {"axis", "keepdims"},
    "nancumsum": {"axis", "dtype"}, "nancumprod": {"axis", "dtype"},
    "median": {"axis", "overwrite_input", "keepdims"},
    "nanmedian": {"axis", "overwrite_input", "keepdims"},
    "linspace": {"num", "endpoint", "retstep", "dtype", "axis", "device"},
    "polyval": {"unroll"}, "polyint": {"m"}, "polyder": {"m"},
    "eigh": {"UPLO", "symmetrize_input"}, "eigvalsh": {"UPLO", "symmetrize_input"},
    "one_hot": {"num_classes", "dtype", "axis"},
} | {name: {"axis", "overwrite_input", "keepdims", "method"}
     for name in ("quantile", "nanquantile", "percentile", "nanpercentile")}


@pytest.fixture(autouse=True)
def compile_on_the_third_call(monkeypatch):
    """Two eager calls of a signature, then compiled (the default waits for 16)."""
    monkeypatch.setattr(eager_tiers, "EAGER_CALLS", 2)


def function(key):
    namespace, name = key
    return getattr(NAMESPACES[namespace], name)


def compiled_entries(fn):
    return [v for v in fn._kiln_tiers.values() if type(v) is not int]


def eager_only(monkeypatch, call):
    with monkeypatch.context() as patch:
        patch.setattr(eager_tiers, "ENABLED", False)
        return call()


def same(got, want):
    assert type(got) is type(want)
    got_leaves = kiln.tree_util.tree_leaves(got)
    want_leaves = kiln.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert type(g) is type(w)
        assert g.dtype == w.dtype and g.weak_type == w.weak_type, (g, w)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_every_tiered_function_is_checked_here():
    tiered = {(space, name) for space, module in NAMESPACES.items() for name in module.__all__
              if hasattr(getattr(module, name), "_kiln_tiers")}
    assert tiered == set(CALLS)


@pytest.mark.parametrize("key", sorted(CALLS), ids=lambda k: f"{k[0]}.{k[1]}")
def test_static_parameters_are_jax_s(key):
    fn = function(key)
    parameters = set(inspect.signature(fn).parameters)
    static = JAX_STATIC.get(key[1], set())
    assert static <= parameters
    assert fn._kiln_static == static   # the namespace module's table


@pytest.mark.parametrize("key", sorted(CALLS), ids=lambda k: f"{k[0]}.{k[1]}")
def test_compiled_calls_give_the_eager_bits(key, monkeypatch):
    fn, call = function(key), CALLS[key]
    fn._kiln_tiers.clear()
    want = eager_only(monkeypatch, call)
    outs = [call() for _ in range(eager_tiers.EAGER_CALLS)]
    assert not compiled_entries(fn)
    outs += [call() for _ in range(2)]
    assert len(compiled_entries(fn)) == 1
    for out in outs:
        same(out, want)


def test_python_numbers_are_passed_and_static_values_fixed(monkeypatch):
    jnp.percentile._kiln_tiers.clear()
    for q in [10.0, 25.0, 50.0, 75.0, 90.0, 12.5]:
        same(jnp.percentile(X, q, axis=1),
             eager_only(monkeypatch, lambda: jnp.percentile(X, q, axis=1)))
    assert len(compiled_entries(jnp.percentile)) == 1
    jnp.diff._kiln_tiers.clear()
    for n in [1, 2, 1, 2, 1, 2]:
        assert jnp.diff(V, n).shape == (40 - n,)
    assert len(compiled_entries(jnp.diff)) == 2
    jnp.linspace._kiln_tiers.clear()
    for stop in [1.0, 2.0, 3.0, 4.0, -7]:
        same(jnp.linspace(0.0, stop, 5),
             eager_only(monkeypatch, lambda: jnp.linspace(0.0, stop, 5)))
    assert len(compiled_entries(jnp.linspace)) == 1


def test_a_static_parameter_given_as_an_array_stays_eager():
    """`n` as a NumPy integer is passed to the compiled code, where the result's shape needs
    it: that signature's compile fails once and it runs eagerly from then on."""
    jnp.diff._kiln_tiers.clear()
    for _ in range(4):
        np.testing.assert_array_equal(jnp.diff(V, np.int32(2)), np.diff(V, 2))
    assert list(jnp.diff._kiln_tiers.values()) == [eager_tiers._EAGER]


def quantile_by_bogus_method(x):
    return jnp.quantile(x, 0.5, method="bogus")


def test_errors_are_the_eager_ones_every_time():
    jnp.quantile._kiln_tiers.clear()
    for _ in range(4):
        jnp.quantile(X, 0.5)
        with pytest.raises(ValueError, match="method can only be 'linear'"):
            jnp.quantile(X, 0.5, method="bogus")
        with pytest.raises(ValueError, match="q must be have rank <= 1"):
            jnp.quantile(X, np.float32([[0.5]]))
    assert len(compiled_entries(jnp.quantile)) == 1
    # the traceback shows the user's frames and the one of kiln's that raised, not the tiers'
    with pytest.raises(ValueError) as caught:
        quantile_by_bogus_method(X)
    files = [str(entry.path) for entry in caught.traceback]
    assert files[1:] == [__file__, kiln._traceback.__file__]
    jnp.diff._kiln_tiers.clear()
    for _ in range(4):
        with pytest.raises(ValueError, match="order must be non-negative"):
            jnp.diff(V, -1)


def median_inside(x):
    return jnp.median(x) * 2.0


def test_calls_inside_jit_and_traced_calls_stay_eager():
    jnp.median._kiln_tiers.clear()
    for _ in range(4):
        kiln.jit(median_inside)(X)
        kiln.vmap(jnp.median)(X)
        kiln.grad(lambda v: jnp.median(v))(V)
    with kiln.disable_jit():
        for _ in range(4):
            jnp.median(X)
    assert not jnp.median._kiln_tiers


def test_float_checks_compile_at_once_and_check_the_results_as_jax_does():
    """Under `debug_nans` a tiered call compiles at once and checks its results, as JAX
    checks its jitted functions: no error for the NaN a `where` discards inside `median`
    or the NaN `nanmax` skips; a NaN result still raises."""
    jax = pytest.importorskip("jax")
    clean, nan_row = np.float32([3, 1, 2]), XN[0]
    with kiln.debug_nans(True):
        got = [jnp.median(clean), jnp.nanmax(nan_row)]
        with pytest.raises(FloatingPointError):
            jnp.median(nan_row)
    with jax.debug_nans(True):
        want = [jax.numpy.median(clean), jax.numpy.nanmax(nan_row)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
