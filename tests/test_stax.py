"""kiln.example_libraries.stax against values recorded from jax.example_libraries.stax 0.10.2
(the same network built with either library, PRNGKey(1), input shape (4, 12, 12, 3)): output
shapes, parameter shapes and values (the same PRNG bits), outputs with Dropout's key; every
public name of JAX's stax; jit and grad through a network."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.example_libraries import stax as s

def net(s):
    return s.serial(s.Conv(8, (3, 3), padding="SAME"), s.BatchNorm(), s.Relu, s.MaxPool((2, 2), (2, 2)),
                    s.Conv(4, (3, 3), (2, 2)), s.AvgPool((2, 2), padding="SAME"), s.SumPool((1, 2)),
                    s.FanOut(2), s.parallel(s.Identity, s.Tanh), s.FanInSum, s.Flatten, s.Dense(10), s.Dropout(0.9), s.LogSoftmax)
def net2(s):
    return s.serial(s.ConvTranspose(3, (3, 3), (2, 2), "SAME"), s.FanOut(2), s.parallel(s.Gelu, s.Selu), s.FanInConcat(),
                    s.GeneralConv(("NCHW", "OIHW", "NCHW"), 5, (2, 2)), s.Elu, s.LeakyRelu, s.Softplus, s.Sigmoid, s.Exp, s.Softmax,
                    s.shape_dependent(lambda shp: s.Dense(shp[-1])))

# recorded with JAX 0.10.2 (jax.example_libraries.stax, the same builders)
NET = {
    'out': (4, 10),
    'shapes': [(3, 3, 3, 8), (1, 1, 1, 8), (8,), (8,), (3, 3, 8, 4), (1, 1, 1, 4), (8, 10), (10,)],
    'firsts': [-0.28044307231903076, -7.890421329648234e-07, 0.0, 1.0, -0.11204534024000168, -6.38749781955994e-07, -0.45496436953544617, 0.0019091555150225759],
    'sums': [0.5504793922154931, -2.127711397292842e-06, 0.0, 8.0, -1.074086093052756, 1.0956163407627173e-06, -0.5508037046529353, 0.02081484196241945],
    'y_sum': -296.342261698097,
    'y_first': [-4.586828231811523, -9.880964279174805, -0.05404284968972206, -12.827859878540039],
}
NET2 = {
    'out': (4, 5, 23, 5),
    'shapes': [(3, 3, 3, 3), (1, 1, 1, 3), (5, 24, 2, 2), (1, 5, 1, 1), (5, 5), (5,)],
    'firsts': [-0.37972167134284973, -7.890421329648234e-07, -0.10811269283294678, -6.38749781955994e-07, -0.6103987097740173, 0.0019091555150225759],
    'sums': [0.2256409377514501, -1.973827949086626e-06, -1.8950962581438944, 1.6563383553602762e-06, -0.49263444915413857, -0.02214464999269694],
    'y_sum': -49.479538241866976,
    'y_first': [-0.1187346801161766, -0.003525561187416315, -0.2208205610513687, 0.2133065015077591],
}

JAX_NAMES = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense",
             "Dropout", "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu",
             "GeneralConv", "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax",
             "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh",
             "elementwise", "elu", "gelu", "glorot", "glorot_normal", "lax", "leaky_relu",
             "log_softmax", "logsoftmax", "normal", "ones", "parallel", "randn", "random", "relu",
             "selu", "serial", "shape_dependent", "sigmoid", "softmax", "softplus", "standardize",
             "zeros"]


def test_every_public_name_of_jax_stax():
    assert not [n for n in JAX_NAMES if not hasattr(s, n)]


@pytest.mark.parametrize("build,golden", [(net, NET), (net2, NET2)])
def test_shapes_parameters_and_outputs_match_jax(build, golden):
    init, apply = build(s)
    out, params = init(kiln.random.PRNGKey(1), (4, 12, 12, 3))
    assert tuple(out) == golden["out"]
    leaves = kiln.tree_util.tree_leaves(params)
    assert [tuple(p.shape) for p in leaves] == golden["shapes"]
    np.testing.assert_array_equal([float(np.asarray(p).reshape(-1)[0]) for p in leaves],
                                  np.float32(golden["firsts"]))
    np.testing.assert_allclose([np.asarray(p, np.float64).sum() for p in leaves],
                               golden["sums"], rtol=1e-6, atol=1e-9)
    x = np.random.default_rng(0).standard_normal((4, 12, 12, 3)).astype(np.float32)
    for run in (apply, kiln.jit(lambda p, v, r: apply(p, v, rng=r))):
        y = run(params, x, rng=kiln.random.PRNGKey(3)) if run is apply else \
            run(params, x, kiln.random.PRNGKey(3))
        np.testing.assert_allclose(np.asarray(y).reshape(-1)[:4], golden["y_first"], rtol=2e-4,
                                   atol=2e-5)
        np.testing.assert_allclose(np.asarray(y, np.float64).sum(), golden["y_sum"], rtol=1e-4)


def test_dropout_needs_a_key_and_passes_through_outside_train_mode():
    _, apply = s.Dropout(0.5)
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        apply((), np.ones(3, np.float32))
    _, test_apply = s.Dropout(0.5, mode="test")
    np.testing.assert_array_equal(np.asarray(test_apply((), np.ones(3, np.float32),
                                                        rng=kiln.random.PRNGKey(0))), 1.0)


def test_a_cnn_trains_under_jit_grad():
    init, apply = s.serial(s.Conv(4, (3, 3), padding="SAME"), s.Relu, s.MaxPool((2, 2), (2, 2)),
                           s.Flatten, s.Dense(2), s.LogSoftmax)
    _, params = init(kiln.random.PRNGKey(0), (8, 6, 6, 1))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6, 6, 1)).astype(np.float32)
    labels = np.eye(2, dtype=np.float32)[(x[:, :3].sum((1, 2, 3)) > 0).astype(int)]

    def loss(p):
        return -knp.mean(knp.sum(apply(p, x) * labels, axis=1))
    step = kiln.jit(lambda p: kiln.tree_util.tree_map(lambda w, g: w - 0.5 * g, p,
                                                      kiln.grad(loss)(p)))
    first = float(loss(params))
    for _ in range(30):
        params = step(params)
    assert float(loss(params)) < 0.5 * first
