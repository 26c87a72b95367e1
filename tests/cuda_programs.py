"""Programs the CUDA backend's tests run on a device layer (test_cuda_backend.py on the host
emulation, test_cuda_gpu.py on a GPU), each against the reference backend: (name, function,
arguments)."""
import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import lax


def _mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


def mlp_step(params, x, y):
    grads = kiln.grad(_mlp_loss)(params, x, y)
    return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]


def elementwise(x, y):
    return x * x + y * 2.0, jnp.where(x > y, jnp.exp(x), -y), (x - y).astype(jnp.int32)


def reductions(x):
    return jnp.sum(x * x, axis=-1), jnp.max(x, axis=0), jnp.min(x), jnp.sum(x, axis=(0, 2))


def matmuls(a, b, c, d):
    return a @ b, jnp.einsum("bij,bjk->bik", c, d), jnp.dot(a[0], b[:, 0])


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def control(x, n):
    y = lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
    z = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, y))[1]

    def body(carry, row):
        carry = carry + row
        return carry, carry * row
    total, rows = lax.scan(body, jnp.zeros(x.shape[1:], x.dtype), z)
    return total, rows


def integers(i, j):
    return i // (j + 1), i % 7, jnp.maximum(i, j), jnp.sum(i, axis=0), (i > j).astype(jnp.int32)


def indexing(x, i, j, u):
    return (x[i], x[i, j], x.at[i].add(u), x.at[i].max(u), x.at[j].min(u * 2.0),
            jnp.take_along_axis(x, jnp.abs(x).astype(jnp.int32) % 4, axis=1),
            lax.dynamic_slice(x, (i[0], j[1]), (2, 2)),
            lax.dynamic_update_slice(x, u[:2, :2], (j[2], i[3])))


def long_scans(x):
    """Lines long enough to be scanned over several blocks (cuda/scan.py's split form)."""
    return jnp.cumsum(x), lax.cummax(x, axis=1, reverse=True), lax.cumlogsumexp(x[:2], axis=1)


SHIFT = np.linspace(-1.0, 1.0, 7).astype(np.float32)   # a closed-over constant


def whole(x, y):
    """Every kind of step in one program: a sort, a while loop whose predicate is a reduction,
    a scan, a matmul and a closed-over array."""
    s = jnp.sort(x + SHIFT, axis=-1)
    grown = lax.while_loop(lambda c: jnp.sum(c * c) < 400.0, lambda c: c * 1.5 + 0.25, s)

    def body(carry, row):
        carry = jnp.tanh(carry + row)
        return carry, jnp.max(carry) * row
    last, rows = lax.scan(body, jnp.zeros(x.shape[1:], x.dtype), grown)
    return last @ y, rows, jnp.argsort(-x[0])


def nested(x, n):
    """Control flow inside control flow: a cond whose branch scans rows with a while loop in
    the scan's body (regions' plans inside regions' plans)."""
    def halve_until_small(row):
        return lax.while_loop(lambda r: jnp.max(jnp.abs(r)) > n, lambda r: r * 0.5, row)

    def body(carry, row):
        return carry + halve_until_small(row), jnp.sum(row)

    def scanned(v):
        return lax.scan(body, jnp.zeros(v.shape[1:], v.dtype), v)
    return lax.cond(jnp.min(x) < 0.0, scanned, lambda v: (v[0], v[:, 0]), x * 4.0)


def programs():
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    params = [(f32(6, 8) * 0.3, f32(8)), (f32(8, 3) * 0.3, f32(3))]
    return [
        ("elementwise", elementwise, (f32(5, 7), f32(5, 7))),
        ("elementwise_empty", elementwise, (f32(0, 3), f32(0, 3))),
        ("reductions", reductions, (f32(4, 3, 33),)),
        ("reductions_size1", reductions, (f32(1, 1, 1),)),
        ("matmuls", matmuls, (f32(4, 5), f32(5, 3), f32(2, 3, 4), f32(2, 4, 6))),
        ("softmax", softmax, (f32(3, 70),)),
        ("control", control, (f32(4, 3), np.int32(3))),
        ("integers", integers, (rng.integers(-50, 50, (6, 5)).astype(np.int32),
                                rng.integers(0, 9, (6, 5)).astype(np.int32))),
        ("mlp_step", mlp_step, (params, f32(5, 6), f32(5, 3))),
        ("indexing", indexing, (f32(5, 4), np.array([0, 4, -1, 9, -7], np.int32),
                                np.array([3, 2, 0, -2, 1], np.int32), f32(5, 4))),
        ("long_scans", long_scans, (f32(3, 40000),)),
        ("whole", whole, (f32(4, 7), f32(7, 2))),
        ("nested", nested, (f32(3, 5), np.float32(0.5))),
    ]


def check(name, fn, args, tolerance=1e-5):
    """backend="cuda" against the reference on `args`; returns the cuda executable."""
    jitted = kiln.jit(fn, backend="cuda")
    jitted.clear_cache()   # jit objects of fn share specialisations: read this call's
    got = jitted(*args)
    want = kiln.jit(fn, backend="reference")(*args)
    got_leaves, want_leaves = kiln.tree_util.tree_leaves(got), kiln.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert g.devices() == {kiln.devices("gpu")[0]}, name
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return jitted._cache.values()[0].executable
