"""`pad` and `iota` as CUDA kernels (cuda/indexing.py's pad, source.py's GENERATED), without a
GPU: hypothesis-drawn pads (shapes with 0 and 1, interior padding, negative padding that
crops, every dtype kind, a literal or an operand padding value) and iotas (alone, and inside
an elementwise kernel and a reduction's prologue) run on the host emulation against the
reference backend, and NVRTC compiles them for sm_90 and sm_80. Each example compiles all its
kernels in one host library."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import device as D, emulate, nvrtc, source
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import emit as E

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")
HAVE_NVRTC, _ = nvrtc.available()
DTYPES = [np.float32, np.float64, np.int32, np.uint8, np.int64, np.bool_]


@st.composite
def pads(draw, k):
    """(SSA function of one pad, its inputs)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 5]), min_size=0, max_size=3)))
    config = []
    for d in shape:
        low, high = draw(st.integers(-2, 3)), draw(st.integers(-2, 3))
        interior = draw(st.integers(0, 2))
        extent = d + max(d - 1, 0) * interior
        config.append((max(low, -extent), max(high, -extent - max(low, -extent)), interior))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    data = (rng.integers(0, 9, shape) + 1).astype(dtype)
    fill = np.asarray(0 if dtype.kind == "b" else 7, dtype)
    b = Builder(f"pad{k}")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        if draw(st.booleans()):
            v = b.new_input(ShapedArray((), dtype), "v")
            return b.build([E.pad(x, v, padding_config=tuple(config))]), [data, fill]
        return b.build([E.pad(x, E.scalar(fill.item(), ShapedArray((), dtype)),
                              padding_config=tuple(config))]), [data]


@st.composite
def iotas(draw, k):
    """(SSA function with an iota: alone, beside elementwise arithmetic, or summed)."""
    dtype = np.dtype(draw(st.sampled_from([np.int32, np.float32, np.uint8, np.int64])))
    shape = tuple(draw(st.lists(st.sampled_from([1, 3, 4]), min_size=1, max_size=3)))
    dimension = draw(st.integers(0, len(shape) - 1))
    form = draw(st.sampled_from(["alone", "elementwise", "summed"]))
    b = Builder(f"iota{k}")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        i = E.iota(dtype=dtype, shape=shape, dimension=dimension)
        out = {"alone": lambda: i, "elementwise": lambda: E.mul(E.add(x, i), i),
               "summed": lambda: E.reduce_sum(E.mul(x, i), axes=(len(shape) - 1,))}[form]()
        fn = b.build([out])
    data = np.random.default_rng(k).integers(0, 5, shape).astype(dtype)
    return fn, [data]


@settings(max_examples=6, deadline=None)
@given(st.tuples(*[pads(k) for k in range(4)], *[iotas(k) for k in range(3)]))
def test_pad_and_iota_kernels_match_the_reference(batch):
    kernels = [source.kernel_source(fn) for fn, _ in batch]
    emulate.load_all(kernels)
    for (fn, data), kernel in zip(batch, kernels):
        got = emulate.run(kernel, data, blocks=2, threads=32)[0]
        want = np.asarray(reference.compile_function(fn)(*data)[0])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want.ravel(), err_msg=kernel.source)
    if HAVE_NVRTC:   # every kernel of the example in one NVRTC run per arch
        text = "\n".join(k.source for k in kernels)
        for arch in ("sm_90", "sm_80"):
            assert f".target {arch}" in nvrtc.compile(text, "pad_iota.cu", arch)


def padded(x, b):
    return (x * jnp.arange(x.shape[1], dtype=x.dtype) + lax.broadcasted_iota(x.dtype, x.shape, 0),
            jnp.pad(x, ((1, 2), (0, 3)), constant_values=-1.0),
            lax.pad(x, 7.5, ((-1, 2, 1), (2, -3, 2))), jnp.pad(b, 2))


def test_pad_and_iota_run_as_kernels(monkeypatch):
    monkeypatch.setenv(D.EMULATE, "1")
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    b = np.array([True, False, True])
    f = kiln.jit(padded, backend="cuda")
    for got, want in zip(f(x, b), kiln.jit(padded, backend="reference")(x, b)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    steps = f._cache.values()[0].executable.steps()
    assert set(steps) == {"kernel"}, steps
