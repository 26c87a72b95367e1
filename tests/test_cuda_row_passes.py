"""Reductions with their readers in one kernel (cuda/reduce.py's passes over rows,
cuda/program.py's `units`): a softmax's max, then exp and sum, then divide, or a layer norm's
mean, centre, variance and scale, are one kernel of several passes over each row instead of a
kernel per fused group. Checked without a GPU: the kernels of hypothesis-drawn programs (shapes
with 0 and 1, any reduced axes, float32, float64 and int32) run on the host (emulate.py, all
cases of an example compiled in one host library) against the reference backend, and NVRTC
compiles them for sm_90 and sm_80."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln.compiler import passes
from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import device as D, emulate, nvrtc, program, reduce, source
from kiln.compiler.errors import BackendUnsupportedError
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E

HAVE_NVRTC, _ = nvrtc.available()
needs_cxx = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")


def _spread(r, shape, axes):
    """`r` (reduced over `axes`) back at `shape`, through a keepdims reshape as jnp does it."""
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    keepdims = tuple(1 if d in axes else n for d, n in enumerate(shape))
    r = E.reshape(r, new_sizes=keepdims, dimensions=None)
    r = E.reshape(r, new_sizes=tuple(shape[d] for d in kept), dimensions=None)
    return E.broadcast_in_dim(r, shape=shape, broadcast_dimensions=kept)


@st.composite
def row_programs(draw):
    """(SSA Function, inputs, reduced size): a softmax (floats; for int32 a max-centred sum of
    squares), a layer norm, or a chain of three reductions each reading the last one's
    result, over any axes of a rank 1-3 operand; maybe also returning a reduction's result."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32])))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 3, 70]), min_size=1, max_size=3)))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    kind = draw(st.sampled_from(["softmax", "norm", "chain"]))
    size = int(np.prod([shape[a] for a in axes]))
    b = Builder(kind)
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        y = b.new_input(ShapedArray(shape, dtype), "y")
        if kind == "softmax":
            first = E.bind("reduce_max", x, axes=axes)
            e = E.sub(x, _spread(first, shape, axes))
            e = E.exp(e) if dtype.kind == "f" else E.mul(e, e)
            second = E.bind("reduce_sum", e, axes=axes)
            out = E.div(e, _spread(second, shape, axes))
        elif kind == "norm":
            n = max(size, 1)
            first = E.div(E.bind("reduce_sum", x, axes=axes), n)
            d = E.sub(x, _spread(first, shape, axes))
            second = E.bind("reduce_sum", E.mul(d, d), axes=axes)
            scale = E.rsqrt(E.add(E.div(second, n), 1.0)) if dtype.kind == "f" else \
                E.add(second, 1)
            out = E.mul(E.mul(d, _spread(scale, shape, axes)), y)
        else:
            first = E.bind("reduce_sum", E.mul(x, y), axes=axes)
            t = E.max(E.mul(y, _spread(first, shape, axes)), x)
            second = E.bind("reduce_min", t, axes=axes)
            third = E.bind("reduce_max", E.sub(t, _spread(second, shape, axes)), axes=axes)
            out = E.add(E.mul(x, _spread(third, shape, axes)), t)
        results = [out] + ([second] if draw(st.booleans()) else []) + \
            ([first] if draw(st.booleans()) else [])
        fn = b.build(results)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "f":
        data = [rng.uniform(-2, 2, shape).astype(dtype) for _ in range(2)]
    else:
        data = [rng.integers(-4, 5, shape).astype(dtype) for _ in range(2)]
    return fn, data, size


def _splits(fused):
    """Whether the first reduction's rows are long and few enough to be split (reduce.plan):
    then passes are not merged (a block each would serialise a long row)."""
    first = next(e for e in fused.eqns if any(True for _ in reduce._reductions([e])))
    return reduce.plan(program._region(first)).parts > 1


@needs_cxx
@settings(max_examples=6, deadline=None)
@given(st.lists(row_programs(), min_size=4, max_size=4), st.sampled_from([1, 64]))
def test_passes_over_rows_match_the_reference(cases, threads):
    """Each program as the LLVM pipeline fused it, its groups merged: one kernel (unless its
    rows would split), run on the host with a grid smaller than the rows, 64 threads a block
    (warp shuffles and the broadcast between passes exchange values) or a thread per row's
    form; results against the reference backend."""
    planned = []
    for fn, data, size in cases:
        fused = passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE)
        steps = program.steps(fused)
        assert len(steps) == 1 or _splits(fused), [s.kernel.name for s in steps]
        planned.append(steps)
    emulate.load_all([s.kernel for steps in planned for s in steps])   # one host compile
    for (fn, data, size), steps in zip(cases, planned):
        env = {v.name: x for v, x in zip(fn.invars, data)}
        for step in steps:
            got = emulate.run(step.kernel, [env[v.name] if hasattr(v, "name") else
                                            np.asarray(v.value, v.aval.dtype)
                                            for v in step.inputs], blocks=2, threads=64)
            for v, x, shape in zip(step.outputs, got, step.kernel.out_shapes):
                env[v.name] = x.reshape(shape)
        fused = passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE)
        with np.errstate(all="ignore"):
            want = reference.compile_function(fn)(*data)
        for v, w in zip(fused.outvars, want):
            dtype = np.dtype(v.aval.dtype)
            if dtype.kind == "f":   # the sums' order differs from the reference's
                tolerance = 8 * max(1, size) * np.finfo(dtype).eps
                np.testing.assert_allclose(env[v.name], np.asarray(w), rtol=tolerance,
                                           atol=tolerance)
            else:
                np.testing.assert_array_equal(env[v.name], np.asarray(w))
        if HAVE_NVRTC:
            for step in steps:
                for arch in ("sm_90", "sm_80"):
                    assert f".target {arch}" in nvrtc.compile(step.kernel.source, "rows.cu",
                                                              arch)


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def layer_norm(x, gain):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    d = x - mean
    return d / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + 1e-5) * gain


@needs_cxx
def test_softmax_and_layer_norm_are_one_kernel_each(monkeypatch):
    """Through jit(f, backend="cuda") on the emulated device: a row softmax was three kernels
    (max; exp and sum; divide) and a layer norm five; each is now one, which writes only the
    result, and kiln.nn.softmax over columns (a thread per row, four kernels before) too."""
    monkeypatch.setenv(D.EMULATE, "1")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    gain = rng.standard_normal(70).astype(np.float32)
    for f, args, before in ((softmax, (x,), 3), (layer_norm, (x, gain), 5),
                            (lambda x: kiln.nn.softmax(x, axis=0), (x,), 4)):
        jitted = kiln.jit(f, backend="cuda")
        got = np.asarray(jitted(*args))
        np.testing.assert_allclose(got, np.asarray(kiln.jit(f)(*args)), rtol=2e-5, atol=2e-6)
        executable = jitted._cache.values()[0].executable
        fused = executable.function
        unmerged = [s for e in fused.eqns for s in program.equation_steps(e)]
        assert len(unmerged) == before and executable.steps() == ["kernel"]
        (kernel,) = executable.program.kernels()
        assert len(kernel.outputs) == 1 and kernel.launch in ("block_per_row",
                                                             "thread_per_row")


def test_what_cannot_share_a_kernel_stays_apart():
    """Passes over few long rows (a full sum, then each element minus the mean) would run in
    one block: they stay separate kernels, the sum split over many blocks with the mean in its
    kernel; a reduction over other axes starts a kernel of its own."""
    f32 = np.dtype(np.float32)

    def centre(also_max):
        b = Builder("centre")
        with b:
            x = b.new_input(ShapedArray((1, 8192), f32), "x")
            mean = E.div(E.bind("reduce_sum", x, axes=(1,)), 8192.0)
            centred = E.sub(x, _spread(mean, (1, 8192), (1,)))
            return b.build([centred] + ([E.bind("reduce_max", x, axes=(0,))] if also_max
                                        else []))
    with pytest.raises(BackendUnsupportedError, match="2 passes over 1 rows of 8192"):
        reduce.plan(centre(False))
    fused = passes.run_pipeline(centre(True), pipeline=passes.LLVM_PIPELINE)
    kernels = [s.kernel for s in program.steps(fused)]
    assert [k.launch for k in kernels] == ["block_per_part", "grid", "thread_per_row"], \
        [k.name for k in kernels]


@needs_cxx
def test_a_reduction_over_no_axes_writes_its_result_per_row():
    """reduce_sum over no axes of a rank-0 operand (`jnp.sum` of a scalar): the operand's
    shape is the result's, and the result is still written after its pass."""
    u32 = np.dtype(np.uint32)
    b = Builder("scalar_sum")
    with b:
        x = b.new_input(ShapedArray((), u32), "x")
        fn = b.build([E.bind("reduce_sum", x, axes=()), E.mul(x, x)])
    got = emulate.run(source.kernel_source(fn), [np.array(5, u32)])
    assert [int(g[0]) for g in got] == [5, 25]
