"""Cumulative scans of long lines over several blocks (cuda/scan.py's split form: totals,
prefix, carry passes), without a GPU: the kernels run on the host emulation against the
reference backend and NVRTC compiles them for sm_90 and sm_80. The split thresholds are
lowered so that short lines split, recursively, with pieces around the lengths' boundaries;
each hypothesis example compiles all its cases' kernels in one host library."""
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import emulate, nvrtc, program, scan
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E

HAVE_NVRTC, WHY = nvrtc.available()
pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")
LOWERED = {"SPLIT_LENGTH": 4, "SPLIT_CHUNK": 3, "SPLIT_TASKS": 40}


def _function(k, name, shape, dtype, axis, reverse):
    b = Builder(f"scan{k}")   # (names unique across a batch: one host library)
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        return b.build([E.bind(name, x, axis=axis, reverse=reverse)])


@st.composite
def cases(draw):
    """(op, shape, dtype, axis, reverse, data): a scanned axis around multiples of the
    lowered piece length (3), 1 to 3 lines beside it; floats with NaN, infinities and signed
    zeros, or uniform; integers that wrap."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.uint8])))
    op = draw(st.sampled_from(["cumsum", "cumprod", "cummax", "cummin"] +
                              (["cumlogsumexp"] if dtype.kind == "f" else [])))
    n = 3 * draw(st.integers(1, 15)) + draw(st.sampled_from([-1, 0, 1]))
    shape = [n] + [draw(st.sampled_from([1, 2, 3]))
                   for _ in range(draw(st.integers(0, 2)))]
    axis = draw(st.integers(0, len(shape) - 1))
    shape[0], shape[axis] = shape[axis], n
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "f" and draw(st.booleans()):
        pool = np.array([-1.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], dtype)
        data = rng.choice(pool, shape)
    elif dtype.kind == "f":
        data = rng.uniform(-1.5, 1.5, shape).astype(dtype)
    else:
        data = rng.integers(-3 if dtype.kind == "i" else 0, 7, shape).astype(dtype)
    return op, tuple(shape), dtype, axis, draw(st.booleans()), data


def _run(passes, fn, data):
    """The result of scan.passes' kernels run in order on the host, each on the values the
    ones before it wrote."""
    env = {fn.invars[0].name: data}
    for kernel, inputs, outputs in passes:
        got = emulate.run(kernel, [env[v.name] for v in inputs], blocks=2, threads=32)
        env.update((v.name, x.reshape(v.aval.shape)) for v, x in zip(outputs, got))
    return env[fn.outvars[0].name]


def _check(got, want, op, n):
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    tolerance = 8 * n * np.finfo(want.dtype).eps
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True)
    if op in ("cummax", "cummin"):   # XLA's order of zeros
        assert ((got != 0) | (np.signbit(got) == np.signbit(want))).all()


@settings(max_examples=8, deadline=None)
@given(st.lists(cases(), min_size=4, max_size=4))
def test_split_scans_match_the_reference(batch):
    with mock.patch.multiple(scan, **LOWERED):
        functions = [_function(k, *case[:5]) for k, case in enumerate(batch)]
        plans = [scan.passes(fn) for fn in functions]
    kernels = [kernel for passes in plans for kernel, _, _ in passes]
    emulate.load_all(kernels)
    for (op, shape, dtype, axis, reverse, data), fn, passes in zip(batch, functions, plans):
        n, lines = shape[axis], data.size // shape[axis]
        assert (len(passes) >= 3) == (lines * 2 <= LOWERED["SPLIT_TASKS"] and n >= 6), \
            (shape, axis, [kernel.name for kernel, _, _ in passes])
        got = _run(passes, fn, data)
        with np.errstate(all="ignore"):
            want = np.asarray(reference.compile_function(fn)(data)[0])
        assert got.dtype == want.dtype and got.shape == want.shape
        _check(got, want, op, n)
    if HAVE_NVRTC:   # every kernel of the batch in one NVRTC run per arch
        text = "\n".join(k.source for k in kernels)
        for arch in ("sm_90", "sm_80"):
            assert f".target {arch}" in nvrtc.compile(text, "scans.cu", arch)


def test_a_long_line_at_the_real_thresholds():
    """A line of 10^5 float32 elements splits into 1539 pieces of 65, their totals scanned
    by one block; the float32 sum is carried in double through every pass, so the outputs
    are the reference's double sums rounded once."""
    fn = _function(0, "cumsum", (100_000,), np.float32, 0, True)
    steps = program.steps(fn)
    assert [s.kernel.launch for s in steps] == ["thread_per_part", "block_per_row",
                                                "thread_per_part"]
    totals, prefix, carry = steps
    assert totals.kernel.sizes == (1539,) and totals.kernel.outputs == (np.float64,)
    assert prefix.inputs == totals.outputs and carry.inputs[1:] == prefix.outputs
    assert [v.name for v in carry.inputs[1:]] == [f"{fn.outvars[0].name}#prefix"]
    data = np.random.default_rng(1).standard_normal(100_000).astype(np.float32)
    got = emulate.run_program(fn, [data])[0]
    want = np.asarray(reference.compile_function(fn)(data)[0])
    np.testing.assert_allclose(got, want, rtol=np.finfo(np.float32).eps, atol=1e-6)
    assert "kiln_scan0_carry" in program.text(fn, "cuda")
