"""kiln.experimental.sparse against JAX 0.10.2's jax.experimental.sparse: BCOO and BCSR buffers
(data, indices, indptr, nse, dtypes, flags) and values for every layout of a 3-d array, the
operations (transpose, sort_indices, sum_duplicates, reduce_sum, reshape, broadcast_in_dim,
dot_general, products, sums), eye / empty / random_bcoo, sparsify and the sparse grad; the
same under kiln.jit, kiln.grad (with respect to the data and the dense operand) and kiln.vmap;
edge cases (all-zero matrix, nse=0, 1x1) and errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.experimental import sparse as ks

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental import sparse as js  # noqa: E402

RNG = np.random.RandomState(0)
X3 = (RNG.rand(3, 4, 5) * (RNG.rand(3, 4, 5) > 0.6)).astype(np.float32)
M = np.array([[0., 2., 0.], [1., 0., 4.]], np.float32)
LAYOUTS = [(nb, nd) for nb in range(4) for nd in range(4 - nb)]
# (JAX's eager sparse operations compile per shape, so its buffers are compared on these)
JAX_LAYOUTS = [(0, 0), (0, 1), (0, 3), (1, 0), (2, 1), (3, 0)]


def same_buffers(mine, theirs, names=("data", "indices")):
    assert type(mine).__name__ == type(theirs).__name__
    assert mine.shape == tuple(theirs.shape)
    assert (mine.nse, mine.n_batch, mine.n_dense) == (theirs.nse, theirs.n_batch,
                                                      theirs.n_dense)
    assert (mine.indices_sorted, mine.unique_indices) == (theirs.indices_sorted,
                                                          theirs.unique_indices)
    for name in names:
        a, b = np.asarray(getattr(mine, name)), np.asarray(getattr(theirs, name))
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=name)


def dense(x):
    return np.asarray(x.todense() if hasattr(x, "todense") else x)


@pytest.mark.parametrize("nb,nd", JAX_LAYOUTS)
def test_bcoo_layouts_as_jax(nb, nd):
    a = ks.BCOO.fromdense(X3, n_batch=nb, n_dense=nd)
    b = js.BCOO.fromdense(X3, n_batch=nb, n_dense=nd)
    same_buffers(a, b)
    np.testing.assert_array_equal(a.todense(), X3)
    np.testing.assert_array_equal(ks.bcoo_todense(a), X3)
    padded = a.sum_duplicates(nse=a.nse + 1)
    np.testing.assert_array_equal(padded.todense(), X3)
    if (nb, nd) in [(0, 0), (2, 1)]:   # (JAX's eager sum_duplicates is slow)
        same_buffers(padded, b.sum_duplicates(nse=b.nse + 1))
    ns = 3 - nb - nd
    perm = (list(range(nb))[::-1] + list(range(nb, nb + ns))[::-1] +
            list(range(nb + ns, 3))[::-1])
    same_buffers(a.transpose(perm), b.transpose(perm))
    same_buffers(a.transpose(perm).sort_indices(), b.transpose(perm).sort_indices())
    for axes in [(1,), (0, 2)]:
        r1, r2 = ks.bcoo_reduce_sum(a, axes=axes), js.bcoo_reduce_sum(b, axes=axes)
        assert (r1.shape, r1.nse, r1.n_batch, r1.n_dense) == (r2.shape, r2.nse, r2.n_batch,
                                                              r2.n_dense)
        np.testing.assert_allclose(r1.todense(), X3.sum(axes), rtol=1e-6)
    for axes in [(0,), (2,), (0, 1, 2)]:
        np.testing.assert_allclose(ks.bcoo_reduce_sum(a, axes=axes).todense(), X3.sum(axes),
                                   rtol=1e-6)


@pytest.mark.parametrize("nb,nd", LAYOUTS)
def test_bcoo_dot_general_and_matmul(nb, nd):
    a = ks.BCOO.fromdense(X3, n_batch=nb, n_dense=nd)
    W = RNG.rand(5, 2).astype(np.float32)
    V = RNG.rand(3, 4, 6).astype(np.float32)
    for lhs, rhs, dn in [(a, W, (((2,), (0,)), ((), ()))),
                         (a, V, (((1,), (1,)), ((0,), (0,)))),
                         (V, a, (((1,), (1,)), ((0,), (0,)))),
                         (W.T, a, (((1,), (2,)), ((), ())))]:
        got = ks.bcoo_dot_general(lhs, rhs, dimension_numbers=dn)
        want = jax.lax.dot_general(dense(lhs), dense(rhs), dn)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if nd == 0:   # matmul: vectors, and leading batch dimensions on both sides
        for o in [np.ones(5, np.float32), RNG.rand(3, 5, 2).astype(np.float32)]:
            np.testing.assert_allclose(a @ o, X3 @ o, rtol=1e-5)
        for o in [np.ones(4, np.float32), RNG.rand(3, 2, 4).astype(np.float32)]:
            np.testing.assert_allclose(o @ a, o @ X3, rtol=1e-5)
    if nb == 0 and nd == 0:   # where JAX has the operation, its exact result
        dn = (((2,), (0,)), ((), ()))
        np.testing.assert_allclose(
            ks.bcoo_dot_general(a, W, dimension_numbers=dn),
            js.bcoo_dot_general(js.BCOO.fromdense(X3), W, dimension_numbers=dn), rtol=1e-6)


EXPRESSIONS = ["A*2", "2*A", "A*M", "M*A", "A@o3", "o2@A", "A@o34", "A+A", "-A", "A.T",
               "A.sum()", "A.sum(0)", "A.sum(1)", "A*A", "A-A", "A+M", "abs(A)", "A/2", "A**2",
               "A.reshape(3,2)", "A.reshape(6)", "A.sum_duplicates()",
               "(A+A).sum_duplicates()", "(A+A).sort_indices()", "A.astype('float16')"]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_bcoo_methods_as_jax(expr):
    def run(sp, np_):
        env = dict(M=np_.asarray(M), A=sp.BCOO.fromdense(np_.asarray(M)), o3=np_.ones(3),
                   o2=np_.ones(2), o34=np_.ones((3, 4)))
        return eval(expr, env)
    mine, theirs = run(ks, knp), run(js, jjnp)
    assert type(mine).__name__ == type(theirs).__name__.replace("ArrayImpl", "Array")
    if isinstance(mine, ks.BCOO):
        assert (mine.nse, mine.indices_sorted, mine.unique_indices, mine.shape) == (
            theirs.nse, theirs.indices_sorted, theirs.unique_indices, theirs.shape)
    a, b = dense(mine), dense(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_fromdense_edge_cases():
    for x, kw in [(np.zeros((3, 4), np.float32), {"nse": 2}),
                  (np.ones((1, 1), np.float32), {}), (np.zeros((1, 1), np.float32), {}),
                  (M, {"nse": 0}), (M, {"index_dtype": np.int16}),
                  (np.zeros((2, 0), np.float32), {}),
                  (np.array([[0, 3], [0, 0]], np.int32), {"n_batch": 1})]:
        a, b = ks.BCOO.fromdense(x, **kw), js.BCOO.fromdense(x, **kw)
        same_buffers(a, b)
        kept = x if kw.get("nse", 1) else np.zeros_like(x)
        np.testing.assert_array_equal(a.todense(), kept)
        s = a.sum_duplicates()
        np.testing.assert_array_equal(s.todense(), kept)
        per_batch = kept.reshape(kept.shape[0], -1) if kw.get("n_batch") else kept.reshape(1, -1)
        assert s.nse == np.count_nonzero(per_batch, axis=-1).max(initial=0)
    same_buffers(a.sum_duplicates(), b.sum_duplicates())


def test_sum_duplicates_and_out_of_bounds_indices():
    data = np.array([1., 2., 3., 4., 0.], np.float32)
    idx = np.array([[1, 2], [0, 0], [1, 2], [2, 3], [0, 1]], np.int32)   # (2, 3) is out
    a = ks.BCOO((data, idx), shape=(2, 3))
    b = js.BCOO((data, idx), shape=(2, 3))
    np.testing.assert_array_equal(a.todense(), b.todense())
    same_buffers(a.sum_duplicates(), b.sum_duplicates())
    same_buffers(a.sum_duplicates(remove_zeros=False), b.sum_duplicates(remove_zeros=False))
    same_buffers(ks.bcoo_sum_duplicates(a, nse=2), js.bcoo_sum_duplicates(b, nse=2))
    same_buffers(a.sort_indices(), b.sort_indices())
    np.testing.assert_allclose(a @ np.ones(3, np.float32), b @ jjnp.ones(3))
    full = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    for assume_unique in (None, True):   # duplicates: the value goes to the first of them
        same_buffers(ks.bcoo_extract(a, full, assume_unique=assume_unique),
                     js.bcoo_extract(b, full, assume_unique=assume_unique))


def test_broadcast_in_dim_reshape_and_extract():
    a, b = ks.BCOO.fromdense(M), js.BCOO.fromdense(M)
    for shape, bd in [((4, 2, 3), (1, 2)), ((2, 3, 1), (0, 1)), ((5, 2, 3), (1, 2))]:
        same_buffers(ks.bcoo_broadcast_in_dim(a, shape=shape, broadcast_dimensions=bd),
                     js.bcoo_broadcast_in_dim(b, shape=shape, broadcast_dimensions=bd))
    a3, b3 = ks.BCOO.fromdense(X3, n_batch=1), js.BCOO.fromdense(X3, n_batch=1)
    same_buffers(a3.reshape(3, 20), b3.reshape(3, 20))
    same_buffers(ks.bcoo_reshape(a3, new_sizes=(3, 2, 10)),
                 js.bcoo_reshape(b3, new_sizes=(3, 2, 10)))
    with pytest.raises(ValueError, match="cannot mix batch and sparse"):
        ks.bcoo_reshape(a3, new_sizes=(6, 10))
    full = np.arange(6, dtype=np.float32).reshape(2, 3)
    same_buffers(ks.bcoo_extract(a, full), js.bcoo_extract(b, full))
    idx = jjnp.asarray(a.indices)
    np.testing.assert_allclose(
        ks.bcoo_dot_general_sampled(M, M.T, np.asarray(idx),
                                    dimension_numbers=(((1,), (0,)), ((), ()))),
        js.bcoo_dot_general_sampled(M, M.T, idx, dimension_numbers=(((1,), (0,)), ((), ()))))


def test_concatenate_layout_products_and_scipy_as_jax():
    x = (RNG.rand(2, 3, 4) > 0.5).astype(np.float32)
    for d in (0, 1):
        same_buffers(
            ks.bcoo_concatenate([ks.BCOO.fromdense(M), ks.BCOO.fromdense(2 * M, nse=4)],
                                dimension=d),
            js.bcoo_concatenate([js.BCOO.fromdense(M), js.BCOO.fromdense(2 * M, nse=4)],
                                dimension=d))
    same_buffers(ks.BCOO.fromdense(x, n_batch=1).update_layout(n_batch=0),
                 js.BCOO.fromdense(x, n_batch=1).update_layout(n_batch=0))
    product = ks.bcoo_multiply_sparse(ks.BCOO.fromdense(x, n_batch=1), ks.BCOO.fromdense(2 * x))
    np.testing.assert_array_equal(product.todense(), 2 * x * x)
    per_batch = np.count_nonzero(x.reshape(2, -1), axis=1).max()
    # the batches fold into the indices first: nse is (2 * per_batch) * (rhs nse)
    assert (product.n_batch, product.nse) == (0, 2 * per_batch * np.count_nonzero(x))
    same_buffers(ks.BCOO.fromdense(M, nse=4) * ks.BCOO.fromdense(2 * M),
                 js.BCOO.fromdense(M, nse=4) * js.BCOO.fromdense(2 * M))
    scipy_sparse = pytest.importorskip("scipy.sparse")
    s = scipy_sparse.random(4, 5, density=0.4, random_state=0, dtype=np.float32)
    same_buffers(ks.BCOO.from_scipy_sparse(s), js.BCOO.from_scipy_sparse(s))


def test_eye_empty_random_as_jax():
    for N, m, k, kw in [(3, 4, 1, {}), (4, 3, -2, {}), (2, 2, 5, {}), (1, 1, 0, {}),
                        (3, 4, 1, {"n_batch": 1}), (4, 3, -2, {"n_batch": 1})]:
        same_buffers(ks.eye(N, m, k, **kw), js.eye(N, m, k, **kw))
    np.testing.assert_array_equal(ks.eye(3, sparse_format="bcsr").todense(), np.eye(3))
    for kw in [{}, {"n_batch": 1, "nse": 2}, {"n_dense": 1}]:
        same_buffers(ks.empty((2, 3), **kw), js.empty((2, 3), **kw))
    with pytest.raises(ValueError, match="sparse_format='csc' not recognized"):
        ks.empty((2, 2), sparse_format="csc")
    for kw in [{"n_batch": 1}, {"n_dense": 1, "nse": 2, "unique_indices": False,
                                "sorted_indices": True}]:
        mine = ks.random_bcoo(kiln.random.PRNGKey(0), (3, 4), **kw)
        theirs = js.random_bcoo(jax.random.PRNGKey(0), (3, 4), dtype=np.float32, **kw)
        same_buffers(mine, theirs)


def test_jit_grad_and_vmap():
    a, b = ks.BCOO.fromdense(M), js.BCOO.fromdense(M)
    x = np.arange(3, dtype=np.float32) + 1
    np.testing.assert_allclose(kiln.jit(lambda A, x: A @ x)(a, x), b @ x)
    out = kiln.jit(lambda m: ks.BCOO.fromdense(m, nse=4))(M)
    same_buffers(out, js.BCOO.fromdense(M, nse=4))
    np.testing.assert_allclose(kiln.jit(lambda A: (A.T * 2).sum_duplicates(nse=3))(a).todense(),
                               (b.T * 2).todense())

    def mine(d, x):
        return ((ks.BCOO((d, a.indices), shape=a.shape) @ x) ** 2).sum()

    def theirs(d, x):
        return ((js.BCOO((d, b.indices), shape=b.shape) @ x) ** 2).sum()
    want = jax.grad(theirs, argnums=(0, 1))(b.data, x)
    for got in (kiln.grad(mine, argnums=(0, 1))(a.data, x),
                kiln.jit(kiln.grad(mine, argnums=(0, 1)))(a.data, x)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_allclose(
        kiln.grad(lambda m: (ks.BCOO.fromdense(m, nse=4) @ x).sum())(M),
        jax.grad(lambda m: (js.BCOO.fromdense(m, nse=4) @ x).sum())(M))
    # padding (out-of-bounds indices) gets a zero derivative
    padded = ks.BCOO.fromdense(M, nse=5)
    g = kiln.grad(lambda d: ks.BCOO((d, padded.indices), shape=M.shape).todense().sum())(
        padded.data)
    np.testing.assert_array_equal(g, [1, 1, 1, 0, 0])
    stack = np.stack([M, 2 * M, 0 * M])
    ab, bb = ks.BCOO.fromdense(stack, n_batch=1), js.BCOO.fromdense(stack, n_batch=1)
    np.testing.assert_allclose(kiln.vmap(lambda s, x: s @ x, in_axes=(0, None))(ab, x),
                               jax.vmap(lambda s, x: s @ x, in_axes=(0, None))(bb, x))
    same_buffers(kiln.vmap(lambda m: ks.BCOO.fromdense(m, nse=3))(stack),
                 jax.vmap(lambda m: js.BCOO.fromdense(m, nse=3))(stack))


@pytest.mark.parametrize("backend", ["reference", "pjrt"])
def test_other_backends(backend):
    if backend == "pjrt":
        from kiln.compiler.backends.pjrt import plugins
        if not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()):
            pytest.skip("xla-cpu-pjrt is not installed (pip install -e '.[pjrt]')")
    a = ks.BCOO.fromdense(M)
    x = np.arange(3, dtype=np.float32)

    def f(a, x):
        twice = ks.BCOO.fromdense(a.todense() * 2, nse=3).sum_duplicates(nse=4)
        return a.T @ (a @ x) + twice.todense().sum(0)
    np.testing.assert_allclose(kiln.jit(f, backend=backend)(a, x),
                               M.T @ (M @ x) + 2 * M.sum(0))


def test_vmap_maps_batch_dimensions_only():
    stack = np.stack([M, 2 * M, 0 * M, M])
    a2 = ks.BCOO.fromdense(np.stack([stack, stack]), n_batch=2)
    want = np.stack([stack, stack])
    np.testing.assert_array_equal(kiln.vmap(kiln.vmap(lambda a: a.todense()))(a2), want)
    np.testing.assert_array_equal(kiln.vmap(lambda a: a.todense(), in_axes=1)(a2),
                                  want.transpose(1, 0, 2, 3))
    message = "a mapped axis .* must be a batch dimension of the BCOO array"
    with pytest.raises(ValueError, match=message + ", and this array has n_batch=0"):
        kiln.vmap(lambda a: a.todense())(ks.BCOO.fromdense(M))
    with pytest.raises(ValueError, match=message + ", and this array has n_batch=1"):
        kiln.vmap(lambda a: a.todense(), in_axes=1)(ks.BCOO.fromdense(stack, n_batch=1))
    with pytest.raises(ValueError, match=message):
        kiln.vmap(lambda m: ks.BCOO.fromdense(m, nse=3), out_axes=1)(stack)


def test_fromdense_needs_nse_under_jit():
    with pytest.raises(TypeError, match="bcoo_fromdense: the nse argument .*must be a "
                                        "concrete integer") as err:
        kiln.jit(lambda m: ks.BCOO.fromdense(m))(M)
    assert "Pass nse=" in str(err.value)


def test_errors_name_the_problem():
    a = ks.BCOO.fromdense(X3)
    with pytest.raises(NotImplementedError, match="mixes batch, sparse and dense"):
        ks.BCOO.fromdense(X3, n_dense=1).T
    with pytest.raises(ValueError, match="data of shape \\(2,\\) does not match"):
        ks.BCOO((np.ones(2), np.zeros((3, 2), np.int32)), shape=(3, 3))
    with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
        ks.bcoo_dot_general(a, np.ones((4, 2)), dimension_numbers=(((2,), (0,)), ((), ())))
    with pytest.raises(NotImplementedError, match="Addition between sparse matrices of "
                                                  "different shapes"):
        a + ks.BCOO.fromdense(M)
    with pytest.raises(NotImplementedError, match="non-positive exponent"):
        a ** 0
    with pytest.raises(NotImplementedError, match="indexing a BCOO array .* not implemented"):
        a[0]
    with pytest.raises(TypeError, match="sin requires ndarray or scalar arguments"):
        knp.sin(a)


def f_mlp(a, w):
    return knp.tanh(a) @ w * 2 - 1


def g_mlp(a, w):
    return jjnp.tanh(a) @ w * 2 - 1


def f_mix(a, b):
    return (-a + a * b).sum(0)


def g_mix(a, b):
    return (-a + a * b).sum(0)


def f_abs(a):
    return knp.abs(knp.sin(a.T)) * 3.0 / 2.0


def g_abs(a):
    return jjnp.abs(jjnp.sin(a.T)) * 3.0 / 2.0


def f_total(a):
    return a.sum()


def g_total(a):
    return a.sum()


def f_cos(a):
    return knp.cos(a)


def g_cos(a):
    return jjnp.cos(a)


W = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("mine,theirs,args", [
    (f_mlp, g_mlp, ("A", W)), (f_mix, g_mix, ("A", M)), (f_mix, g_mix, ("A", "A")),
    (f_abs, g_abs, ("A",)), (f_total, g_total, ("A",))])
def test_sparsify_as_jax(mine, theirs, args):
    def run(sp, f):
        a = sp.BCOO.fromdense(M)
        return sp.sparsify(f)(*[a if isinstance(x, str) else x for x in args])
    got, want = run(ks, mine), run(js, theirs)
    assert isinstance(got, ks.BCOO) == isinstance(want, js.BCOO)
    if isinstance(got, ks.BCOO):
        assert (got.nse, got.shape) == (want.nse, want.shape)
    np.testing.assert_allclose(dense(got), dense(want), rtol=1e-6)
    a = ks.BCOO.fromdense(M)
    jitted = kiln.jit(ks.sparsify(mine))(*[a if isinstance(x, str) else x for x in args])
    np.testing.assert_allclose(dense(jitted), dense(want), rtol=1e-6)


def test_sparsify_under_grad_and_vmap():
    a = ks.BCOO.fromdense(M)

    def h(w):
        return ks.sparsify(lambda s, w: (knp.sin(s) @ w).sum())(a, w)
    want = np.sin(M).sum(0)
    np.testing.assert_allclose(kiln.grad(h)(np.ones(3, np.float32)), want, rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(h))(np.ones(3, np.float32)), want, rtol=1e-6)
    ws = RNG.rand(4, 3).astype(np.float32)
    np.testing.assert_allclose(kiln.vmap(lambda w: ks.sparsify(lambda s, w: s @ w)(a, w))(ws),
                               ws @ M.T, rtol=1e-6)
    stack = ks.BCOO.fromdense(np.stack([M, 3 * M]), n_batch=1)
    out = ks.sparsify(lambda s: (s * 2).sum(2))(stack)
    np.testing.assert_allclose(out.todense(), np.stack([M, 3 * M]).sum(2) * 2)


def test_sparsify_refuses_dense_output_and_unknown_primitives():
    a = ks.BCOO.fromdense(M)
    with pytest.raises(NotImplementedError) as mine:
        ks.sparsify(f_cos)(a)
    with pytest.raises(NotImplementedError) as theirs:
        js.sparsify(g_cos)(js.BCOO.fromdense(M))
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(NotImplementedError, match="sparse rule for cumsum is not implemented"):
        ks.sparsify(lambda x: knp.cumsum(x, axis=0))(a)
    with pytest.raises(NotImplementedError, match="Subtraction between sparse and dense"):
        ks.sparsify(lambda x, y: x - y)(a, M)


def test_sparse_grad_and_value_and_grad():
    a, b = ks.BCOO.fromdense(M), js.BCOO.fromdense(M)
    ga, gw = ks.grad(lambda s, w: (s @ w).sum(), argnums=(0, 1))(a, W)
    ha, hw = js.grad(lambda s, w: (s @ w).sum(), argnums=(0, 1))(b, W)
    same_buffers(ga, ha)
    np.testing.assert_allclose(gw, hw)
    (v1, g1), (v2, g2) = (ks.value_and_grad(lambda s: (s @ W).sum())(a),
                          js.value_and_grad(lambda s: (s @ W).sum())(b))
    np.testing.assert_allclose(v1, v2)
    same_buffers(g1, g2)
    np.testing.assert_array_equal(ks.todense(a), M)
    np.testing.assert_array_equal(ks.todense(ks.BCSR.fromdense(M)), M)
    np.testing.assert_array_equal(ks.todense(M), M)
    g, aux = ks.grad(lambda s: ((s @ W).sum(), 7), has_aux=True)(a)
    assert aux == 7
    same_buffers(g, g1)
    (v, aux), (gs, gw) = ks.value_and_grad(lambda s, w: ((s @ w).sum(), 5), argnums=(0, 1),
                                          has_aux=True)(a, W)
    assert aux == 5
    np.testing.assert_allclose(v, v2)
    same_buffers(gs, g2)
    np.testing.assert_allclose(gw, hw)


@pytest.mark.parametrize("nb,nd", [(0, 0), (0, 1), (1, 0)])
def test_bcsr_as_jax(nb, nd):
    x = X3[:2] if nb else X3[0]
    if nd:
        x = X3
    a = ks.BCSR.fromdense(x, n_batch=nb, n_dense=nd)
    b = js.BCSR.fromdense(x, n_batch=nb, n_dense=nd)
    same_buffers(a, b, ("data", "indices", "indptr"))
    np.testing.assert_array_equal(a.todense(), x)
    np.testing.assert_array_equal(ks.bcsr_todense(a), x)
    same_buffers(a.to_bcoo(), b.to_bcoo())
    same_buffers(ks.BCSR.from_bcoo(a.to_bcoo()), js.BCSR.from_bcoo(b.to_bcoo()),
                 ("data", "indices", "indptr"))
    if nb == nd == 0:
        w = RNG.rand(5, 3).astype(np.float32)
        np.testing.assert_allclose(a @ w, x @ w, rtol=1e-6)
        np.testing.assert_allclose(kiln.jit(lambda s, w: s @ w)(a, w), x @ w, rtol=1e-6)
        same_buffers(ks.BCSR.fromdense(x, nse=12), js.BCSR.fromdense(x, nse=12),
                     ("data", "indices", "indptr"))
        with pytest.raises(NotImplementedError, match="not implemented"):
            a.T
    if nb:
        with pytest.raises(ValueError, match="kiln.vmap cannot map a BCSR array"):
            kiln.vmap(lambda s: s.todense())(a)
        np.testing.assert_array_equal(kiln.jit(lambda s: s.todense())(a), x)
