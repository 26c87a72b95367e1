"""Tests for `kiln.example_libraries.optimizers`.

Each optimizer runs 4 steps on a small pytree with gradients computed in NumPy; the final
parameters are compared with values recorded from JAX 0.10.2's own
`jax.example_libraries.optimizers` on the same inputs (float32, rtol 2e-6), and step by step with
hand-written float64 NumPy updates (rtol 1e-5, atol 1e-5: float32 rounding). Schedules,
utilities, serialization and the structure errors are checked against JAX's behaviour.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln.numpy as jnp
from kiln import tree_util
from kiln.example_libraries import optimizers as O


def params0():
    return {"w": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
            "b": np.array([0.5, -0.25, 0.0], np.float32),
            "s": (np.float32(2.0), [np.array([1.0, -3.0], np.float32)])}


def grads(i):
    return tree_util.tree_map(
        lambda p: np.asarray(np.sin(np.asarray(p, np.float64) * (i + 1) + 0.3), np.float32),
        params0())


OPTIMIZERS = {
    "sgd": lambda: O.sgd(0.1),
    "momentum": lambda: O.momentum(0.1, 0.9),
    "nesterov": lambda: O.nesterov(0.1, 0.9),
    "adagrad": lambda: O.adagrad(0.1),
    "rmsprop": lambda: O.rmsprop(0.1),
    "rmsprop_momentum": lambda: O.rmsprop_momentum(0.1),
    "adam": lambda: O.adam(0.1),
    "adamax": lambda: O.adamax(0.1),
    "sm3": lambda: O.sm3(0.1),
    "sgd_exp": lambda: O.sgd(O.exponential_decay(0.1, 2, 0.5)),
    "sgd_inv": lambda: O.sgd(O.inverse_time_decay(0.1, 2, 0.5)),
    "sgd_inv_stair": lambda: O.sgd(O.inverse_time_decay(0.1, 2, 0.5, staircase=True)),
    "sgd_poly": lambda: O.sgd(O.polynomial_decay(0.1, 2, 0.01, power=2.0)),
    "adam_piecewise": lambda: O.adam(O.piecewise_constant([0, 1], [0.1, 0.05, 0.01])),
}

# Leaves (order b, s[0], s[1][0], w.ravel()) after 4 steps, from JAX 0.10.2.
JAX_RESULTS = {
    "sgd": [[0.15995327, -0.12721267, -0.11820809], [1.9251474], [0.9364648, -3.022232],
           [-0.8466574, -0.30604485, -0.12250542, -0.07981776, 0.29285893, 0.9364648]],
    "momentum": [[-0.26742464, -0.06628323, -0.26741624], [1.898421], [0.5881345, -2.9524941],
                [-0.48149377, -0.010244042, -0.103186466, -0.3774103, -0.14645492, 0.5881345]],
    "nesterov": [[-0.5307288, 0.038132414, -0.35888273], [1.8337266], [0.56578594, -2.9794765],
                [-0.3800018, 0.22473547, -0.035373233, -0.59948695, -0.37895054, 0.56578594]],
    "adagrad": [[0.427564, -0.23290578, -0.06952225], [1.9802884], [0.95744145, -2.980134],
               [-0.9403095, -0.52017623, -0.18982628, 0.12438218, 0.5309226, 0.95744145]],
    "rmsprop": [[-0.4301694, 0.2891445, -0.9082613], [1.7222209], [0.7334411, -2.9194105],
               [-0.4353299, 0.44592744, 0.26888406, -0.8104358, -0.24963671, 0.7334411]],
    "rmsprop_momentum": [[-1.8299689, 0.3038327, -2.2447264], [1.374586], [-0.3399331, -2.38017],
                        [0.89895386, 1.9495163, 0.15024218, -2.2292814, -1.6225867, -0.3399331]],
    "adam": [[0.10110627, -0.1341061, -0.39999604], [1.8983388], [0.7247104, -2.8978205],
            [-0.6594108, -0.21429637, -0.15990609, -0.19960187, 0.20595945, 0.7247104]],
    "adamax": [[0.13288315, -0.20828313, -0.3999999], [1.899429], [0.75464594, -2.8987281],
              [-0.7148644, -0.2814762, -0.21101429, -0.15089925, 0.24600998, 0.75464594]],
    "sm3": [[0.427564, -0.23290578, -0.06952225], [1.9802884], [0.95744145, -2.980134],
           [-0.9399256, -0.5275562, -0.22199813, 0.13063484, 0.5309226, 0.95744145]],
    "sgd_exp": [[0.2850735, -0.19642507, -0.075672686], [1.957475], [0.89119357, -2.9899929],
               [-0.8628205, -0.43466458, -0.1711978, 0.035829082, 0.39286318, 0.89119357]],
    "sgd_inv": [[0.24364483, -0.17329422, -0.08978185], [1.9460492], [0.90685654, -3.0006607],
               [-0.8580294, -0.39195588, -0.15489958, -0.0026279017, 0.35989878, 0.90685654]],
    "sgd_inv_stair": [[0.21727167, -0.16318543, -0.09850674], [1.9557801], [0.9006678, -3.0189314],
                     [-0.84324217, -0.3680683, -0.14833695, -0.023999948, 0.33587858, 0.9006678]],
    "sgd_poly": [[0.37975323, -0.23774934, -0.045066833], [1.946015], [0.89014786, -2.9761496],
                [-0.9043737, -0.52638286, -0.19898932, 0.114375025, 0.4763429, 0.89014786]],
    "adam_piecewise": [[0.33023167, -0.30607915, -0.16999862], [1.9060099], [0.84305674,
                      -2.9068742], [-0.8363815, -0.4341229, -0.2838848, 0.030161558, 0.43063414,
                      0.84305674]],
}


def run(name, steps=4):
    init, update, get_params = OPTIMIZERS[name]()
    state = init(params0())
    for i in range(steps):
        state = update(i, grads(i), state)
    return get_params(state)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_matches_recorded_jax(name):
    params = run(name)
    leaves, treedef = tree_util.tree_flatten(params)
    assert treedef == tree_util.tree_structure(params0())
    for got, want in zip(leaves, JAX_RESULTS[name]):
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.ravel(np.asarray(got)), want, rtol=2e-6, atol=1e-7)


# ---------------------------------------------------------------- hand-written NumPy updates

def _np_sgd(x, g, s, i):
    return x - 0.1 * g, s


def _np_momentum(x, g, v, i):
    v = 0.9 * v + g
    return x - 0.1 * v, v


def _np_nesterov(x, g, v, i):
    v = 0.9 * v + g
    return x - 0.1 * (0.9 * v + g), v


def _np_rmsprop(x, g, avg, i):
    avg = 0.9 * avg + 0.1 * g * g
    return x - 0.1 * g / np.sqrt(avg + 1e-8), avg


def _np_adam(x, g, mv, i):
    m, v = mv
    m = 0.1 * g + 0.9 * m
    v = 0.001 * g * g + 0.999 * v
    mhat, vhat = m / (1 - 0.9 ** (i + 1)), v / (1 - 0.999 ** (i + 1))
    return x - 0.1 * mhat / (np.sqrt(vhat) + 1e-8), (m, v)


def _np_adamax(x, g, mu, i):
    m, u = mu
    m = 0.1 * g + 0.9 * m
    u = np.maximum(0.999 * u, np.abs(g))
    return x - (0.1 / (1 - 0.9 ** (i + 1))) * m / (u + 1e-8), (m, u)


def _np_adagrad(x, g, gm, i):
    g_sq, m = gm
    g_sq = g_sq + g * g
    m = 0.1 * (g * np.where(g_sq > 0, 1 / np.sqrt(np.where(g_sq > 0, g_sq, 1)), 0)) + 0.9 * m
    return x - 0.1 * m, (g_sq, m)


NUMPY_UPDATES = {"sgd": (_np_sgd, lambda x: 0), "momentum": (_np_momentum, np.zeros_like),
                 "nesterov": (_np_nesterov, np.zeros_like),
                 "rmsprop": (_np_rmsprop, np.zeros_like),
                 "adam": (_np_adam, lambda x: (np.zeros_like(x), np.zeros_like(x))),
                 "adamax": (_np_adamax, lambda x: (np.zeros_like(x), np.zeros_like(x))),
                 "adagrad": (_np_adagrad, lambda x: (np.zeros_like(x), np.zeros_like(x)))}


@pytest.mark.parametrize("name", sorted(NUMPY_UPDATES))
def test_matches_numpy_step_by_step(name):
    step, state0 = NUMPY_UPDATES[name]
    init, update, get_params = OPTIMIZERS[name]()
    state = init(params0())
    xs = [np.asarray(p, np.float64) for p in tree_util.tree_leaves(params0())]
    aux = [state0(x) for x in xs]
    for i in range(4):
        state = update(i, grads(i), state)
        gs = [np.asarray(g, np.float64) for g in tree_util.tree_leaves(grads(i))]
        xs, aux = map(list, zip(*(step(x, g, a, i) for x, g, a in zip(xs, gs, aux))))
        for got, want in zip(tree_util.tree_leaves(get_params(state)), xs):
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=1e-5)


def test_dtypes_follow_jax():
    init, update, get_params = O.adam(0.1)
    out = get_params(update(0, 0.5, init(1.0)))
    assert out.dtype == np.float32 and not out.weak_type
    np.testing.assert_allclose(float(out), 0.9000007, rtol=1e-6)
    init, update, get_params = O.momentum(0.1, 0.9)
    out = get_params(update(0, jnp.ones(2, jnp.float16), init(jnp.ones(2, jnp.float16))))
    assert out.dtype == np.float16 and not out.weak_type
    np.testing.assert_allclose(np.asarray(out, np.float64), [0.9, 0.9], rtol=1e-3)


# ----------------------------------------------------------------------------- structure

def test_optimizer_state_is_a_pytree_and_roundtrips():
    init, update, get_params = O.adam(0.1)
    state = init(params0())
    assert isinstance(state, O.OptimizerState)
    leaves, treedef = tree_util.tree_flatten(state)
    assert len(leaves) == 3 * 4  # (x, m, v) for each of the 4 parameter leaves
    assert tree_util.tree_unflatten(treedef, leaves) == state
    marked = O.unpack_optimizer_state(state)
    assert set(marked) == {"b", "s", "w"} and isinstance(marked["b"], O.JoinPoint)
    repacked = O.pack_optimizer_state(marked)
    assert repacked.tree_def == state.tree_def
    assert repacked.subtree_defs == state.subtree_defs
    with pytest.raises(TypeError, match="JoinPoint"):
        O.pack_optimizer_state({"a": 1.0})


def test_structure_errors():
    init, update, _ = O.sgd(0.1)
    state = init({"a": jnp.ones(2), "b": jnp.zeros(3)})
    with pytest.raises(TypeError, match="optimizer update function was passed a gradient tree "
                                        "that did not match the parameter tree structure"):
        update(0, {"a": jnp.ones(2)}, state)

    def bad_maker():
        return (lambda x: (x, x), lambda i, g, s: (s[0],), lambda s: s[0])
    init, update, _ = O.optimizer(bad_maker)()
    with pytest.raises(TypeError, match="optimizer update function produced an output "
                                        "structure that did not match its input structure"):
        update(0, [jnp.ones(2)], init([jnp.ones(2)]))


def test_decorator_keeps_names():
    assert O.sgd.__name__ == "sgd"
    opt = O.sgd(0.1)
    assert type(opt).__name__ == "Optimizer" and opt.init_fn.__name__ == "init"
    init_fn, update_fn, params_fn = opt
    assert (init_fn, update_fn, params_fn) == (opt.init_fn, opt.update_fn, opt.params_fn)


# ------------------------------------------------------------------------------ schedules

@settings(max_examples=30, deadline=None)
@given(i=st.integers(0, 50))
def test_schedules_match_formulas(i):
    np.testing.assert_allclose(float(O.exponential_decay(0.1, 2, 0.5)(i)),
                               0.1 * 0.5 ** (i / 2), rtol=1e-6)
    np.testing.assert_allclose(float(O.inverse_time_decay(0.1, 2, 0.5)(i)),
                               0.1 / (1 + 0.5 * i / 2), rtol=1e-6)
    np.testing.assert_allclose(float(O.inverse_time_decay(0.1, 2, 0.5, staircase=True)(i)),
                               0.1 / (1 + 0.5 * (i // 2)), rtol=1e-6)
    np.testing.assert_allclose(float(O.polynomial_decay(0.1, 10, 0.01, 2.0)(i)),
                               (1 - min(i, 10) / 10) ** 2 * 0.09 + 0.01, rtol=1e-5, atol=1e-8)
    sched = O.piecewise_constant([0, 1, 10], [0.1, 0.05, 0.02, 0.01])
    want = [0.1, 0.05, 0.02, 0.01][int(np.sum(i > np.array([0, 1, 10])))]
    np.testing.assert_allclose(float(sched(i)), want, rtol=1e-6)
    assert O.constant(0.3)(i) == 0.3
    assert O.make_schedule(0.3)(i) == 0.3


def test_schedule_errors_and_recorded_values():
    s = O.piecewise_constant([0, 1], [0.1, 0.05, 0.01])
    np.testing.assert_allclose([float(s(i)) for i in range(4)], [0.1, 0.05, 0.01, 0.01],
                               rtol=1e-6)
    np.testing.assert_allclose(float(s(jnp.array(1))), 0.05, rtol=1e-6)
    np.testing.assert_allclose(float(O.inverse_time_decay(0.1, 2, 0.5, True)(3)), 0.06666667,
                               rtol=1e-6)
    assert O.make_schedule(abs) is abs
    with pytest.raises(TypeError, match="list"):
        O.make_schedule([0.1, 0.2])
    with pytest.raises(ValueError, match="boundaries length must be one shorter than values"):
        O.piecewise_constant([1, 2], [0.1])
    with pytest.raises(ValueError, match="boundaries and values must be sequences"):
        O.piecewise_constant(1, [0.1])


# ------------------------------------------------------------------------------ utilities

def test_l2_norm_and_clip_grads():
    tree = {"a": jnp.array([3., 4.]), "b": [jnp.array(12.)]}
    np.testing.assert_allclose(float(O.l2_norm(tree)), 13.0, rtol=1e-6)
    clipped = O.clip_grads({"a": jnp.array([3., 4.])}, 1.0)
    np.testing.assert_allclose(np.asarray(clipped["a"]), [0.6, 0.8], rtol=1e-6)
    unclipped = O.clip_grads({"a": jnp.array([3., 4.])}, 10.0)
    np.testing.assert_allclose(np.asarray(unclipped["a"]), [3., 4.], rtol=1e-6)


@settings(max_examples=20, deadline=None)
@given(max_norm=st.floats(0.01, 100), seed=st.integers(0, 1000))
def test_clip_grads_bounds_norm(max_norm, seed):
    rng = np.random.default_rng(seed)
    tree = {"a": rng.normal(size=(3, 2)).astype(np.float32),
            "b": (rng.normal(size=4).astype(np.float32),)}
    norm = np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2)
                       for x in tree_util.tree_leaves(tree)))
    np.testing.assert_allclose(float(O.l2_norm(tree)), norm, rtol=1e-5)
    clipped = O.clip_grads(tree, max_norm)
    np.testing.assert_allclose(float(O.l2_norm(clipped)), min(norm, max_norm), rtol=1e-5)


def test_jax_module_names_safe_map_zip_unzip2_and_the_type_aliases():
    from kiln.example_libraries import optimizers as o
    assert o.safe_map(lambda a, b: a + b, [1, 2], [3, 4]) == [4, 6]
    assert o.zip([1, 2], "ab") == [(1, "a"), (2, "b")] and o.map is o.safe_map
    assert o.unzip2([(1, 2), (3, 4)]) == ((1, 3), (2, 4))
    with pytest.raises(ValueError, match="safe_zip\\(\\) argument lengths differ: \\(1, 2\\)"):
        o.safe_zip([1], [1, 2])
    assert o.Step is int and o.InitFn.__args__[-1] is o.OptimizerState
