"""kiln.experimental's compute_on, shard_alike, xla_metadata, custom_partitioning, layout,
random (the stateful generator), rnn (LSTM) and key_reuse against JAX 0.10.2's: values,
errors, and jit, grad and vmap where JAX supports them."""
import numpy as np
import pytest

import kiln
from kiln import eager_tiers
import kiln.numpy as jnp
from kiln.experimental import (compute_on, custom_partitioning as cp, key_reuse, layout,
                               random as krandom, rnn, shard_alike, xla_metadata)
from kiln.sharding import SingleDeviceSharding

jax = pytest.importorskip("jax")
import jax.experimental.compute_on  # noqa: E402
import jax.experimental.custom_partitioning  # noqa: E402
import jax.experimental.layout  # noqa: E402
import jax.experimental.random  # noqa: E402
import jax.experimental.rnn  # noqa: E402
import jax.experimental.shard_alike  # noqa: E402

X = np.arange(4.0, dtype=np.float32)


def scaled(x):
    with compute_on.compute_on("device_host"):
        y = x * 2
    with xla_metadata.set_xla_metadata(a="b", n=1):
        y = jnp.sin(y)
    return xla_metadata.set_xla_metadata(y + 1, tag="out")


def test_compute_on_and_xla_metadata_keep_the_values():
    want = np.sin(X * 2) + 1
    for got in (scaled(X), kiln.jit(scaled)(X), kiln.vmap(scaled)(X)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.grad(lambda x: scaled(x).sum())(X)),
                               2 * np.cos(2 * X), rtol=1e-6)
    decorated = xla_metadata.set_xla_metadata(k="v")(jnp.cos)
    np.testing.assert_allclose(np.asarray(kiln.jit(decorated)(X)), np.cos(X), rtol=1e-6)
    on_host = compute_on.compute_on2(lambda x: x * 3, compute_type="device_host",
                                     out_memory_spaces=None)
    np.testing.assert_allclose(np.asarray(kiln.jit(on_host)(X)), X * 3)
    for bad, error, message in (("cpu", ValueError, "Invalid compute type cpu. Current supported"),
                                (3, TypeError, "compute_type argument must be a string")):
        for f in (compute_on.compute_on, jax.experimental.compute_on.compute_on):
            with pytest.raises(error, match=message):
                with f(bad):
                    pass


def test_shard_alike_checks_shapes_as_jax():
    a, b = shard_alike.shard_alike(X, X + 1)
    np.testing.assert_array_equal(np.asarray(b), X + 1)
    got = kiln.jit(lambda x, y: shard_alike.shard_alike(x, y))(X, X)
    np.testing.assert_array_equal(np.asarray(got[0]), X)
    message = r"The leaves shapes of `x` and `y` should match. Got `x` leaf shape: \(4,\)"
    for f in (shard_alike.shard_alike, jax.experimental.shard_alike.shard_alike):
        with pytest.raises(ValueError, match=message):
            f(X, np.ones(3, np.float32))


def test_custom_partitioning_runs_the_function():
    @cp.custom_partitioning
    def f(x):
        return jnp.sin(x) * 2

    with pytest.raises(AttributeError, match="called before def_partition"):
        f(X)
    f.def_partition(partition=lambda *args: None, infer_sharding_from_operands=lambda *a: None)
    with pytest.raises(NotImplementedError, match="Need to provide sharding_rule"):
        f(X)
    f.def_partition(partition=lambda *args: None, sharding_rule="i -> i")
    want = np.sin(X) * 2
    for got in (f(X), kiln.jit(f)(X), kiln.vmap(f)(X)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.grad(lambda x: f(x).sum())(X)), 2 * np.cos(X),
                               rtol=1e-6)
    jcp = jax.experimental.custom_partitioning
    rule = cp.SdyShardingRule((cp.ArrayMapping("i", "j"),),
                              (cp.ArrayMapping("i", cp.CompoundFactor("j", "k")),), k=2)
    jrule = jcp.SdyShardingRule((jcp.ArrayMapping("i", "j"),),
                                (jcp.ArrayMapping("i", jcp.CompoundFactor("j", "k")),), k=2)
    assert str(rule) == str(jrule) and cp.BATCHING == jcp.BATCHING
    for module in (cp, jcp):
        for call, message in (
                (lambda: module.CompoundFactor("a"), "at least two factors"),
                (lambda: module.ArrayMapping("a", module.BATCHING),
                 "only be used at the beginning"),
                (lambda: module.ArrayMapping("1a"), "have to start with a letter"),
                (lambda: module.SdyShardingRule((module.ArrayMapping("i"),), (), i=2),
                 "represents a whole dimension"),
                (lambda: module.SdyShardingRule(
                    (module.ArrayMapping(module.CompoundFactor("i", "j")),), ()),
                 "only used in compound factors")):
            with pytest.raises(ValueError, match=message):
                call()


def test_layout_formats_are_accepted_for_row_major():
    Format, Layout = layout.Format, layout.Layout
    JFormat, JLayout = jax.experimental.layout.Format, jax.experimental.layout.Layout
    sharding = SingleDeviceSharding(kiln.devices()[0])
    m = jnp.ones((2, 3))
    assert repr(m.format.layout) == repr(jax.numpy.ones((2, 3)).format.layout)
    assert m.format.sharding == m.sharding
    assert repr(Format()) == repr(JFormat())
    assert repr(Format(Layout.AUTO)) == repr(JFormat(JLayout.AUTO))
    assert repr(Layout((1, 0))) == repr(JLayout((1, 0))) and Layout((1, 0)) == Layout((1, 0))
    double = kiln.jit(lambda x: x * 2, in_shardings=m.format,
                      out_shardings=Format(Layout((0, 1)), sharding))
    out = double(m)
    np.testing.assert_array_equal(np.asarray(out), 2 * np.ones((2, 3)))
    assert out.format == m.format
    np.testing.assert_array_equal(
        np.asarray(kiln.jit(lambda x: layout.with_layout_constraint(x, Layout((0, 1))))(m)), m)
    assert kiln.device_put(m, Format(Layout.AUTO)).format == m.format
    with pytest.raises(NotImplementedError, match=r"kiln keeps arrays in row-major order, "
                                                  r"Layout\(major_to_minor=\(0, 1\)\)"):
        kiln.device_put(m, Format(Layout((1, 0)), sharding))
    with pytest.raises(NotImplementedError, match="with_layout_constraint: Layout"):
        kiln.jit(lambda x: layout.with_layout_constraint(x, Layout((1, 0))))(m)
    for F, L in ((Format, Layout), (JFormat, JLayout)):
        with pytest.raises(ValueError, match="Sharding has to be concrete"):
            F(L((0,)))


def test_stateful_rng_draws_jaxs_values():
    ours, theirs = krandom.stateful_rng(42), jax.experimental.random.stateful_rng(42)
    for method, args in (("uniform", ()), ("normal", (1.0, 2.0, (3,))),
                         ("integers", (0, 10, 4)), ("random", (2,))):
        got, want = getattr(ours, method)(*args), getattr(theirs, method)(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        assert np.asarray(got).dtype == np.asarray(want).dtype
    draw, jdraw = kiln.jit(ours.uniform), jax.jit(theirs.uniform)
    np.testing.assert_allclose([draw(), draw()], [jdraw(), jdraw()], rtol=1e-6)
    np.testing.assert_array_equal([np.asarray(r.integers(0, 10, 2)) for r in ours.spawn(2)],
                                  [np.asarray(r.integers(0, 10, 2)) for r in theirs.spawn(2)])
    got = kiln.vmap(lambda r, x: x + r.uniform())(ours.split(3), jnp.zeros(3))
    want = jax.vmap(lambda r, x: x + r.uniform())(theirs.split(3), jax.numpy.zeros(3))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    with pytest.raises(ValueError, match="cannot operate on split stateful generator"):
        ours.split(2).uniform()
    with pytest.raises(ValueError, match="Expected base_key to be a typed PRNG key"):
        krandom.StatefulPRNG(kiln.random.PRNGKey(0), kiln.new_ref(0))
    assert krandom.stateful_rng().uniform().shape == ()
    assert key_reuse.__all__ == [] and "KeyReuseError" not in dir(key_reuse)


@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
def test_lstm_matches_jax_lstm_ref(layers, bidirectional):
    jrnn = jax.experimental.rnn
    batch, steps, features, hidden = 3, 5, 4, 6
    directions = 2 if bidirectional else 1
    rng = np.random.default_rng(layers)
    x = rng.normal(size=(batch, steps, features)).astype(np.float32)
    h0, c0 = rng.normal(size=(2, layers * directions, batch, hidden)).astype(np.float32)
    lengths = np.array([5, 3, 1], np.int32)
    sizes = (features, hidden, layers, bidirectional)
    weights = np.asarray(jrnn.init_lstm_weight(jax.random.key(0), *sizes))
    np.testing.assert_array_equal(np.asarray(rnn.init_lstm_weight(kiln.random.key(0), *sizes)),
                                  weights)
    assert rnn.get_num_params_in_lstm(*sizes) == jrnn.get_num_params_in_lstm(*sizes)
    np.testing.assert_array_equal(np.asarray(rnn.swap_lstm_gates(weights, *sizes)),
                                  np.asarray(jrnn.swap_lstm_gates(weights, *sizes)))

    def theirs(w):
        return jrnn.lstm_ref(x, h0, c0, *jrnn.unpack_lstm_weights(w, *sizes), lengths,
                             features, hidden, layers, 0.0, bidirectional)

    want = theirs(weights)
    for got in (rnn.lstm(x, h0, c0, weights, lengths, *sizes[:3], 0.0, bidirectional),
                kiln.jit(rnn.lstm, static_argnums=(5, 6, 7, 8, 9))(
                    x, h0, c0, weights, lengths, *sizes[:3], 0.0, bidirectional)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    if layers == 1:     # JAX's compile of the two-layer derivative alone takes seconds
        grad = kiln.grad(lambda w: rnn.lstm(x, h0, c0, w, lengths, *sizes[:3], 0.0,
                                            bidirectional)[0].sum())(weights)
        np.testing.assert_allclose(np.asarray(grad),
                                   np.asarray(jax.grad(lambda w: theirs(w)[0].sum())(weights)),
                                   rtol=1e-4, atol=1e-5)
    with pytest.raises(NotImplementedError, match="Dropout not supported"):
        rnn.lstm(x, h0, c0, weights, lengths, *sizes[:3], 0.5, bidirectional)
    with pytest.raises(NotImplementedError, match="`seq_lengths` can only be int32"):
        rnn.lstm(x, h0, c0, weights, lengths.astype(np.float32), *sizes[:3], 0.0, bidirectional)


def test_key_reuse_checker_raises_where_jax_does():
    def twice(k):
        return kiln.random.normal(k) + kiln.random.uniform(k)

    def split_once(k):
        a, b = kiln.random.split(k)
        return kiln.random.normal(a) + kiln.random.normal(b)

    reused = [
        ("drew from this key", lambda k: (kiln.random.normal(k), kiln.random.normal(k))),
        ("drew from this key", lambda k: (kiln.random.split(k), kiln.random.normal(k))),
        ("drew from this key", twice),
        ("In uniform, argument 0 is already consumed", kiln.jit(twice)),
        ("already consumed", lambda k: kiln.grad(
            lambda x, k: x * kiln.random.normal(k) * kiln.random.normal(k))(1.0, k)),
        ("already consumed", lambda k: kiln.vmap(twice)(kiln.random.split(k, 2))),
    ]
    fine = [
        lambda k: (kiln.random.fold_in(k, 1), kiln.random.fold_in(k, 2)),
        lambda k: (kiln.random.normal(k), kiln.random.key_data(k)),
        lambda k: (kiln.random.normal(kiln.random.clone(k)), kiln.random.normal(k)),
        lambda k: kiln.jit(split_once)(k),
        lambda k: kiln.random.choice(k, 5, (3,), replace=False),
        lambda k: kiln.jit(lambda k, p: kiln.lax.cond(p, kiln.random.normal, kiln.random.uniform,
                                                     k))(k, True),
    ]
    for seed in range(eager_tiers.EAGER_CALLS + 1):   # samplers compiled for these signatures
        kiln.random.normal(kiln.random.key(seed)), kiln.random.split(kiln.random.key(seed))
    with kiln.debug_key_reuse(True):
        for seed, (message, call) in enumerate(reused):
            with pytest.raises(kiln.errors.KeyReuseError, match=message):
                call(kiln.random.key(seed))
        for seed, call in enumerate(fine):
            call(kiln.random.key(seed))
        raw = kiln.random.PRNGKey(0)
        kiln.random.normal(raw), kiln.random.normal(raw)       # raw keys are not checked
    key = kiln.random.key(0)
    kiln.random.normal(key), kiln.random.normal(key)           # the checker is off again
    assert issubclass(kiln.errors.KeyReuseError, TypeError)
    # JAX raises for the same reuses and allows the same non-reuses
    with jax.debug_key_reuse(True):
        k = jax.random.key(0)
        jax.random.normal(k)
        with pytest.raises(jax.errors.KeyReuseError):
            jax.random.normal(k)
        k = jax.random.key(1)
        jax.random.fold_in(k, 1), jax.random.fold_in(k, 2), jax.random.normal(k)
