"""The CUDA backend's generated kernels, without a GPU: every kernel these tests generate is
compiled by NVRTC for sm_90 and sm_80, and run on the host (emulate.py: the same text under a
C++ compiler, every block and thread of a grid smaller than the data) against the reference
backend, over hypothesis-drawn elementwise programs (shapes with 0 and 1 elements included)."""
from unittest import mock

import numpy as np
import kiln
import kiln.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler import passes
from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import emulate, nvrtc, program, reduce, scan, source
from kiln.compiler.errors import BackendUnsupportedError, CompileError
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E

HAVE_NVRTC, WHY = nvrtc.available()
needs_nvrtc = pytest.mark.skipif(not HAVE_NVRTC, reason=WHY)
needs_cxx = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")

FLOAT_UNARY = ["neg", "abs", "square", "exp", "log1p", "sin", "cos", "tanh", "logistic",
               "floor", "ceil"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "max", "min", "rem"]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "and", "or", "xor"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


@st.composite
def programs(draw):
    """(SSA Function, input arrays): a random chain of elementwise equations."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64])))
    n = draw(st.sampled_from([0, 1, 7, 100, 257]))
    b = Builder("prog")
    with b:
        xs = [b.new_input(ShapedArray((n,), dtype), f"x{k}") for k in range(2)]
        values = list(xs)
        for _ in range(draw(st.integers(1, 6))):
            a, c = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            if dtype.kind == "f":
                kind = draw(st.sampled_from(["unary", "binary", "select", "convert"]))
                if kind == "unary":
                    values.append(E.bind(draw(st.sampled_from(FLOAT_UNARY)), a))
                elif kind == "binary":
                    values.append(E.bind(draw(st.sampled_from(FLOAT_BINARY)), a, c))
                elif kind == "select":
                    values.append(E.select_n(E.bind(draw(st.sampled_from(COMPARE)), a, c), a, c))
                else:
                    back = E.convert_element_type(a, new_dtype=np.dtype(np.int32),
                                                  weak_type=False)
                    values.append(E.convert_element_type(back, new_dtype=dtype,
                                                         weak_type=False))
            else:
                values.append(E.bind(draw(st.sampled_from(INT_BINARY)), a, c))
        fn = b.build([values[-1], E.bind(draw(st.sampled_from(COMPARE)), values[-1], xs[0])])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "f":
        data = [rng.uniform(-3, 3, n).astype(dtype) for _ in xs]
        data[1][: n // 3] = data[0][: n // 3]          # ties for max/min and comparisons
    else:
        data = [rng.integers(-50, 50, n).astype(dtype) for _ in xs]
        data[1][: n // 4] = 0                           # division by zero
    return fn, data


def _close(got, want, dtype):
    if np.dtype(dtype).kind == "f":   # the host's libm against NumPy's: within a few ulps
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dtype).eps,
                                   atol=8 * np.finfo(dtype).eps, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@needs_cxx
@settings(max_examples=30, deadline=None)
@given(programs(), st.booleans())
def test_emulated_kernels_match_the_reference(program, fused):
    """The kernel of the program as it is, or as the LLVM pipeline fused it (its groups
    inline), run on the host against the reference backend."""
    fn, data = program
    kernel = source.kernel_source(passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE)
                                  if fused else fn)
    n = data[0].size
    got = emulate.run(kernel, data, n, blocks=2, threads=4)
    with np.errstate(all="ignore"):
        want = reference.compile_function(fn)(*data)
    for g, w, v in zip(got, want, fn.outvars):
        _close(g, np.asarray(w), v.aval.dtype)


@needs_nvrtc
@settings(max_examples=10, deadline=None)
@given(programs())
def test_nvrtc_compiles_every_generated_kernel(program):
    fn, _ = program
    kernel = source.kernel_source(fn)
    for arch in ("sm_90", "sm_80"):
        ptx = nvrtc.compile(kernel.source, f"{kernel.name}.cu", arch)
        assert f".target {arch}" in ptx and kernel.name in ptx


@needs_nvrtc
def test_nvrtc_errors_carry_the_log():
    with pytest.raises(CompileError,
                       match=r"(?s)could not compile bad\.cu for sm_90 .*undefined_thing"):
        nvrtc.compile('extern "C" __global__ void k() { undefined_thing(); }', "bad.cu")


@needs_nvrtc
def test_a_broken_kernel_names_the_line_it_came_from():
    """A generated kernel NVRTC rejects (here: damaged on purpose) is reported with NVRTC's
    log and the user's source line of the SSA it came from."""
    kernel = source.kernel_source(kiln.make_ir(square_plus_double)(np.ones(3, np.float32)))
    assert kernel.info is not None
    with pytest.raises(CompileError) as error:
        nvrtc.compile(kernel.source.replace("{", "{ undefined_thing();", 1), "k.cu",
                      info=kernel.info)
    text = str(error.value)
    assert "undefined_thing" in text and "test_cuda_codegen.py" in text
    assert "return x * x + x * 2.0" in text and "a kiln bug" in text


def _function(build):
    b = Builder("f")
    with b:
        x = b.new_input(ShapedArray((4,), np.dtype(np.float32)), "x")
        return b.build(build(x))


@needs_cxx
def test_xla_semantics_of_max_min_and_conversions():
    fn = _function(lambda x: [E.max(x, E.neg(x)), E.min(x, E.neg(x)),
                              E.convert_element_type(E.mul(x, 1e10), new_dtype=np.dtype(np.int32),
                                                     weak_type=False)])
    x = np.array([np.nan, -0.0, 3.0, -2.5], np.float32)
    got = emulate.run(source.kernel_source(fn), [x], 4, blocks=1, threads=3)
    want = reference.compile_function(fn)(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.uint8), np.asarray(w).view(np.uint8))


def test_what_the_backend_cannot_compile_yet_is_named():
    fn = _function(lambda x: list(E.bind("sort", x, dimension=0, is_stable=True,
                                         num_keys=1)))
    with pytest.raises(BackendUnsupportedError, match="CUDA backend cannot compile.*sort"):
        source.kernel_source(fn)
    half = Builder("h")
    with half:
        y = half.new_input(ShapedArray((2,), np.dtype(np.float16)), "y")
        fn = half.build([E.add(y, y)])
    with pytest.raises(BackendUnsupportedError, match="float16"):
        source.kernel_source(fn)


def test_launch_shape():
    assert source.launch_shape(0) == (1, 256)
    assert source.launch_shape(1000) == (4, 256)
    assert source.launch_shape(10**9, multiprocessors=132) == (1056, 256)


@needs_nvrtc
def test_jit_as_text_cuda_and_ptx():
    import kiln
    f = square_plus_double
    compiled = kiln.jit(f).lower(np.ones(3, np.float32)).compile()
    assert "__global__ void kiln_square_plus_double" in compiled.as_text("cuda")
    assert ".target sm_90" in compiled.as_text("ptx")
    with pytest.raises(ValueError, match="unknown CUDA text level"):
        program.text(kiln.make_ir(f)(np.ones(3, np.float32)), "sass")


def softmax_then_project(x, w):
    e = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
    return (e / jnp.sum(e, axis=1, keepdims=True)) @ w


@needs_nvrtc
def test_a_whole_program_prints_every_kernel_and_names_the_other_steps():
    """A function that is not one kernel prints the kernels of its steps in order, and names
    what runs an equation no kernel computes (the product: the device's GEMM). The softmax's
    groups are one kernel of three passes over each row (program.units)."""
    import kiln
    x, w = np.ones((4, 5), np.float32), np.ones((5, 3), np.float32)
    compiled = kiln.jit(softmax_then_project).lower(x, w).compile()
    text = compiled.as_text("cuda")
    assert text.count("__global__ void") == 1 and text.count("for (long long j =") == 3
    assert "dot_general(...): the device layer's GEMM (cuBLAS)" in text
    assert text.index("__global__") < text.index("dot_general(...)")
    ptx = compiled.as_text("ptx")
    assert ptx.count(".target sm_90") == text.count("__global__ void")


def square_plus_double(x):
    return x * x + x * 2.0


@needs_cxx
@settings(max_examples=20, deadline=None)
@given(st.sampled_from([0, 1, 3, 5]), st.sampled_from([1, 2, 7]),
       st.lists(st.sampled_from(["transpose2", "rev0", "rev1", "row", "col", "scalar"]),
                min_size=1, max_size=4), st.booleans())
def test_views_of_inputs_become_indices(rows, cols, views, fused):
    """Inputs read through broadcasts, transposes, reversals and reshapes: each load indexes
    the input with the kernel's coordinates (0 and 1 sized axes included)."""
    f32 = np.dtype(np.float32)
    b = Builder("views")
    with b:
        x = b.new_input(ShapedArray((rows, cols), f32), "x")
        xt = b.new_input(ShapedArray((cols, rows), f32), "xt")
        row = b.new_input(ShapedArray((cols,), f32), "row")
        col = b.new_input(ShapedArray((rows, 1), f32), "col")
        s = b.new_input(ShapedArray((), f32), "s")
        acc = x
        for view in views:
            term = {"transpose2": lambda: E.transpose(xt, permutation=(1, 0)),
                    "rev0": lambda: E.rev(x, dimensions=(0,)),
                    "rev1": lambda: E.rev(x, dimensions=(1,)),
                    "row": lambda: E.broadcast_in_dim(row, shape=(rows, cols),
                                                      broadcast_dimensions=(1,)),
                    "col": lambda: E.broadcast_in_dim(
                        E.reshape(col, new_sizes=(rows,), dimensions=None),
                        shape=(rows, cols), broadcast_dimensions=(0,)),
                    "scalar": lambda: E.broadcast_in_dim(s, shape=(rows, cols),
                                                         broadcast_dimensions=())}[view]()
            acc = E.add(E.mul(acc, 0.5), term)
        fn = b.build([acc])
    rng = np.random.default_rng(rows * 10 + cols)
    data = [rng.standard_normal(v.aval.shape).astype(f32) for v in fn.invars]
    kernel = source.kernel_source(passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE)
                                  if fused else fn)
    got = emulate.run(kernel, data, rows * cols, blocks=2, threads=3)[0]
    want = np.asarray(reference.compile_function(fn)(*data)[0])
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-6)


REDUCTIONS = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "argmax", "argmin"]


@st.composite
def reductions(draw):
    """(SSA Function, inputs, reduced size): a reduction over any set of axes of a rank 1-3
    operand (0, 1 and odd sizes; 70 elements to reduce for several warps), maybe with an
    elementwise prologue and an epilogue; floats with NaN, -0.0 and ties."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32])))
    name = draw(st.sampled_from(REDUCTIONS + (["reduce_and", "reduce_or", "reduce_xor"]
                                              if dtype.kind == "i" else [])))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 3, 5, 70]), min_size=1, max_size=3)))
    axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    params = {"axes": tuple(axes)}
    if name.startswith("arg"):
        axes = [axes[0]]
        params = {"axes": (axes[0],), "index_dtype": np.dtype(np.int32)}
        if shape[axes[0]] == 0:
            shape = shape[:axes[0]] + (2,) + shape[axes[0] + 1:]
    prologue, epilogue = draw(st.booleans()), draw(st.booleans())
    b = Builder("red")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        y = b.new_input(ShapedArray(shape, dtype), "y")
        v = E.max(E.mul(x, y), x) if prologue else x
        r = E.bind(name, v, **params)
        fn = b.build([E.add(E.mul(r, r), r) if epilogue else r])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "f":
        data = [rng.choice(np.array([-1.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan],
                                    dtype), shape, p=[.15, .1, .1, .15, .15, .15, .05, .05, .1])
                if draw(st.booleans()) else rng.uniform(0.5, 1.5, shape).astype(dtype)
                for _ in range(2)]
    else:
        data = [rng.integers(-1 if name == "reduce_prod" else -9, 2 if name == "reduce_prod"
                             else 9, shape).astype(dtype) for _ in range(2)]
    size = int(np.prod([shape[a] for a in axes]))
    return fn, data, size


@needs_cxx
@settings(max_examples=15, deadline=None)
@given(reductions(), st.booleans())
def test_reduction_kernels_over_any_axes(case, fused):
    """Reductions over leading, middle, trailing or all axes (a block per row with warp
    shuffles when the innermost axis is reduced, else a thread per row), argmax/argmin with
    JAX's NaN and tie rules, plain or as the LLVM pipeline fused it; 64 threads a block, so
    the shuffles and the combine across warps really exchange."""
    fn, data, size = case
    program = passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE) if fused else fn
    kernel = source.kernel_source(program)
    assert ("__shfl_down_sync" in kernel.source) == kernel.launch.startswith("block_")
    _check_reduction(kernel, fn, data, size)


@needs_cxx
@settings(max_examples=15, deadline=None)
@given(reductions(), st.booleans())
def test_split_row_reduction_kernels(case, fused):
    """The same reductions with rows split into pieces (reduce.py: thresholds lowered so that
    these sizes split): each piece's partial result in scratch, the last piece of a row
    combining them; grids smaller than the pieces, so blocks and threads take several."""
    fn, data, size = case
    program = passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE) if fused else fn
    with mock.patch.multiple(reduce, BLOCK_PIECE=8, THREAD_PIECE=4):
        kernel = source.kernel_source(program)
    split = kernel.launch.endswith("_per_part")
    assert split == bool(kernel.scratch)
    if split:
        rows, cols = kernel.sizes[1:]
        assert kernel.sizes[0] > rows and cols >= 8 and "atomicAdd(&counters[row]" in kernel.source
    _check_reduction(kernel, fn, data, size)


def _check_reduction(kernel, fn, data, size):
    got = emulate.run(kernel, data, blocks=2, threads=64)[0]
    with np.errstate(all="ignore"):
        want = np.asarray(reference.compile_function(fn)(*data)[0]).ravel()
    dtype = fn.outvars[0].aval.dtype
    if np.dtype(dtype).kind == "f":   # the sum's order differs from the reference's
        tolerance = max(1, size) * 4 * np.finfo(dtype).eps
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True)
        if fn.eqns[-1].prim.name in ("reduce_max", "reduce_min"):   # XLA's order of zeros
            assert ((got != 0) | (np.signbit(got) == np.signbit(want))).all()
    else:
        np.testing.assert_array_equal(got, want)
    if HAVE_NVRTC:
        assert ".target sm_90" in nvrtc.compile(kernel.source, "red.cu")


@st.composite
def fused_programs(draw):
    """(SSA Function, inputs): elementwise chains over [rows, cols] inputs (one read through a
    broadcast, one through a slice) with several results: elementwise values and reductions
    over axis 0, axis 1 or both, which the LLVM pipeline fuses into groups of several results."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    rows, cols = draw(st.sampled_from([0, 1, 3, 40])), draw(st.sampled_from([1, 2, 5, 33]))
    b = Builder("multi")
    with b:
        x = b.new_input(ShapedArray((rows, cols), dtype), "x")
        big = b.new_input(ShapedArray((rows, cols + 2), dtype), "big")
        bias = b.new_input(ShapedArray((cols,), dtype), "bias")
        values = [x, E.slice(big, start_indices=(0, 1), limit_indices=(rows, cols + 1),
                             strides=None),
                  E.broadcast_in_dim(bias, shape=(rows, cols), broadcast_dimensions=(1,))]
        for _ in range(draw(st.integers(1, 4))):
            a, c = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            values.append(E.bind(draw(st.sampled_from(["add", "mul", "max", "sub"])), a, c))
        results = [values[-1]]
        for _ in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_min"]))
            axes = draw(st.sampled_from([(0,), (1,), (0, 1)]))
            reduced = E.bind(name, draw(st.sampled_from(values[3:])), axes=axes)
            results.append(E.mul(reduced, 2.0) if draw(st.booleans()) else reduced)
        fn = b.build(results)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return fn, [rng.uniform(-2, 2, v.aval.shape).astype(dtype) for v in fn.invars]


@needs_cxx
@settings(max_examples=6, deadline=None)
@given(fused_programs())
def test_fused_programs_run_as_kernel_sequences(case):
    """The LLVM pipeline's groups (several results, reductions over different axes in
    different groups), each a kernel, run in order on the host against the reference."""
    fn, data = case
    fused = passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE)
    got = emulate.run_program(fused, data, blocks=2, threads=64)
    want = reference.compile_function(fn)(*data)
    for g, w, v in zip(got, want, fn.outvars):
        eps = np.finfo(v.aval.dtype).eps
        np.testing.assert_allclose(g, np.asarray(w), rtol=200 * eps, atol=200 * eps)
    if HAVE_NVRTC:
        for step in program.steps(fused):
            assert ".target sm_90" in nvrtc.compile(step.kernel.source, "group.cu")


@needs_cxx
def test_a_group_with_several_results_is_one_kernel():
    """x * y, its column sums and column sums of squares: one group, one thread-per-column
    kernel writing three outputs; the epilogue of an unfused reduction joins its kernel."""
    f32 = np.dtype(np.float32)
    b = Builder("moments")
    with b:
        x = b.new_input(ShapedArray((7, 3), f32), "x")
        y = b.new_input(ShapedArray((7, 3), f32), "y")
        xy = E.mul(x, y)
        fn = b.build([xy, E.bind("reduce_sum", xy, axes=(0,)),
                      E.bind("reduce_sum", E.mul(xy, xy), axes=(0,))])
    (step,) = program.steps(passes.run_pipeline(fn, pipeline=passes.LLVM_PIPELINE))
    assert len(step.kernel.outputs) == 3 and step.kernel.launch == "thread_per_row"
    data = [np.arange(21, dtype=f32).reshape(7, 3) / 7, np.ones((7, 3), f32)]
    got = emulate.run(step.kernel, data)
    for g, w in zip(got, reference.compile_function(fn)(*data)):
        np.testing.assert_allclose(g, np.asarray(w).ravel(), rtol=1e-6)
    b = Builder("mean")
    with b:
        x = b.new_input(ShapedArray((7, 3), f32), "x")
        fn = b.build([E.div(E.bind("reduce_sum", x, axes=(1,)), 3.0)])
    kernel = source.kernel_source(fn)
    assert "/ ((float)3.0)" in kernel.source and kernel.launch == "block_per_row"
    np.testing.assert_allclose(emulate.run(kernel, data[:1])[0], data[0].mean(1), rtol=1e-6)


def test_unsupported_groups_are_named():
    f32 = np.dtype(np.float32)
    b = Builder("twice")
    with b:
        x = b.new_input(ShapedArray((4, 3), f32), "x")
        fn = b.build([E.bind("reduce_sum", x, axes=(0,)), E.bind("reduce_sum", x, axes=(1,))])
    with pytest.raises(BackendUnsupportedError, match="reductions over different shapes"):
        source.kernel_source(fn)
    b = Builder("stacked")
    with b:
        x = b.new_input(ShapedArray((4, 3), f32), "x")
        fn = b.build([E.bind("reduce_max", E.bind("reduce_sum", x, axes=(1,)), axes=(0,))])
    with pytest.raises(BackendUnsupportedError, match="different shapes"):
        source.kernel_source(fn)
    b = Builder("product")
    with b:
        x = b.new_input(ShapedArray((4, 3), f32), "x")
        fn = b.build([E.dot_general(x, x, dimension_numbers=(((1,), (1,)), ((), ())))])
    with pytest.raises(BackendUnsupportedError, match="cannot compile the primitive "
                                                      "'dot_general'.*reductions so far"):
        program.equation_steps(fn.eqns[0])
    (gemm,) = program.steps(fn)   # the whole program's plan: a GEMM step instead
    assert gemm.kind == "gemm" and gemm.sizes == (1, 4, 3, 4) and gemm.left == (0, 1)


FLOAT_FUNCTIONS = ["exp2", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                   "atanh", "cbrt", "erf", "erfc", "erf_inv", "lgamma", "sign", "is_finite",
                   "round", "round_even", "copy", "atan2", "nextafter", "fma", "clamp"]


def _float_function(name, x, y):
    if name == "round_even":
        return E.bind("round", x, rounding_method=1)
    if name in ("atan2", "nextafter"):
        return E.bind(name, x, y)
    if name == "fma":
        return E.bind("fma", x, y, x)
    if name == "clamp":
        return E.bind("clamp", E.neg(E.abs(y)), x, E.abs(y))
    return E.bind(name, x)


@needs_cxx
@settings(max_examples=4, deadline=None)
@given(st.sampled_from([np.float32, np.float64]), st.integers(0, 2**16))
def test_more_float_functions_match_the_reference(dtype, seed):
    """Every float rule beyond the first set, in one kernel of many results, over special
    values (NaN, infinities, signed zeros, halves for rounding, domain edges) and random ones."""
    dtype = np.dtype(dtype)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 0.999,
               -0.9999, 1e-30, 3.0, 27.0, -8.0, 100.0]
    rng = np.random.default_rng(seed)
    x = np.concatenate([special, rng.uniform(-4, 4, 40), rng.uniform(-1, 1, 40)]).astype(dtype)
    y = np.concatenate([special[::-1], rng.uniform(-4, 4, 80)]).astype(dtype)
    b = Builder("functions")
    with b:
        xs = [b.new_input(ShapedArray(x.shape, dtype), n) for n in ("x", "y")]
        fn = b.build([_float_function(name, *xs) for name in FLOAT_FUNCTIONS])
    kernel = source.kernel_source(fn)
    got = emulate.run(kernel, [x, y], blocks=2, threads=8)
    with np.errstate(all="ignore"):
        want = reference.compile_function(fn)(x, y)
    for name, g, w in zip(FLOAT_FUNCTIONS, got, want):
        w = np.asarray(w)
        if name == "lgamma":   # lgamma(-inf): the reference says -inf, JAX and CUDA inf
            w = np.where(x == -np.inf, np.inf, w)
        if w.dtype.kind == "f":
            eps = np.finfo(dtype).eps
            np.testing.assert_allclose(g, w, rtol=8 * eps, atol=8 * eps, equal_nan=True,
                                       err_msg=name)
            exact = name in ("sign", "round", "round_even", "copy", "nextafter", "clamp")
            assert not exact or (np.signbit(g) == np.signbit(w)).all(), name
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    if HAVE_NVRTC:
        for arch in ("sm_90", "sm_80"):
            assert f".target {arch}" in nvrtc.compile(kernel.source, "f.cu", arch)


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
_SAME_WIDTH = {1: np.uint8, 2: np.int16, 4: np.float32, 8: np.float64}


@needs_cxx
@settings(max_examples=10, deadline=None)
@given(st.sampled_from(INT_DTYPES), st.integers(0, 2**16))
def test_bit_operations_match_the_reference(dtype, seed):
    """Shifts (amounts below 0 and past the width included), population_count, clz, sign,
    and bitcasts to a type of the same width and back, over every integer type."""
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    a = np.concatenate([np.array([0, 1, info.max, info.min, info.max // 3], dtype),
                        rng.integers(info.min, info.max, 60, dtype=dtype, endpoint=True)])
    amounts = rng.integers(max(info.min, -3), bits + 3, a.size).astype(dtype)
    other = np.dtype(_SAME_WIDTH[dtype.itemsize])
    b = Builder("bits")
    with b:
        x = b.new_input(ShapedArray(a.shape, dtype), "x")
        s = b.new_input(ShapedArray(a.shape, dtype), "s")
        cast = E.bitcast_convert_type(x, new_dtype=other)
        fn = b.build([E.bind("shift_left", x, s), E.bind("shift_right_logical", x, s),
                      E.bind("shift_right_arithmetic", x, s), E.bind("population_count", x),
                      E.bind("clz", x), E.bind("sign", x), cast,
                      E.bitcast_convert_type(cast, new_dtype=dtype)])
    kernel = source.kernel_source(fn)
    got = emulate.run(kernel, [a, amounts], blocks=2, threads=8)
    want = reference.compile_function(fn)(a, amounts)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.uint8), np.asarray(w).ravel().view(np.uint8))
    if HAVE_NVRTC:
        assert ".target sm_90" in nvrtc.compile(kernel.source, "bits.cu")


def threefry_bits(key):
    return kiln.random.bits(key, (37,))


def threefry_uniform(key):
    return kiln.random.uniform(key, (5, 3), minval=-1.0, maxval=2.0)


@needs_cxx
@pytest.mark.parametrize("f", [threefry_bits, threefry_uniform])
def test_threefry_kernels_give_jax_bits(f):
    """kiln.random's threefry (uint32 adds, rotations, xors) and uniform's bit manipulation,
    lowered to kernels and run on the host: the reference's bits exactly, which are JAX's."""
    from kiln import staging
    key = kiln.random.PRNGKey(42)
    staged = staging.stage_call(f, (key,), {}, staging.StaticArgs(f, None, None))[0]
    fn = passes.run_pipeline(staged.fn, pipeline=passes.LLVM_PIPELINE)
    inputs = [np.asarray(key)] + [np.asarray(x) for x in staged.extra]
    got = emulate.run_program(fn, inputs)[0]
    want = np.asarray(f(key))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    jax = pytest.importorskip("jax")
    jax_f = {threefry_bits: lambda k: jax.random.bits(k, (37,)),
             threefry_uniform: lambda k: jax.random.uniform(k, (5, 3), minval=-1.0,
                                                            maxval=2.0)}[f]
    np.testing.assert_array_equal(want, np.asarray(jax_f(jax.random.PRNGKey(42))))


@st.composite
def cumulative_cases(draw):
    """(SSA function of one cumulative equation, its input): any axis, either direction;
    0, 1 and odd sizes; floats with NaN, infinities and signed zeros, signed and unsigned ints
    (wrapping)."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.uint8])))
    names = ["cumsum", "cumprod", "cummax", "cummin"] + (["cumlogsumexp"]
                                                         if dtype.kind == "f" else [])
    name = draw(st.sampled_from(names))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 3, 5, 33]), min_size=1, max_size=3)))
    axis = draw(st.integers(0, len(shape) - 1))
    b = Builder("cum")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        fn = b.build([E.bind(name, x, axis=axis, reverse=draw(st.booleans()))])
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "f":
        pool = np.array([-1.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], dtype)
        data = rng.choice(pool, shape) if draw(st.booleans()) else \
            rng.uniform(-1.5, 1.5, shape).astype(dtype)
    else:
        data = rng.integers(-3 if dtype.kind == "i" else 0, 7, shape).astype(dtype)
    return fn, data


@needs_cxx
@settings(max_examples=25, deadline=None)
@given(cumulative_cases())
def test_cumulative_kernels_match_the_reference(case):
    _check_cumulative(*case)


@needs_cxx
@settings(max_examples=25, deadline=None)
@given(cumulative_cases())
def test_block_per_line_scans_match_the_reference(case):
    """The block-per-line prefix scan (few long lines), its thresholds lowered so that small
    lines take it: chunks of 32 threads that do not divide the line, empty chunks included."""
    with mock.patch.multiple(scan, BLOCK_LENGTH=2, BLOCK_LINES=10**9):
        _check_cumulative(*case)


def _check_cumulative(fn, data):
    kernel = source.kernel_source(fn)
    if data.ndim and data.size:
        assert (kernel.launch == "block_per_row") == (scan.BLOCK_LENGTH == 2 and
                                                      data.shape[fn.eqns[0].params["axis"]] >= 2)
    got = emulate.run(kernel, [data], blocks=2, threads=32)[0]
    with np.errstate(all="ignore"):
        want = np.asarray(reference.compile_function(fn)(data)[0]).ravel()
    if want.dtype.kind == "f":
        tolerance = 8 * max(1, data.size) * np.finfo(want.dtype).eps
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True)
        if fn.eqns[0].prim.name in ("cummax", "cummin"):   # XLA's order of zeros
            assert ((got != 0) | (np.signbit(got) == np.signbit(want))).all()
    else:
        np.testing.assert_array_equal(got, want)
    if HAVE_NVRTC:
        assert ".target sm_90" in nvrtc.compile(kernel.source, "cum.cu")
