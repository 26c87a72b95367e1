"""program.plan: whole programs (matmuls, sorts, control flow whose regions are plans of
their own) as one plan of device steps, run on the host emulation (emulate.run_program: the
CUDA executable's Program over NumPy buffers, GEMM by NumPy) against the reference backend."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax, staging
from kiln.compiler import passes
from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import emulate, program
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E

import cuda_programs

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")


def while_sum(x):
    return lax.while_loop(lambda c: jnp.max(jnp.abs(c)) < 50.0, lambda c: c * 2.0 - 0.5, x)


def scan_rows(x):
    def body(carry, row):
        return carry * 0.5 + row, jnp.sum(carry * row)
    return lax.scan(body, jnp.ones(x.shape[1:], x.dtype), x, reverse=True)


def sort_pairs(k, v):
    return lax.sort((k, v), dimension=0, num_keys=1), jnp.sort(v, axis=1)


def _staged(fn, args):
    """(the SSA, the fused SSA, its inputs: the argument leaves, then the closed-over arrays)."""
    staged = staging.stage_call(fn, args, {}, staging.StaticArgs(fn, (), ()))[0]
    inputs = kiln.tree_util.tree_leaves(args) + [np.asarray(x) for x in staged.extra]
    return staged.fn, passes.run_pipeline(staged.fn, pipeline=passes.LLVM_PIPELINE), inputs


def _kinds(plan):
    """Every step's kind, regions' plans included (depth first)."""
    found = []
    for step in plan.steps:
        found.append(step.kind)
        for region in program.regions(step):
            found += _kinds(region)
    return found


rng = np.random.default_rng(1)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
MLP = [p for p in cuda_programs.programs() if p[0] == "mlp_step"][0]
CASES = [
    ("mlp_step", MLP[1], MLP[2], {"gemm", "kernel"}),
    ("while_sum", while_sum, (f32(3, 4),), {"while_loop", "kernel"}),
    ("while_sum_size1", while_sum, (f32(1, 1),), {"while_loop", "kernel"}),
    ("scan", scan_rows, (f32(5, 3),), {"scan", "kernel"}),
    ("scan_empty_rows", scan_rows, (f32(4, 0),), {"scan"}),
    ("sort", sort_pairs, (rng.integers(0, 3, (6, 2)).astype(np.int32), f32(6, 2)),
     {"per_primitive"}),
    ("whole", cuda_programs.whole, (f32(4, 7), f32(7, 2)),
     {"per_primitive", "while_loop", "scan", "gemm", "kernel"}),
    ("nested", cuda_programs.nested, (f32(3, 5), np.float32(0.5)),
     {"cond", "scan", "while_loop", "kernel"}),
]


@pytest.mark.parametrize("name, fn, args, kinds", CASES, ids=[c[0] for c in CASES])
def test_whole_programs_run_their_plan_on_the_emulation(name, fn, args, kinds):
    ssa, fused, inputs = _staged(fn, args)
    plan = program.plan(fused)
    assert kinds <= set(_kinds(plan)), _kinds(plan)
    got = emulate.run_program(fused, inputs, blocks=2, threads=32)
    want = reference.compile_function(ssa)(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=name)


def test_control_flow_carries_its_regions_plans():
    """A while loop's predicate (a reduction) and body are plans with kernels of their own,
    a scan's body too; program.kernels lists them, regions included."""
    _, fused, _ = _staged(cuda_programs.whole, (f32(4, 7), f32(7, 2)))
    plan = program.plan(fused)
    (loop,) = [s for s in plan.steps if s.kind == "while_loop"]
    assert loop.speculate and loop.num_consts == 0
    assert [s.kind for s in loop.test.steps] == ["kernel"]
    assert "kiln_reduce" in loop.test.steps[0].kernel.source or \
        "__shfl_down_sync" in loop.test.steps[0].kernel.source
    (scan,) = [s for s in plan.steps if s.kind == "scan"]
    assert scan.length == 4 and scan.types == (((4, 7), "float32"),)
    inner = [k for s in (loop.test, loop.body, scan.body) for k in program.kernels(s)]
    assert inner and set(k.name for k in inner) <= set(k.name for k in program.kernels(plan))
    (gemm,) = [s for s in plan.steps if s.kind == "gemm"]
    assert gemm.sizes == (1, 1, 7, 2) and not gemm.batched and gemm.shape == (2,)
    sort = [s for s in plan.steps if s.kind == "per_primitive"]
    assert {s.primitive for s in sort} == {"sort"}


def test_the_executable_prints_its_plan(monkeypatch):
    from kiln.compiler.backends.cuda import device as D
    monkeypatch.setenv(D.EMULATE, "1")
    args = (f32(4, 7), f32(7, 2))
    f = kiln.jit(cuda_programs.whole, backend="cuda")
    f(*args)
    text = f._cache.values()[0].executable.as_text("steps")
    lines = text.splitlines()
    assert any(line.startswith("gemm: ") for line in lines)
    assert any(line.startswith("per_primitive sort: ") for line in lines)
    loop = next(k for k, line in enumerate(lines) if line.startswith("while_loop: "))
    assert lines[loop + 1].startswith("    kernel kiln_")   # the predicate's reduction


def test_the_text_of_a_whole_program_has_its_regions_kernels():
    _, fused, _ = _staged(cuda_programs.whole, (f32(4, 7), f32(7, 2)))
    text = program.text(fused, "cuda")
    assert text.count("__global__ void") == len(program.kernels(program.plan(fused)))
    assert "= while_loop(...): a host-driven loop" in text and "= sort(...): its NumPy" in text
    loop = text.index("= while_loop(...)")
    assert "__shfl_down_sync" in text[loop:text.index("= scan(...)")]   # the predicate's sum


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([0, 1, 2]), st.sampled_from([0, 1, 3]), st.sampled_from([0, 1, 4]),
       st.sampled_from([1, 2]), st.booleans(), st.permutations([0, 1, 2]),
       st.permutations([0, 1, 2]), st.sampled_from(["float32", "float64", "int32"]))
def test_gemm_steps_match_the_reference(b, m, k, n, batched, lhs_order, rhs_order, dtype):
    """dot_general planned as one GEMM step (batch, free and contracted axes in any order;
    sizes 0 and 1) against the reference backend, on the emulated layer's NumPy GEMM."""
    dtype = np.dtype(dtype)
    lhs_axes, rhs_axes = ("b", "m", "k"), ("b", "k", "n")
    if not batched:
        lhs_order = [d for d in lhs_order if d] or [1, 2]
        rhs_order = [d for d in rhs_order if d] or [1, 2]
    sizes = {"b": b, "m": m, "k": k, "n": n}
    lhs = [lhs_axes[d] for d in lhs_order]
    rhs = [rhs_axes[d] for d in rhs_order]
    dims = (((lhs.index("k"),), (rhs.index("k"),)),
            (((lhs.index("b"),), (rhs.index("b"),)) if batched else ((), ())))
    builder = Builder("product")
    with builder:
        x = builder.new_input(ShapedArray(tuple(sizes[a] for a in lhs), dtype), "x")
        y = builder.new_input(ShapedArray(tuple(sizes[a] for a in rhs), dtype), "y")
        fn = builder.build([E.dot_general(x, y, dimension_numbers=dims)])
    (gemm,) = program.steps(fn)
    assert gemm.kind == "gemm" and gemm.batched == batched
    rng = np.random.default_rng(b * 100 + m * 10 + k)
    data = [(rng.standard_normal(v.aval.shape) * 4).astype(dtype) for v in fn.invars]
    (got,) = emulate.run_program(fn, data)
    (want,) = reference.compile_function(fn)(*data)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-4)
