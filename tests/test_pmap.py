"""kiln.pmap: replicas on the CPU devices (the suite runs with 8: conftest.py), every
collective against NumPy on 1, 2, 3 and 8 devices on both backends, derivatives, composition
with jit/grad/vmap/custom derivatives, and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.test_util import check_grads

BACKENDS = ["reference", "cpu"]
SIZES = [1, 2, 3, 8]


def normalize(x):
    return x / lax.psum(x, "i")


def test_the_seed_snippets():
    out = kiln.pmap(normalize, axis_name="i")(jnp.arange(4.))
    assert str(np.asarray(out)) == "[0.         0.16666667 0.33333334 0.5       ]"
    keys = kiln.random.split(kiln.random.key(0), 8)
    mats = kiln.pmap(lambda key: kiln.random.normal(key, (50, 50)))(keys)
    result = kiln.pmap(lambda x: jnp.dot(x, x.T))(mats)
    assert result.shape == (8, 50, 50)
    expect = np.stack([np.asarray(m) @ np.asarray(m).T for m in mats])
    np.testing.assert_allclose(np.asarray(result), expect, rtol=1e-4, atol=1e-4)
    for i in range(8):   # each replica drew from its own key
        np.testing.assert_array_equal(np.asarray(mats[i]),
                                      np.asarray(kiln.random.normal(keys[i], (50, 50))))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", SIZES)
def test_elementwise_and_reductions(backend, n):
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
    f = kiln.pmap(lambda v: jnp.sin(v) * 2 + v.sum(), backend=backend)
    expect = np.sin(x) * 2 + x.sum(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(np.asarray(f(x)), expect, rtol=1e-5)


# ------------------------------------------------------------------ every collective

def _shapes(min_rank=1):
    return st.lists(st.integers(0, 3), min_size=min_rank, max_size=3).map(tuple)


def _data(n, shape, dtype=np.float32, seed=0):
    """Random data of kiln's version of `dtype` (float64 is float32 without x64)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "fc":
        x = rng.standard_normal((n,) + shape).astype(dtype)
    else:
        x = rng.integers(0 if np.dtype(dtype).kind == "u" else -5, 5, (n,) + shape).astype(dtype)
    return np.asarray(jnp.asarray(x))


def _both(fun, x, **kw):
    """pmap and vmap of `fun` over axis 'i' on each backend (vmap: the already-tested
    meaning of every collective)."""
    expect = np.asarray(kiln.vmap(fun, axis_name="i", **kw)(x))
    for backend in BACKENDS:
        got = np.asarray(kiln.pmap(fun, axis_name="i", backend=backend, **kw)(x))
        np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5, err_msg=backend)
    return expect


@settings(max_examples=8)
@given(n=st.sampled_from(SIZES), shape=_shapes(0),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.complex64]))
def test_psum_pmax_pmin(n, shape, dtype):
    x = _data(n, shape, dtype)
    total = _both(lambda v: lax.psum(v, "i"), x)
    np.testing.assert_allclose(total, np.broadcast_to(x.sum(0, dtype=x.dtype), x.shape),
                               rtol=1e-6)   # replica order, NumPy's may pair differently
    if np.dtype(dtype).kind != "c":
        np.testing.assert_array_equal(_both(lambda v: lax.pmax(v, "i"), x),
                                      np.broadcast_to(x.max(0), x.shape))
        np.testing.assert_array_equal(_both(lambda v: lax.pmin(v, "i"), x),
                                      np.broadcast_to(x.min(0), x.shape))
    xf = x if np.dtype(dtype).kind == "c" else x.astype(np.float32)
    mean = _both(lambda v: lax.pmean(v, "i"), xf)
    np.testing.assert_allclose(mean, np.broadcast_to(xf.mean(0), x.shape), rtol=1e-5, atol=1e-5)


def test_psum_bits_are_the_same_on_every_replica():
    x = np.random.default_rng(1).standard_normal((8, 1000)).astype(np.float32)
    out = np.asarray(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x))
    for row in out[1:]:
        np.testing.assert_array_equal(row, out[0])
    ref = np.asarray(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i",
                               backend="reference")(x))
    np.testing.assert_array_equal(out, ref)


def test_pmax_nan_and_signed_zero_as_the_reference():
    x = np.array([[0.0, -0.0, 1.0], [-0.0, 0.0, np.nan]], np.float32)
    a = np.asarray(kiln.pmap(lambda v: lax.pmax(v, "i"), axis_name="i")(x))
    b = np.asarray(kiln.pmap(lambda v: lax.pmax(v, "i"), axis_name="i", backend="reference")(x))
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@settings(max_examples=8)
@given(n=st.sampled_from(SIZES), shape=_shapes(1), data=st.data())
def test_axis_index_all_gather(n, shape, data):
    x = _data(n, shape)
    got = _both(lambda v: v + lax.axis_index("i"), x)
    np.testing.assert_allclose(got, x + np.arange(n).reshape((n,) + (1,) * len(shape)))
    tiled = data.draw(st.booleans())
    axis = data.draw(st.integers(0, len(shape) - (1 if tiled else 0)))
    gathered = _both(lambda v: lax.all_gather(v, "i", axis=axis, tiled=tiled), x)
    one = np.concatenate(list(x), axis=axis) if tiled else np.stack(list(x), axis=axis)
    np.testing.assert_array_equal(gathered, np.broadcast_to(one, (n,) + one.shape))


@settings(max_examples=8)
@given(n=st.sampled_from(SIZES), rest=_shapes(0), tiled=st.booleans(), data=st.data())
def test_psum_scatter(n, rest, tiled, data):
    at = data.draw(st.integers(0, len(rest)))
    block = data.draw(st.integers(1, 2)) if tiled else 1
    shape = rest[:at] + ((n * block,) if tiled else (n,)) + rest[at:]
    x = _data(n, shape)
    got = _both(lambda v: lax.psum_scatter(v, "i", scatter_dimension=at, tiled=tiled), x)
    total = x.sum(0)
    for i in range(n):
        part = (np.take(total, range(i * block, (i + 1) * block), axis=at) if tiled
                else np.take(total, i, axis=at))
        np.testing.assert_allclose(got[i], part, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", SIZES)
def test_ppermute_and_pshuffle(n):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    ring = [(i, (i + 1) % n) for i in range(n)]
    np.testing.assert_array_equal(_both(lambda v: lax.ppermute(v, "i", ring), x),
                                  np.roll(x, 1, axis=0))
    partial = [(0, n - 1)]
    expect = np.zeros_like(x)
    expect[n - 1] = x[0]
    np.testing.assert_array_equal(_both(lambda v: lax.ppermute(v, "i", partial), x), expect)
    perm = list(range(1, n)) + [0]
    np.testing.assert_array_equal(_both(lambda v: lax.pshuffle(v, "i", perm), x), x[perm])


@pytest.mark.parametrize("tiled", [False, True])
def test_all_to_all_over_the_pmap_axis_and_a_vmap_axis(tiled):
    """pmap over 'i' (2 replicas) of vmap over 'j' (3): all_to_all over ('i', 'j') is the one
    all_to_all over the flattened 6 examples (vmap's, tested against NumPy)."""
    x = _data(6, (6 * (2 if tiled else 1), 2)).reshape(2, 3, -1, 2)

    def step(v, names=("i", "j")):
        return lax.all_to_all(v, names, 0, 1, tiled=tiled)
    expect = np.asarray(kiln.vmap(lambda v: step(v, "k"), axis_name="k")(x.reshape(6, -1, 2)))
    for backend in BACKENDS:
        got = kiln.pmap(kiln.vmap(step, axis_name="j"), axis_name="i", backend=backend)(x)
        np.testing.assert_allclose(np.asarray(got).reshape(expect.shape), expect,
                                   err_msg=backend)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("split, concat, tiled", [(0, 0, False), (0, 1, False), (1, 0, False),
                                                  (0, 0, True), (1, 0, True), (0, 1, True)])
def test_all_to_all_and_pswapaxes(n, split, concat, tiled):
    shape = [2, 3]
    shape[split] = n * 2 if tiled else n
    x = _data(n, tuple(shape))
    got = _both(lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled), x)
    for i in range(n):   # replica i: block i of every replica q's split axis, joined in order
        k = x.shape[1 + split] // n
        blocks = [np.take(x[q], range(i * k, (i + 1) * k) if tiled else i, axis=split)
                  for q in range(n)]
        one = np.concatenate(blocks, axis=concat) if tiled else np.stack(blocks, axis=concat)
        np.testing.assert_array_equal(got[i], one)
    if split == 0 and not tiled:
        _both(lambda v: lax.pswapaxes(v, "i", 0), x)


def test_collectives_in_control_flow():
    def f(x):
        def body(i, acc):
            return acc + lax.psum(acc, "i") * 0.5
        y = lax.fori_loop(0, 3, body, x)
        return lax.cond(lax.axis_index("i") % 2 == 0, lambda v: v, lambda v: -v, y)
    _both(f, np.arange(8.).reshape(4, 2).astype(np.float32))


# ------------------------------------------------------------- in_axes / out_axes

@pytest.mark.parametrize("backend", BACKENDS)
def test_axes_and_static_arguments(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.arange(4, dtype=np.float32)
    f = kiln.pmap(lambda a, b: a * b, in_axes=(1, None), backend=backend)
    np.testing.assert_allclose(np.asarray(f(x, y[:3])), x.T * y[:3])
    g = kiln.pmap(lambda a: a + 1, out_axes=1, backend=backend)
    np.testing.assert_allclose(np.asarray(g(x)), (x + 1).T)
    h = kiln.pmap(lambda a, k: a * k, static_broadcasted_argnums=1, backend=backend)
    np.testing.assert_allclose(np.asarray(h(x, 3)), x * 3)
    r = kiln.pmap(lambda a: lax.psum(a, "i"), axis_name="i", out_axes=None, backend=backend)
    np.testing.assert_allclose(np.asarray(r(x)), x.sum(0))
    d = kiln.pmap(lambda t: {"s": t["a"] + t["b"]}, backend=backend)
    np.testing.assert_allclose(np.asarray(d({"a": x, "b": x})["s"]), 2 * x)


# ------------------------------------------------------------------- derivatives

def test_grad_of_psum_is_the_axis_size_as_in_jax():
    x = jnp.arange(4.)
    g = kiln.pmap(kiln.grad(lambda v: lax.psum(v, "i")), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(g), [4., 4., 4., 4.])
    outer = kiln.grad(lambda v: kiln.pmap(lambda y: lax.psum(y, "i"), axis_name="i")(v).sum())
    np.testing.assert_array_equal(np.asarray(outer(x)), [4., 4., 4., 4.])


@pytest.mark.parametrize("name, fun", [
    ("psum", lambda v: jnp.sin(lax.psum(v * v, "i"))),
    ("all_gather", lambda v: (lax.all_gather(v, "i") ** 2).sum(0) * v),
    ("ppermute", lambda v: lax.ppermute(v ** 3, "i", [(0, 1), (1, 2), (2, 0)])),
    ("psum_scatter", lambda v: lax.psum_scatter(jnp.stack([v, 2 * v, v * v]), "i") * v),
    ("all_to_all", lambda v: lax.all_to_all(jnp.stack([v, v ** 2, -v]), "i", 0, 0) * v),
])
def test_derivatives_match_vmap_and_finite_differences(name, fun):
    x = np.random.default_rng(2).standard_normal((3, 2)).astype(np.float64)
    loss_p = kiln.pmap(kiln.grad(lambda v: fun(v).sum()), axis_name="i")
    loss_v = kiln.vmap(kiln.grad(lambda v: fun(v).sum()), axis_name="i")
    np.testing.assert_allclose(np.asarray(loss_p(x)), np.asarray(loss_v(x)), rtol=1e-5)
    check_grads(lambda v: kiln.pmap(fun, axis_name="i")(v), (x.astype(np.float32),), order=1,
                modes=["rev"], atol=5e-2, rtol=5e-2)


def test_custom_jvp_and_checkpoint_inside():
    @kiln.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return jnp.sin(x), 2 * t   # deliberately not cos: the rule must be the one used

    g = kiln.pmap(kiln.grad(lambda x: lax.psum(f(x), "i")), axis_name="i")
    np.testing.assert_allclose(np.asarray(g(jnp.ones(2))), [4.0, 4.0])
    h = kiln.pmap(kiln.grad(kiln.checkpoint(lambda x: jnp.sin(x) * lax.psum(x, "i"))),
                  axis_name="i")
    x = np.array([0.5, 1.5], np.float32)
    np.testing.assert_allclose(np.asarray(h(x)), np.cos(x) * x.sum() + np.sin(x).sum(),
                               rtol=1e-5)


# ------------------------------------------------------------------- composition

def test_jit_of_pmap_and_pmap_of_jit():
    x = jnp.arange(4.)
    expect = [0., 1 / 6, 2 / 6, 0.5]
    np.testing.assert_allclose(np.asarray(kiln.jit(kiln.pmap(normalize, axis_name="i"))(x)),
                               expect, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.pmap(kiln.jit(normalize), axis_name="i")(x)),
                               expect, rtol=1e-6)


def test_vmap_inside_pmap_with_collectives_over_both_names():
    x = np.arange(8., dtype=np.float32).reshape(4, 2)
    f = kiln.pmap(kiln.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(np.asarray(f(x)), np.full((4, 2), x.sum()))
    g = kiln.pmap(kiln.vmap(lambda v: lax.psum(v, "i") + lax.axis_index("j"), axis_name="j"),
                  axis_name="i")
    np.testing.assert_allclose(np.asarray(g(x)), np.broadcast_to(x.sum(0) + np.arange(2), x.shape))


def test_pmap_inside_vmap_and_nested_pmap():
    x = np.arange(12., dtype=np.float32).reshape(3, 2, 2)
    f = kiln.vmap(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i"))
    np.testing.assert_allclose(np.asarray(f(x)), np.broadcast_to(x.sum(1, keepdims=True),
                                                                x.shape))
    g = kiln.pmap(kiln.pmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")
    np.testing.assert_allclose(np.asarray(g(x[:2])),
                               np.broadcast_to(x[:2].sum((0, 1)), (2, 2, 2)))


def test_results_feed_back_and_index():
    f = kiln.pmap(lambda v: v * 2)
    out = f(f(np.ones((4, 3), np.float32)))
    np.testing.assert_array_equal(np.asarray(out), np.full((4, 3), 4.0))
    np.testing.assert_array_equal(np.asarray(out[1]), np.full(3, 4.0))
    np.testing.assert_array_equal(np.asarray(out + 1), np.full((4, 3), 5.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("summed", [True, False])
def test_results_held_at_once_are_their_own_buffers(backend, n, summed):
    """One replica's result is returned without a copy, several are stacked into pooled
    memory: either way three calls' results held at once keep their values, and a result never
    shares the argument's memory (the reference backend returns the identity's input)."""
    f = kiln.pmap((lambda v: lax.psum(v, "i")) if summed else (lambda v: v), axis_name="i",
                  backend=backend)
    xs = [np.full((n, 2 << 18), k + 1, np.float32) for k in range(3)]   # 4 MB each: pooled
    held = [f(x) for x in xs]
    for x, r in zip(xs, held):
        assert not np.shares_memory(np.asarray(r), x)
        x[...] = -1.0   # the argument changes afterwards: the result does not
    for k, r in enumerate(held):
        want = (k + 1) * (n if summed else 1)
        np.testing.assert_array_equal(np.asarray(r), np.full((n, 2 << 18), want, np.float32))


def test_replicas_run_at_once():
    # a psum among 4 replicas completes only if all 4 run at once (native replica threads or
    # the Python workers, whichever runner the executable has), each with every operand
    out = kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out), np.full(4, 6.0, np.float32))


# ------------------------------------------------------------------------ errors

def test_more_replicas_than_devices_names_both():
    with pytest.raises(ValueError, match=r"size 9, but only 8 devices are available"):
        kiln.pmap(lambda v: v)(np.ones((9, 2)))
    with pytest.raises(ValueError, match=r"size 3, but only 2 devices.*given to pmap"):
        kiln.pmap(lambda v: v, devices=kiln.devices()[:2])(np.ones((3, 2)))


def test_argument_errors():
    with pytest.raises(ValueError, match="rank should be at least 1"):
        kiln.pmap(lambda v: v)(3.0)
    with pytest.raises(ValueError, match="at least one argument with a mapped axis"):
        kiln.pmap(lambda v: v, in_axes=None, axis_size=4)(np.ones(2))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        kiln.pmap(lambda a, b: a + b)(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"len\(in_axes\)=2, len\(args\)=1"):
        kiln.pmap(lambda a: a, in_axes=(0, 0))(np.ones((2, 3)))
    with pytest.raises(TypeError, match="pmap requires a callable"):
        kiln.pmap(3)


def test_unbound_and_misnamed_axes():
    with pytest.raises(NameError, match="unbound axis name: j"):
        kiln.pmap(lambda v: lax.psum(v, "j"), axis_name="i")(np.ones((2, 2)))
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(np.ones(2), "i")


def test_a_failing_replica_fails_the_call_without_hanging():
    def f(x):
        # replica 2 asks for a negative precision: its print raises, the others wait at the psum
        kiln.debug.print("{0:.{1}f}", x, jnp.where(lax.axis_index("i") == 2, -1, 1))
        return lax.psum(x, "i")
    with pytest.raises(ValueError, match="precision"):
        kiln.pmap(f, axis_name="i", backend="reference")(np.ones(4, np.float32))
    # the threads are still usable afterwards
    np.testing.assert_array_equal(
        np.asarray(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(np.ones(4))), 4 * [4.])


# ---------------------------------------------------------------- device counts

def _run_fresh(code, env):
    import os
    import subprocess
    import sys
    full = {k: v for k, v in os.environ.items()
            if k not in ("KILN_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120)


@pytest.mark.parametrize("env, setting, count", [
    ({}, None, 1),
    ({"KILN_NUM_CPU_DEVICES": "3"}, None, 3),
    ({"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}, None, 2),
    ({"KILN_NUM_CPU_DEVICES": "3"}, 5, 5),
    ({"JAX_NUM_CPU_DEVICES": "4"}, None, 4),   # the variable JAX reads for its option
    ({"JAX_NUM_CPU_DEVICES": "4", "KILN_NUM_CPU_DEVICES": "2"}, None, 2),
    ({"JAX_NUM_CPU_DEVICES": "4", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
     None, 4),
])
def test_device_count_settings(env, setting, count):
    code = ("import kiln\n"
            + (f"kiln.config.update('jax_num_cpu_devices', {setting})\n" if setting else "")
            + "print(kiln.device_count(), kiln.local_device_count(), repr(kiln.devices()[-1]))\n"
            + "try:\n    kiln.config.update('jax_num_cpu_devices', 7)\n"
            + "except RuntimeError as e:\n    print('refused', 'before backends' in str(e))\n")
    out = _run_fresh(code, env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [f"{count} {count} CpuDevice(id={count - 1})",
                                         "refused True"]


def test_bad_device_count_settings():
    with pytest.raises(ValueError, match="whole number of at least 1"):
        kiln.config.update("jax_num_cpu_devices", 0)
    out = _run_fresh("import kiln; kiln.devices()", {"KILN_NUM_CPU_DEVICES": "two"})
    assert "KILN_NUM_CPU_DEVICES='two' must be a whole number" in out.stderr
    out = _run_fresh("import kiln; kiln.devices()", {"JAX_NUM_CPU_DEVICES": "0"})
    assert "JAX_NUM_CPU_DEVICES='0' must be a whole number" in out.stderr
    assert "set it to 1 or more, or unset it" in out.stderr
    out = _run_fresh("import kiln; kiln.devices()",
                     {"XLA_FLAGS": "--xla_force_host_platform_device_count=0"})
    assert out.returncode != 0   # JAX refuses it too
    assert "--xla_force_host_platform_device_count must be a whole number" in out.stderr


# ------------------------------------------------------- replicas without collectives

def test_replicas_that_use_the_pool_run_in_turn(monkeypatch):
    """Replicas without collectives run one after the other when their compiled code hands
    work to the thread pool itself (here: a product split into panels), since each already
    spreads over the cores; slow replicas without such work run at once on their threads."""
    from kiln import _replica_threads
    seen = []
    real = _replica_threads.run_replicas

    def recording(entry, group, args_of):
        outs = real(entry, group, args_of)
        seen.append(entry.parallel)
        return outs
    monkeypatch.setattr(_replica_threads, "run_replicas", recording)
    monkeypatch.setattr(_replica_threads, "PARALLEL_ABOVE", 0.0)   # every replica is "slow"

    def product(a, b):
        return a @ b

    def scaled(x):
        return jnp.sin(x) * 2

    a = np.ones((2, 256, 512), np.float32)
    b = np.ones((2, 512, 256), np.float32)
    np.testing.assert_allclose(np.asarray(kiln.pmap(product)(a, b)), a @ b)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(np.asarray(kiln.pmap(scaled)(x)), np.sin(x) * 2, rtol=1e-6)
    from kiln.compiler.backends.llvm import parallel
    assert seen == [parallel.num_threads() == 1, True]   # (product, scaled)
