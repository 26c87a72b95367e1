"""The CUDA backend's indexing kernels (cuda/indexing.py), without a GPU: gathers, the scatter
family, dynamic slices and concatenate in the dimension-number forms of `x[idx]`,
`x[i, j]`, windows along an inner axis and `.at[...]` updates, over hypothesis-drawn shapes
(0, 1, odd), index dtypes and values (negative, out of range, repeated), modes and operand
dtypes. Each program's kernels are compiled by NVRTC (sm_90, sm_80) and run on the host
emulation against the reference backend. `scatter` with repeated indices may give an element
any of its updates (docs/cuda.md), and float sums and products may round differently: the
checks allow exactly these."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kiln.compiler.backends import reference
from kiln.compiler.backends.cuda import device as D, emulate, nvrtc, program
from kiln.compiler.ir.abstract import ShapedArray
from kiln.compiler.ir.builder import Builder
from kiln.compiler.primitives import PRIMITIVES, emit as E
from kiln.compiler.primitives.indexing import GatherDimensionNumbers as G, \
    ScatterDimensionNumbers as S

import cuda_programs

pytestmark = pytest.mark.skipif(emulate.compiler() is None, reason="no host C++ compiler")
HAVE_NVRTC, _ = nvrtc.available()

SCATTERS = ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"]


def _forms(a, b, batch):
    """form name -> (index vector length, gather dimension numbers, slice sizes, scatter
    dimension numbers, updates shape) on an (a, b) operand with `batch` index vectors."""
    w = min(2, b)
    forms = {"rows": (1, G((1,), (0,), (0,)), (1, b), S((1,), (0,), (0,)), (batch, b)),
             "window": (1, G((0, 2), (), (1,)), (a, w), S((0, 2), (), (1,)), (a, batch, w))}
    if b:
        forms["point"] = (2, G((), (0, 1), (0, 1)), (1, 1), S((), (0, 1), (0, 1)), (batch,))
    return forms


@st.composite
def cases(draw):
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64,
                                           np.uint32, np.int8, np.uint16, np.bool_])))
    index_dtype = np.dtype(draw(st.sampled_from([np.int32, np.int64, np.uint8, np.uint32])))
    a, b = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([0, 1, 3]))
    batch = draw(st.sampled_from([0, 1, 4, 7]))
    forms = _forms(a, b, batch)
    form = draw(st.sampled_from(sorted(forms)))
    gather_mode = draw(st.sampled_from(["clip", "fill", "promise_in_bounds"]))
    scatter_mode = draw(st.sampled_from(["drop", "clip"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if index_dtype.kind == "u":
        values = np.array([0, 1, 2, 3, 4, 6, np.iinfo(index_dtype).max], index_dtype)
    else:
        values = np.arange(-7, 8).astype(index_dtype)
    return dtype, index_dtype, (a, b), forms[form], gather_mode, scatter_mode, rng, values


def _data(rng, dtype, shape):
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 9, shape).astype(dtype)
    return rng.integers(-5, 6, shape).astype(dtype)


def _program(case):
    dtype, index_dtype, shape, form, gather_mode, scatter_mode, rng, values = case
    k, gdn, sizes, sdn, u_shape = form
    batch = u_shape[1] if len(u_shape) == 3 else u_shape[0]
    b = Builder("indexing")
    with b:
        x = b.new_input(ShapedArray(shape, dtype), "x")
        idx = b.new_input(ShapedArray((batch, k), index_dtype), "idx")
        upd = b.new_input(ShapedArray(u_shape, dtype), "upd")
        s0, s1 = (b.new_input(ShapedArray((), index_dtype), f"s{d}") for d in range(2))
        outs = [E.bind("gather", x, idx, dimension_numbers=gdn, slice_sizes=sizes,
                       mode=gather_mode, fill_value=None)]
        outs += [E.bind(name, x, idx, upd, dimension_numbers=sdn, mode=scatter_mode)
                 for name in SCATTERS]
        piece = E.bind("dynamic_slice", x, s0, s1,
                       slice_sizes=(min(2, shape[0]), min(2, shape[1])))
        updated = E.bind("dynamic_update_slice", x, piece, s1, s0)
        outs += [piece, updated, E.bind("concatenate", x, updated, x, dimension=1)]
        fn = b.build(outs)
    data = [_data(rng, dtype, shape), rng.choice(values, (batch, k)),
            _data(rng, dtype, u_shape), rng.choice(values), rng.choice(values)]
    return fn, data


def _scatter(name, x, indices, updates, fn):
    """The reference's `name` with the dimension numbers and mode of `fn`'s scatters."""
    params = fn.eqns[1].params
    return PRIMITIVES[name].impl(x, indices, updates, **params)


def _check_scatter_set(got, want, fn, data):
    """Exact where one update at most lands; where several do, one of them."""
    updates = data[2].astype(np.float64)
    count = _scatter("scatter_add", np.zeros(got.shape), data[1], np.ones_like(updates), fn)
    lo = _scatter("scatter_min", np.full(got.shape, np.inf), data[1], updates, fn)
    hi = _scatter("scatter_max", np.full(got.shape, -np.inf), data[1], updates, fn)
    single = count <= 1
    np.testing.assert_array_equal(got[single], want[single])
    several = got[~single].astype(np.float64)
    assert np.isin(several, updates).all()
    assert ((lo[~single] <= several) & (several <= hi[~single])).all()


@settings(max_examples=10, deadline=None)
@given(cases())
def test_indexing_kernels_match_the_reference(case):
    fn, data = _program(case)
    steps = program.steps(fn)
    emulate.load_all([s.kernel for s in steps])   # one host compiler run
    got = emulate.run_program(fn, data, blocks=2, threads=32)
    want = [np.asarray(w) for w in reference.compile_function(fn)(*data)]
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g).reshape(w.shape)
        assert g.dtype == w.dtype
        name = fn.eqns[k].prim.name if k < len(fn.eqns) else ""
        if name == "scatter":
            _check_scatter_set(g, w, fn, data)
        elif name in ("scatter_add", "scatter_mul") and w.dtype.kind == "f":
            eps = np.finfo(w.dtype).eps
            np.testing.assert_allclose(g, w, rtol=16 * eps, atol=16 * eps)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    if HAVE_NVRTC:
        for step in steps:
            for arch in ("sm_90", "sm_80"):
                assert f".target {arch}" in nvrtc.compile(step.kernel.source, "k.cu", arch)


def test_scatter_add_is_atomic_add_and_others_compare_and_swap():
    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    b = Builder("f")
    with b:
        x = b.new_input(ShapedArray((4,), f32), "x")
        i = b.new_input(ShapedArray((3, 1), i32), "i")
        u = b.new_input(ShapedArray((3,), f32), "u")
        fn = b.build([E.bind(name, x, i, u, dimension_numbers=S((), (0,), (0,)), mode="drop")
                      for name in SCATTERS])
    texts = [s.kernel.source for s in program.steps(fn)]
    assert "atomicAdd((float*)&out0[t]" in texts[1] and "atomicCAS" not in texts[1]
    assert all("atomicCAS" in t for t in texts[2:]) and "atomic" not in texts[0]
    assert all(s.kernel.starts_from == ((0, 0),) for s in program.steps(fn))


def test_jnp_indexing_runs_as_kernels(monkeypatch):
    """x[i], x[i, j], .at[].add/max/min, take_along_axis and dynamic slices under
    backend="cuda" (emulated): every step a kernel, the results the reference's."""
    monkeypatch.setenv(D.EMULATE, "1")
    (args,) = [p[2] for p in cuda_programs.programs() if p[0] == "indexing"]
    executable = cuda_programs.check("indexing", cuda_programs.indexing, args)
    assert set(executable.steps()) == {"kernel"}, executable.steps()
