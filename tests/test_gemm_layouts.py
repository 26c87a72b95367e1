"""dot_general layouts that kiln's matrix-product kernels take without the fused loop nest
(lower_linalg.plan_blas): free axes on both sides of an operand's contraction
(`einsum('ikj,kn->ijn')`) loop over products read in place; a batch axis after an operand's
rows or columns (no unit stride in its matrices: vmap with the batch last) is read through its
strides by gemm.py's loop nest, and copied once into the workspace for the packed kernel and,
in complex products, for BLAS (lower_linalg.staged). Before, these took the fused loop nest
(seconds for 64 products of 256^3). A transpose that only a dot_general reads and that
reorders its free axes (vmap(matmul, in_axes=(2, None))) is read in place by the product
(lower_linalg.read_transposes) instead of copied. Each layout is checked against the reference
backend with hypothesis over sizes (0 and 1 included) and every float dtype (complex64 and
complex128 included); the plans are checked. test_llvm_gemm.py's child process for the x86-64
baseline, x86-64-v3 (AVX2) and znver1 targets runs `BASELINE_LAYOUTS` and `BASELINE_VIEWS`
too.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler.backends import reference
from kiln.compiler.backends.llvm import compile_function, lower_linalg
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.ssa import Eqn, Function, Var
from kiln.compiler.primitives import PRIMITIVES

DTYPES = [np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)]
# (lhs axes, rhs axes): b a batch axis (on both), k contracted, other letters free
LAYOUTS = [
    ("ikb", "knb"),     # vmap(matmul, in_axes=(2, 2)): the batch last in both
    ("ikb", "bkn"),     # in_axes=(2, 0)
    ("bik", "knb"),     # in_axes=(0, 2)
    ("kib", "nkb"),     # both stored transposed, the batch last
    ("ikj", "kn"),      # the lhs's free axes on both sides of its contraction
    ("ik", "nkp"),      # the rhs's
    ("jki", "kn"),      # the lhs's rows after its contraction, unit stride
    ("ibk", "bkn"),     # the batch between rows and contraction (read in place before too)
]
SIZES = st.sampled_from([0, 1, 2, 3, 5, 17, 33])


def layout_fn(lhs, rhs, sizes, dtype):
    """The one-equation function dot_general(A, B) of `lhs`, `rhs` (axis letters) at `sizes`."""
    lc, rc = (lhs.index("k"),), (rhs.index("k"),)
    lb, rb = ((lhs.index("b"),), (rhs.index("b"),)) if "b" in lhs and "b" in rhs else ((), ())
    dims = ((lc, rc), (lb, rb))
    a = Var("a", ShapedArray(tuple(sizes[c] for c in lhs), dtype))
    b = Var("b", ShapedArray(tuple(sizes[c] for c in rhs), dtype))
    out = Var("out", PRIMITIVES["dot_general"].abstract_eval(a.aval, b.aval,
                                                            dimension_numbers=dims))
    return Function("f", [a, b], [Eqn([out], PRIMITIVES["dot_general"], [a, b],
                                      {"dimension_numbers": dims})], [out])


def check(fn, rng, tol):
    args = []
    for v in fn.invars:
        x = rng.uniform(-1, 1, v.aval.shape)
        if v.aval.dtype.kind == "c":
            x = x + 1j * rng.uniform(-1, 1, v.aval.shape)
        args.append(x.astype(v.aval.dtype))
    (got,), (want,) = compile_function(fn)(*args), reference.compile_function(fn)(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 40)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(LAYOUTS), SIZES, SIZES, SIZES, SIZES, SIZES, SIZES,
       st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_layouts_match_reference(layout, i, j, k, n, p, batch, dtype, seed):
    sizes = dict(i=i, j=j, k=k, n=n, p=p, b=batch)
    fn = layout_fn(*layout, sizes, dtype)
    tol = 2e-5 if dtype in (DTYPES[0], DTYPES[2]) else 1e-13
    check(fn, np.random.default_rng(seed), tol)


@pytest.mark.parametrize("lhs, rhs", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_run_the_kernels(lhs, rhs, dtype):
    """At 64 x 40 x 48 (x 3 over the batch or the loop), above the loop nest's threshold: the
    packed kernel or gemm.py's loop nest (BLAS for complex products), never the fused loop
    nest; operands with no unit stride copied for the packed kernel or BLAS (the workspace
    holds them), the others read in place."""
    sizes = dict(i=64, j=3, k=40, n=48, p=3, b=3)
    fn = layout_fn(lhs, rhs, sizes, np.dtype(dtype))
    la, ra = (v.aval for v in fn.invars)
    eqn = fn.eqns[0]
    plan = lower_linalg.plan_blas(la, ra, fn.outvars[0].aval, eqn.params["dimension_numbers"])
    assert plan is not None and plan.kind == "gemm"
    text = compile_function(fn).as_text("llvm-unoptimized")
    if np.dtype(dtype).kind == "c":
        assert f"kiln_{'c' if dtype == np.complex64 else 'z'}gemm" in text
    else:
        assert f"kiln_gemm_{np.dtype(dtype).name}" in text or "p.head" in text
    strided = [isinstance(x, lower_linalg.Strided) for x in (plan.lhs, plan.rhs)]
    assert strided == ["b" in lhs and lhs[-1] == "b", "b" in rhs and rhs[-1] == "b"]
    if lower_linalg.staged(plan, np.dtype(dtype)):
        copies = sum(x.size for x, s in zip((la, ra), strided) if s) * np.dtype(dtype).itemsize
        assert copies <= lower_linalg._scratch_bytes(eqn) < copies + 128
    else:
        assert lower_linalg._scratch_bytes(eqn) == 0
    check(fn, np.random.default_rng(0), 1e-4 if dtype in (DTYPES[0], DTYPES[2]) else 1e-12)


def test_rows_choose_the_unit_stride_run():
    """lhs (i, k, b) @ rhs (k, n): the rows are b (unit stride: each product reads whole cache
    lines of A), looping over i, not i (stride k*b) looping over b."""
    fn = layout_fn("ikb", "kn", dict(i=256, k=64, b=32, n=64), np.dtype(np.float32))
    plan = lower_linalg.plan_blas(*(v.aval for v in fn.invars), fn.outvars[0].aval,
                                  fn.eqns[0].params["dimension_numbers"])
    assert (plan.m, plan.n, plan.k, plan.batch) == (32, 64, 64, (256,))
    assert plan.ldc == 64 and plan.lhs.trans


# Transposed operands: (lhs as stored, lhs as the product reads it, the same for the rhs)
VIEWS = [
    ("ikb", "bik", "kn", "kn"),      # vmap(matmul, in_axes=(2, None)): the batch moved first
    ("ikb", "bik", "knb", "bkn"),    # both transposed, the batch first
    ("kbi", "bik", "nk", "kn"),      # the lhs's contraction and rows swapped as well
    ("ik", "ik", "nkp", "kpn"),      # the rhs's free axes reordered
    ("kib", "bik", "kn", "kn"),      # no unit stride in the lhs's matrices: staged
]


def view_fn(lhs_stored, lhs, rhs_stored, rhs, sizes, dtype):
    """layout_fn(lhs, rhs) with each operand a transpose of one stored as `*_stored`."""
    fn = layout_fn(lhs, rhs, sizes, dtype)
    invars, eqns = [], []
    for stored, order, v in ((lhs_stored, lhs, fn.invars[0]), (rhs_stored, rhs, fn.invars[1])):
        if stored == order:
            invars.append(v)
            continue
        x = Var(v.name + "_stored", ShapedArray(tuple(sizes[c] for c in stored), dtype))
        invars.append(x)
        eqns.append(Eqn([v], PRIMITIVES["transpose"], [x],
                        {"permutation": tuple(stored.index(c) for c in order)}))
    return Function("f", invars, eqns + fn.eqns, fn.outvars)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(VIEWS), SIZES, SIZES, SIZES, SIZES, SIZES, SIZES,
       st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_transposes_read_in_place_match_reference(view, i, j, k, n, p, batch, dtype, seed):
    fn = view_fn(*view, dict(i=i, j=j, k=k, n=n, p=p, b=batch), dtype)
    tol = 2e-5 if dtype in (DTYPES[0], DTYPES[2]) else 1e-13
    check(fn, np.random.default_rng(seed), tol)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("dtype", [DTYPES[0], DTYPES[3]])
def test_transposes_join_the_product(view, dtype):
    """Above the loop nest's threshold each transpose joins its product (one fusion, no
    transposed copy); the product reads the transpose's operand through its strides, in
    place, or copies it once in the kernel's order (`staged`: the workspace holds it).
    A transpose something else reads too, or that the function returns, stays."""
    sizes = dict(i=64, j=3, k=40, n=48, p=3, b=3)
    fn = view_fn(*view, sizes, dtype)
    joined = lower_linalg.read_transposes(fn)
    assert [e.prim.name for e in joined.eqns] == ["fusion"]
    eqn = joined.eqns[0]
    dot, sides = lower_linalg.through_views(eqn.params["body"])
    plan = lower_linalg._view_plan(eqn.params["body"])
    assert plan.kind == "gemm" and [s is not None for _, s in sides] == \
        [view[0] != view[1], view[2] != view[3]]
    copied = view in (VIEWS[1], VIEWS[3])   # no unit stride in a matrix
    assert lower_linalg.staged(plan, dtype) == copied
    assert (lower_linalg._fusion_scratch(eqn) > 0) == copied
    check(fn, np.random.default_rng(1), 1e-4 if dtype == DTYPES[0] else 1e-12)
    t = fn.eqns[0].outvars[0]
    returned = Function("g", fn.invars, fn.eqns, fn.outvars + [t])
    assert fn.eqns[0] in lower_linalg.read_transposes(returned).eqns
    args = [np.ones(v.aval.shape, dtype) for v in fn.invars]
    (got, got_t), (want, want_t) = compile_function(returned)(*args), \
        reference.compile_function(returned)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(got_t, want_t)


def test_donated_operand_of_a_joined_transpose():
    """A donated input read through a joined transpose: the product never writes over it,
    and a disk cache hit plans the same `held` outputs as the compilation (executable._held
    plans the joined function)."""
    from kiln.compiler.backends.llvm import codegen, executable
    fn = view_fn(*VIEWS[0], dict(i=32, k=32, b=32, n=32), DTYPES[0])
    fresh = codegen.build_parts(fn, 1, executable.donation(fn, (0,)))[1].held
    assert executable._held(fn, (0,)) == fresh == {}
    x = np.random.default_rng(3).uniform(-1, 1, (32, 32, 32)).astype(np.float32)
    w = np.eye(32, dtype=np.float32)
    (got,) = compile_function(fn, donated=(0,))(x.copy(), w)
    np.testing.assert_allclose(got, x.transpose(2, 0, 1), rtol=1e-6)


def test_vmap_batch_last_lhs_reads_in_place():
    """vmap(matmul, in_axes=(2, None)) through kiln.jit: the packed kernel reads the lhs in
    place (no transpose kernel), against JAX."""
    jax = pytest.importorskip("jax")
    import kiln
    import kiln.numpy as jnp
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (40, 128, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (128, 300)).astype(np.float32)
    f = kiln.jit(kiln.vmap(jnp.matmul, in_axes=(2, None)))
    text = f.lower(x, w).compile().as_text("llvm-unoptimized")
    assert "define internal void @\"transpose" not in text and "kiln_gemm_float32" in text
    np.testing.assert_allclose(f(x, w), jax.vmap(jax.numpy.matmul, in_axes=(2, None))(x, w),
                               rtol=1e-4, atol=1e-4)


# (dtype, layout) pairs test_llvm_gemm.py's baseline-target child runs at BASELINE_SIZES
BASELINE_LAYOUTS = [(np.float32, LAYOUTS[0]), (np.float64, LAYOUTS[1]), (np.float32, LAYOUTS[3]),
                    (np.float64, LAYOUTS[4]), (np.float32, LAYOUTS[5]),
                    (np.complex64, LAYOUTS[0])]
BASELINE_VIEWS = [(np.float32, VIEWS[0]), (np.float64, VIEWS[4])]
BASELINE_SIZES = dict(i=67, j=3, k=300, n=45, p=2, b=3)
