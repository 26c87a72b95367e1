"""kiln's matrix products inside XLA's CPU plug-in (compiler/backends/pjrt/ffi_dot.py): 2-D
and batched f32/f64/complex64/complex128 products of modules jit compiles for a CPU plug-in are
custom calls of kiln's handlers, checked against the reference backend (hypothesis over shapes
with 0 and 1, the four operand forms, batch dimensions in every position, read in place
without a transpose, contractions split by rows summed by the handler without a transpose,
grad of an MLP and of batched products, vmap); a handler's refusal of
operands it was not built for is a clear error; KILN_PJRT_KILN_DOTS=0 and `as_text` keep
`stablehlo.dot_general`."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler.backends import stablehlo
from kiln.compiler.backends.pjrt import api, client as pjrt, plugins
from kiln.tree_util import tree_leaves

PLUGINS = plugins.discover()
pytestmark = [pytest.mark.usefixtures("x64_module"),
              pytest.mark.skipif(not PLUGINS, reason="no PJRT plug-in (pip install -e "
                                 "'.[pjrt]'; make test installs xla-cpu-pjrt)")]
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
FORMS = {"nn": lambda a, b: a @ b, "tn": lambda a, b: a.T @ b, "nt": lambda a, b: a @ b.T,
         "tt": lambda a, b: a.T @ b.T}
# the handler of each 2-D form: the operands' orders (ffi_dot.py), batch first
ORDERS = {"nn": "bij_bjk", "tn": "bji_bjk", "nt": "bij_bkj", "tt": "bji_bkj"}
SHORT = {"float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128"}
TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "complex64": 1e-4, "complex128": 1e-10}


def random(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.fixture(scope="module")
def client():
    device = kiln.devices("pjrt")[0]
    made = device.layer.info.client
    if not made.kiln_dots:
        pytest.skip(f"the {made.platform} plug-in does not take kiln's FFI handlers")
    return made


@pytest.fixture
def texts(monkeypatch):
    """The StableHLO texts jit compiles for PJRT devices in the test."""
    seen = []
    lower = stablehlo.lower_module

    def spy(*a, **k):
        module = lower(*a, **k)
        seen.append(module.text)
        return module
    monkeypatch.setattr(stablehlo, "lower_module", spy)
    return seen


def same(f, *args, rtol):
    got = [np.asarray(x) for x in tree_leaves(kiln.jit(f, backend="pjrt")(*args))]
    want = [np.asarray(x) for x in tree_leaves(kiln.jit(f, backend="reference")(*args))]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


@SETTINGS
@given(m=st.sampled_from([0, 1, 3, 17]), k=st.sampled_from([0, 1, 5, 33]),
       n=st.sampled_from([0, 1, 2, 19]), dtype=st.sampled_from(sorted(SHORT)),
       form=st.sampled_from(sorted(FORMS)))
def test_products_are_kilns_custom_calls(client, texts, m, k, n, dtype, form):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = random(rng, (k, m) if form[0] == "t" else (m, k), dtype)
    b = random(rng, (n, k) if form[1] == "t" else (k, n), dtype)
    same(FORMS[form], a, b, rtol=TOLERANCE[dtype])
    name = f"kiln_gemm_{SHORT[dtype]}_{ORDERS[form]}"
    assert f"stablehlo.custom_call @{name}(" in texts[-1]
    assert "dot_general" not in texts[-1] and "transpose" not in texts[-1]


def test_mlp_grad_and_vmap(client, texts):
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((6, 8), np.float32), rng.standard_normal(8, np.float32)),
              (rng.standard_normal((8, 3), np.float32), rng.standard_normal(3, np.float32))]
    x, y = rng.standard_normal((5, 6), np.float32), rng.standard_normal((5, 3), np.float32)

    def loss(params, x, y):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean((x - y) ** 2)

    same(kiln.grad(loss), params, x, y, rtol=1e-5)
    assert texts[-1].count("custom_call @kiln_gemm_f32_") == 5   # 2 forward, 3 backward
    same(kiln.vmap(lambda v, w: v @ w, in_axes=(0, None)), x, params[0][0], rtol=1e-5)
    same(kiln.vmap(lambda v, w: w.T @ v, in_axes=(1, None)), x.T, params[0][0], rtol=1e-5)


def test_opt_out_and_as_text_keep_dot_general(client, texts, monkeypatch):
    a = np.ones((4, 3), np.float32)
    f = kiln.jit(lambda a, b: a @ b, backend="pjrt")
    assert "custom_call" not in f.lower(a, a.T).as_text("stablehlo")
    monkeypatch.setenv("KILN_PJRT_KILN_DOTS", "0")
    same(lambda a, b: a @ b + 1.0, a, a.T, rtol=1e-6)
    assert "stablehlo.dot_general" in texts[-1] and "custom_call" not in texts[-1]


def test_handler_refuses_other_operands(client):
    """A module calling the f32 handler on f64 operands: XLA's execution raises the handler's
    error (through XLA_FFI_Error), the process goes on."""
    t = "tensor<2x2xf64>"
    text = (f"module @m {{\n  func.func public @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"    %0 = stablehlo.custom_call @kiln_gemm_f32_bij_bjk(%a, %b) "
            f"{{api_version = 4 : i32, backend_config = {{}}}} : ({t}, {t}) -> {t}\n"
            f"    return %0 : {t}\n  }}\n}}\n")
    x = np.ones((2, 2))
    exe = pjrt.Executable(client, text, [x, x], [x])
    with pytest.raises(api.PjrtError, match="kiln_gemm_f32_bij_bjk: expects two float32 "
                       "buffers"):
        exe(x, x)[0].to_host()
    exe.close()


def test_handler_refuses_batches_of_other_sizes(client):
    """Rank-3 operands whose first (batch) dimensions differ from the result's (and are
    not 1)."""
    a, b, c = "tensor<2x3x4xf32>", "tensor<3x4x5xf32>", "tensor<2x3x5xf32>"
    text = (f"module @m {{\n  func.func public @main(%a: {a}, %b: {b}) -> {c} {{\n"
            f"    %0 = stablehlo.custom_call @kiln_gemm_f32_bij_bjk(%a, %b) "
            f"{{api_version = 4 : i32, backend_config = {{}}}} : ({a}, {b}) -> {c}\n"
            f"    return %0 : {c}\n  }}\n}}\n")
    x, y = np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32)
    exe = pjrt.Executable(client, text, [x, y], [np.ones((2, 3, 5), np.float32)])
    with pytest.raises(api.PjrtError, match=r"all of rank 3 with C = einsum\('bij,bjk->bik', "
                       r"A, B\) \(A's or B's batch of 1 broadcast\), A and B of rank 3 and C "
                       r"of rank 2 with C = einsum\('bij,bjk->ik', A, B\), or all of rank 2 "
                       r"with C = einsum\('ij,jk->ik', A, B\)"):
        exe(x, y)[0].to_host()
    exe.close()
    # summed over the batch (a rank-2 result): the operands' batches must agree too
    c = "tensor<3x5xf32>"
    text = text.replace("tensor<2x3x5xf32>", c)
    exe = pjrt.Executable(client, text, [x, y], [np.ones((3, 5), np.float32)])
    with pytest.raises(api.PjrtError, match="kiln_gemm_f32_bij_bjk: expects two float32"):
        exe(x, y)[0].to_host()
    exe.close()


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("m, k, n", [(700, 96, 130), (130, 96, 700), (1000, 300, 65)])
def test_large_products_run_as_panels_of_the_pool(client, texts, form, m, k, n):
    """Past TASK_FLOPS multiply-adds the handler cuts C into panels of whole rows (more rows
    than columns) or whole columns, run on kiln's thread pool; the last panel is narrower."""
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if form[0] == "t" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if form[1] == "t" else (k, n)).astype(np.float32)
    same(FORMS[form], a, b, rtol=1e-4)
    assert "custom_call @kiln_gemm_f32_" + ORDERS[form] in texts[-1]


# einsum specs of batched products: the batch (b), row (i) and contracting (j) dimensions of
# the lhs and the batch, contracting and column (k) dimensions of the rhs in every order
BATCHED = [f"{''.join(lhs)},{''.join(rhs)}->bik" for lhs in itertools.permutations("bij")
           for rhs in itertools.permutations("bjk")]


def operands(spec, sizes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [random(rng, [sizes[c] for c in part], dtype)
            for part in spec.split("->")[0].split(",")]


@settings(SETTINGS, max_examples=16)
@given(spec=st.sampled_from(BATCHED), batch=st.sampled_from([0, 1, 3]),
       m=st.sampled_from([0, 1, 4, 17]), k=st.sampled_from([0, 1, 5, 33]),
       n=st.sampled_from([0, 1, 2, 19]), dtype=st.sampled_from(sorted(SHORT)))
def test_batched_products_are_kilns_custom_calls(client, texts, spec, batch, m, k, n, dtype):
    """Batch dimensions anywhere in the operands: one custom call on rank-3 operands read in
    place (the handler of the operands' orders), with no transpose before it; complex
    handlers read matrices with a unit stride (BLAS), so an operand whose batch dimension is
    its last is transposed first."""
    a, b = operands(spec, {"b": batch, "i": m, "j": k, "k": n}, dtype, batch + m + k + n)
    same(lambda a, b: jnp.einsum(spec, a, b), a, b, rtol=TOLERANCE[dtype])
    lo, ro = spec.split("->")[0].split(",")
    text = texts[-1]
    if dtype.startswith("complex") and "b" in (lo[-1], ro[-1]):
        assert "stablehlo.transpose" in text.split("custom_call")[0]
    else:
        assert f"stablehlo.custom_call @kiln_gemm_{SHORT[dtype]}_{lo}_{ro}(" in text
        assert "stablehlo.transpose" not in text
    assert "dot_general" not in text


@pytest.mark.parametrize("spec, sizes", [
    ("abij,abjk->abik", dict(a=2, b=3, i=4, j=5, k=6)),      # two batch dimensions
    ("sbd,de->sbe", dict(s=3, b=4, d=5, e=6)),               # rows over two dimensions
    ("ijk,kjl->il", dict(i=3, j=4, k=5, l=6)),               # two contracting dimensions
    ("bij,bjkl->bikl", dict(b=2, i=3, j=4, k=5, l=2)),       # columns over two dimensions
])
def test_products_of_several_dimensions(client, texts, spec, sizes):
    a, b = operands(spec, sizes, np.float32, 0)
    same(lambda a, b: jnp.einsum(spec, a, b), a, b, rtol=1e-5)
    assert "custom_call @kiln_gemm_f32_" in texts[-1] and "dot_general" not in texts[-1]


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("spec, sizes", [
    ("ij,bjk->ibk", dict(i=3, j=4, b=5, k=6)), ("ij,bjk->ibk", dict(i=3, j=4, b=0, k=6)),
    ("ij,bjk->ibk", dict(i=1, j=0, b=1, k=6)), ("ij,bcjk->ibck", dict(i=3, j=4, b=2, c=5, k=6)),
    ("ijb,jk->ibk", dict(i=3, j=4, b=5, k=6)), ("ijb,jk->ibk", dict(i=3, j=5, b=1, k=0)),
])
def test_free_dimensions_on_both_sides_read_as_a_batch(client, texts, spec, sizes, dtype):
    """An operand's free dimensions on both sides of its contraction (no batch dimensions):
    those before it are the handler's batch, the other operand broadcast over it (a batch of
    1); the rhs's result is transposed back, the lhs's is in the product's order (its rows
    after the contraction are each product's rows, stored transposed). No transpose before
    the call."""
    a, b = operands(spec, sizes, dtype, 1)
    same(lambda a, b: jnp.einsum(spec, a, b), a, b, rtol=TOLERANCE[dtype])
    before = texts[-1].split("custom_call")
    assert len(before) == 2 and "dot_general" not in texts[-1]
    assert "stablehlo.transpose" not in before[0]
    if spec.startswith("ijb"):
        assert "stablehlo.transpose" not in texts[-1] and f"_{SHORT[dtype]}_bji_bjk" in texts[-1]


@settings(SETTINGS, max_examples=12)
@given(spec=st.sampled_from(["aib,abn->in", "iab,ban->in", "aibc,abcn->in", "ijk,kjl->il"]),
       a=st.sampled_from([0, 1, 3]), i=st.sampled_from([0, 1, 4, 17]),
       b=st.sampled_from([0, 1, 5, 33]), n=st.sampled_from([0, 1, 19]),
       dtype=st.sampled_from(sorted(SHORT)))
def test_rows_between_contracting_dimensions_are_summed_in_place(client, texts, spec, a, i, b,
                                                                 n, dtype):
    """A contraction over several dimensions whose groups are not adjacent in an operand (its
    rows between two contracting dimensions, or the pairs in other orders): one contracting
    pair is the handler's batch, summed over (rank-3 operands, a rank-2 result), with no
    transpose; an empty sum or contraction gives zeros."""
    sizes = dict(a=a, i=i, b=b, n=n, c=2, j=a, k=b, l=n)
    x, y = operands(spec, sizes, dtype, 2)
    same(lambda x, y: jnp.einsum(spec, x, y), x, y, rtol=TOLERANCE[dtype])
    text = texts[-1]
    assert "custom_call" in text and "transpose" not in text and "dot_general" not in text
    assert "result_layouts = [dense<[1, 0]>" in text


def test_summed_products_run_as_panels_of_the_pool(client, texts):
    """A sum large enough to be cut into panels: each task adds every term to its panel."""
    x, y = operands("aib,abn->in", dict(a=3, i=700, b=96, n=130), np.float32, 3)
    same(lambda x, y: jnp.einsum("aib,abn->in", x, y), x, y, rtol=1e-4)
    assert "transpose" not in texts[-1]


def test_products_with_a_vector_keep_dot_general(client, texts):
    """A batched matrix-vector product has no column dimension: XLA's dot keeps it."""
    a, v = np.ones((3, 4, 5), np.float32), np.ones((3, 5), np.float32)
    same(lambda a, v: jnp.einsum("bij,bj->bi", a, v), a, v, rtol=1e-6)
    assert "dot_general" in texts[-1] and "custom_call" not in texts[-1]


def test_batched_grad_and_vmap(client, texts):
    rng = np.random.default_rng(1)
    q, w = rng.standard_normal((4, 6, 8), np.float32), rng.standard_normal((4, 8, 5), np.float32)

    def loss(q, w):
        return jnp.sum(jnp.tanh(jnp.einsum("bij,bjk->bik", q, w)) ** 2)

    same(kiln.grad(loss, argnums=(0, 1)), q, w, rtol=1e-4)
    assert texts[-1].count("custom_call @kiln_gemm_f32_") == 3   # forward, two cotangents
    assert "dot_general" not in texts[-1]
    for in_axes in [(0, 0), (1, 2), (2, 0), (1, None), (2, None), (None, 0), (None, 1)]:
        f = kiln.vmap(lambda x, y: x @ y, in_axes=in_axes)
        x = np.moveaxis(q, 0, in_axes[0]) if in_axes[0] is not None else q[0]
        y = np.moveaxis(w, 0, in_axes[1]) if in_axes[1] is not None else w[0]
        same(f, x, y, rtol=1e-5)
        assert "custom_call @kiln_gemm_f32_" in texts[-1] and "dot_general" not in texts[-1]
        # the batch is read in place (`(None, 0)`: as a batch of the handler over which the
        # lhs is broadcast), but where the lhs alone is batched after its contraction vmap's
        # rule moves it to the front first (its rows would be split: kernels read one group)
        moved = in_axes == (2, None)
        assert ("stablehlo.transpose" in texts[-1].split("custom_call")[0]) == moved, in_axes


def test_complex_grad_and_vmap(client, texts):
    """Complex products (BLAS's cgemm/zgemm in the handler): grad through a batched product
    and vmap with the batch in the middle of an operand, read in place."""
    rng = np.random.default_rng(2)
    q, w = random(rng, (3, 4, 6), "complex64"), random(rng, (3, 6, 5), "complex64")

    def loss(q, w):
        return jnp.sum(jnp.abs(jnp.einsum("bij,bjk->bik", q, w)) ** 2)

    same(kiln.grad(loss, argnums=(0, 1)), q, w, rtol=1e-4)
    assert texts[-1].count("custom_call @kiln_gemm_c64_") == 3 and "dot_general" not in texts[-1]
    x = np.moveaxis(q, 0, 1).astype(np.complex128)
    same(kiln.vmap(lambda x, y: x @ y, in_axes=(1, None)), x, w[0].astype(np.complex128),
         rtol=1e-10)
    assert "custom_call @kiln_gemm_c128_" in texts[-1]
    assert "stablehlo.transpose" not in texts[-1].split("custom_call")[0]   # (out_axes=0 after)
    assert "dot_general" not in texts[-1]


@pytest.mark.parametrize("batch, m, k, n", [(2, 700, 96, 130), (3, 130, 96, 700),
                                            (40, 40, 40, 40), (300, 32, 64, 64)])
def test_batches_run_as_tasks_of_the_pool(client, texts, batch, m, k, n):
    """A short batch of large products is cut into panels of each product; a long batch of
    small ones runs as tasks of several whole products (the last task takes fewer)."""
    a, b = operands("bij,bjk->bik", {"b": batch, "i": m, "j": k, "k": n}, np.float32, m)
    same(lambda a, b: a @ b, a, b, rtol=1e-4)
    assert "custom_call @kiln_gemm_f32_bij_bjk" in texts[-1]


@pytest.mark.parametrize("n", [2, 4])
def test_pmap_replicas_run_kilns_products(client, texts, n):
    """pmap's replicated module (one replica per CPU device, compiled by the same plug-in)
    has the custom calls too; each replica runs its own products, concurrently."""
    if len(kiln.devices("pjrt")) < n:
        pytest.skip(f"needs {n} PJRT devices, this process has {len(kiln.devices('pjrt'))}: "
                    f"run with KILN_NUM_CPU_DEVICES>={n} (the suite's conftest sets 8)")
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, 3, 40, 30)), rng.standard_normal((n, 3, 30, 20))
    w = rng.standard_normal((20, 7))

    def f(a, b):
        return kiln.lax.psum(jnp.einsum("bij,bjk->bik", a, b) @ w, "i")

    got = kiln.pmap(f, axis_name="i", backend="pjrt")(a, b)
    want = kiln.pmap(f, axis_name="i", backend="reference")(a, b)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-10)
    assert f"mhlo.num_replicas = {n}" in texts[-1]
    assert texts[-1].count("custom_call @kiln_gemm_f64_bij_bjk") == 2
    assert "dot_general" not in texts[-1]
