"""Gathers, scatter-adds and slices along the split dimension of a value split across the
processes (compiler/primitives/partition_indexing.py, partition_rows.py): against the
whole function on the reference backend, with two or four "processes" run as threads
(test_global_arrays.run_partitioned), the collectives they hold, and the real thing under
`mpirun -np 2`.
"""
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import staging, lax
from kiln.compiler.transforms.partition import partition, INFER
from kiln.compiler.primitives.partitioning import Grid

from test_distributed import mpirun, needs_mpi
from test_global_arrays import run_partitioned, prims, LAYOUTS

A = np.arange(24.0, dtype=np.float32).reshape(4, 6) / 7
Z = A.copy()
Z[1] = -0.0                               # a -0.0 row and a NaN arrive as they are
Z[2, 1] = np.nan
I = np.array([0, 3, -1, 7, -9, 2, -4, 1], np.int32)   # out of range and negative
J = np.array([0, 5, -1, 7, -9, 2, -4, 1], np.int32)
EMPTY = np.zeros(0, np.int32)
U = np.array([0, 3, 255, 7, 9, 2, 4, 1], np.uint8)

CASES = [   # (function, arguments, split dimension of each, inferred split of each output)
    (lambda a, i: (a[i], jnp.take(a, i, axis=0), jnp.take(a, i, axis=0, mode="clip"),
                   jnp.take(a, i, axis=0, mode="fill", fill_value=-3)),
     (Z, I), (0, None), (None, None, None, None)),
    (lambda a, i: (a[i], jnp.take(a, i, axis=0), a.at[i].add(1.5)),
     (A, EMPTY), (0, None), (None, None, 0)),
    (lambda a, i: (a[i], jnp.take(a, i, axis=0), a.at[i].add(3)),
     ((A * 7).astype(np.int32), I), (0, None), (None, None, 0)),
    (lambda a, i: (a[i], jnp.take(a, i, axis=0)), (A > 1, I), (0, None), (None, None)),
    (lambda a, i: (a[i], jnp.take(a, i, axis=0)), (A, U), (0, None), (None, None)),
    (lambda a, i: (a[i],), (A, I), (0, 0), (None,)),                 # split indices
    (lambda a, i: (a[i],), (A, I), (None, 0), (0,)),                 # data-parallel lookup
    (lambda a, i: (a[:, i], jnp.take(a, i, axis=1)), (A, I), (0, None), (0, 0)),
    (lambda a, i, j: (a[i, j], a.at[i, j].add(2.0), a.at[i].add(-0.0),
                      a.at[i].add(jnp.ones((8, 6)), mode="clip"), jnp.take(a.reshape(-1), i),
                      a.at[i].add(1.0, mode="promise_in_bounds"),
                      a.at[j].add(1.0, mode="promise_in_bounds")),
     (Z, I, J), (0, None, None), (None, 0, 0, 0, None, 0, 0)),
    (lambda a, labels: (jnp.take_along_axis(a, labels, axis=1),),     # an iota column
     (A, np.array([[0], [5], [2], [1]], np.int32)), (0, 0), (0,)),
    (lambda a, labels: (jnp.take_along_axis(a, labels, axis=1, mode="clip"),
                        kiln.grad(lambda a: jnp.sum(jnp.take_along_axis(a, labels, axis=1)
                                                    ** 2))(a),
                        jnp.put_along_axis(a, labels, -0.0, axis=1, inplace=False),
                        a.at[jnp.arange(4), labels[:, 0]].add(2.0)),
     (Z, np.array([[0, 7], [5, -1], [2, 2], [-9, 1]], np.int32)), (0, None), (0, 0, 0, 0)),
    (lambda a: (a[1:3], a[0:1], a[3:4], a[2:2], a[1:4, ::2], a[:, 1:3], a[0:4]),
     (A,), (0,), (0, None, None, None, None, 0, 0)),   # split where 2 blocks divide it
]


def check(fun, args, in_dims, expected, owners):
    st_, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st_.fn, "reference")(*args, *st_.extra)
    got, dims = run_partitioned(fun, args, in_dims, [INFER] * len(whole), owners)
    assert dims == list(expected)
    for g, w in zip(got, whole):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
        if w.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("owners", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_indexing_along_the_split_dimension_agrees_with_the_whole(case, owners):
    check(*CASES[case], owners)


def crossings(fun, args, in_dims, outs):
    st_, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    local, _ = partition(st_.fn, list(in_dims) + [None] * len(st_.extra), [INFER] * outs,
                         Grid(1, (0, 1)), consts=st_.extra)
    held = staging.run_pipeline(local, "reference").eqns
    return [(e.prim.name, e.outvars[0].aval.shape) for e in held
            if e.prim.name.startswith("process_")]


def test_only_the_needed_rows_cross():
    """A lookup is one allreduce of the result (no allgather of the table); a scatter-add
    none; a slice the rows that cross a block boundary (partition_rows.py): t[30:34] of 64
    rows none (each block keeps its two), t[3:5] one row from block 0 to block 1."""
    table = np.zeros((64, 3), np.float32)
    assert crossings(lambda t, i: t[i], (table, I), (0, None), 1) == \
        [("process_allreduce", (8, 3))]
    assert crossings(lambda t, i: t.at[i].add(1.0), (table, I), (0, None), 1) == []
    assert crossings(lambda t: t[30:34], (table,), (0,), 1) == []
    assert crossings(lambda t: t[3:5], (table,), (0,), 1) == [("process_sendrecv", (1, 3))]
    # t (64 rows) then u (8): block 0 gets t's rows 32:36 from block 1, block 1 u's rows 0:4
    # from block 0; u replicated, before t: t's rows 28:32 cross to block 1, u none; u on
    # both sides: every row stays
    u = np.zeros((8, 3), np.float32)
    assert crossings(lambda t, u: jnp.concatenate([t, u]), (table, u), (0, 0), 1) == \
        [("process_sendrecv", (4, 3)), ("process_sendrecv", (4, 3))]
    assert crossings(lambda t, u: jnp.concatenate([u, t]), (table, u), (0, None), 1) == \
        [("process_sendrecv", (4, 3))]
    assert crossings(lambda t, u: jnp.concatenate([u, t, u]), (table, u), (0, None), 1) == []
    labels = np.arange(64, dtype=np.int32).reshape(64, 1) % 3
    for dims in ((0, 0), (0, None)):   # take_along_axis and its gradient: no communication
        assert crossings(lambda t, l: (jnp.take_along_axis(t, l, axis=1),
                                       kiln.grad(lambda t: jnp.sum(jnp.take_along_axis(
                                           t, l, axis=1) ** 2))(t)),
                         (table, labels), dims, 2) == []
    assert crossings(lambda t, l: jnp.mean(jnp.take_along_axis(t, l, axis=1)),
                     (table, labels), (0, 0), 1) == [("process_allreduce", ())]


ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                  start_index_map=(0,))
PAIRS = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                   start_index_map=(0,))


def test_what_the_rules_leave_out_still_gathers_first():
    """Indices whose dtype cannot hold the dimension's size (with a window's length) and a
    strided slice whose size the block count does not divide run on
    the gathered operand, as before."""
    big = np.arange(512.0, dtype=np.float32).reshape(256, 2)
    small = np.array([[0], [-1], [100], [127], [-128], [5], [9], [3]], np.int8)
    for fun, args, dims, outs in (
            (lambda t, i: (lax.gather(t, i, ROWS, (1, 2), mode="fill"),), (big, small),
             (0, None), (None,)),
            (lambda t, i: (lax.gather(t, i, PAIRS, (2, 2), mode="clip"),), (big, small),
             (0, None), (None,)),
            (lambda t: (t[1:200:3],), (big,), (0,), (None,))):
        assert crossings(fun, args, dims, len(outs))[0][0] == "process_allgather"
        check(fun, args, dims, outs, (0, 1))


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(0, 4), cols=st.integers(0, 2), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int32, np.bool_]),
       mode=st.sampled_from(["clip", "fill"]))
def test_lookups_and_slices_of_any_shape(rows, cols, data, dtype, mode):
    n = 2 * rows
    table = (np.arange(n * cols).reshape(n, cols) % 5).astype(dtype)
    idx = np.array(data.draw(st.lists(st.integers(-2 * n - 1, 2 * n + 1), max_size=5)), np.int32)
    a = data.draw(st.integers(0, n))
    b = data.draw(st.integers(a, n))
    if n == 0:   # nothing to split: the table's rows are the index range itself
        return
    check(lambda t, i: (jnp.take(t, i, axis=0, mode=mode), t[a:b]), (table, idx), (0, None),
          [None, 0 if b > a and (b - a) % 2 == 0 else None], (0, 1))


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(0, 3), cols=st.integers(1, 3), picks=st.integers(0, 2), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int32]), labels_split=st.booleans(),
       owners=st.sampled_from(LAYOUTS))
def test_take_along_the_split_batch_of_any_shape(rows, cols, picks, data, dtype, labels_split,
                                                owners):
    """take_along_axis, put_along_axis and the gradient with the batch split: each process
    on its own rows, the results split along the batch (as JAX's partitioner keeps them)."""
    n = (max(owners) + 1) * rows
    if n == 0:
        return
    table = (np.arange(n * cols).reshape(n, cols) % 7 - 3).astype(dtype)
    labels = np.array(data.draw(st.lists(st.integers(-cols - 1, cols), min_size=n * picks,
                                         max_size=n * picks)), np.int32).reshape(n, picks)
    check(lambda t, l: (jnp.take_along_axis(t, l, axis=1),
                        jnp.put_along_axis(t, l, 5, axis=1, inplace=False, mode="drop")),
          (table, labels), (0, 0 if labels_split else None), (0 if picks else None, 0),
          owners)


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 3), cols=st.integers(0, 2), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int32, np.bool_]),
       mode=st.sampled_from(["clip", "fill", "promise_in_bounds"]),
       owners=st.sampled_from(LAYOUTS), split_indices=st.booleans())
def test_windows_of_several_rows_of_any_shape(rows, cols, data, dtype, mode, owners,
                                             split_indices):
    """Windows of s rows along the split dimension (and all of the other one): each process
    its own rows of each window, one allreduce, the bits of -0.0 and NaN as they are (a
    window of the whole dimension stays split along it)."""
    n = (max(owners) + 1) * rows
    size = data.draw(st.integers(1, n))
    table = ((np.arange(n * cols).reshape(n, cols) % 5 - 2) / 3).astype(dtype)
    if dtype == np.float32 and table.size:
        table.flat[0], table.flat[-1] = -0.0, np.nan
    low, high = (0, n - size) if mode == "promise_in_bounds" else (-2 * n, 2 * n)
    idx = np.array(data.draw(st.lists(st.integers(low, high), min_size=2, max_size=2)),
                   np.int32).reshape(2, 1)
    check(lambda t, i: (lax.gather(t, i, PAIRS, (size, cols), mode=mode, fill_value=7),),
          (table, idx), (0, 0 if split_indices else None), (1 if size == n else None,), owners)


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=3), cols=st.integers(0, 2),
       data=st.data(), dtype=st.sampled_from([np.float32, np.int32, np.bool_]),
       owners=st.sampled_from(LAYOUTS))
def test_concatenations_along_the_split_dimension_of_any_shape(sizes, cols, data, dtype,
                                                               owners):
    """Split operands (rows a multiple of the block count) and replicated ones (any rows):
    the result stays split where the block count divides its size, bit for bit."""
    blocks = max(owners) + 1
    split = [data.draw(st.booleans()) for _ in sizes]
    if not any(split):
        split[0] = True
    rows = [n * blocks if s else data.draw(st.integers(0, 3)) for n, s in zip(sizes, split)]
    parts = [((np.arange(r * cols).reshape(r, cols) + 10 * k) % 7 - 3).astype(dtype)
             for k, r in enumerate(rows)]
    if dtype == np.float32 and parts[0].size:
        parts[0].flat[0] = -0.0
    keep = sum(rows) % blocks == 0 and sum(rows) > 0 or len(rows) == 1   # one: no concatenate
    check(lambda *xs: (jnp.concatenate(xs), jnp.concatenate(xs[::-1])), tuple(parts),
          tuple(0 if s else None for s in split), (0 if keep else None,) * 2, owners)


def test_windows_move_only_the_looked_up_rows():
    table = np.zeros((64, 3), np.float32)
    idx = np.array([[0], [62], [31]], np.int32)
    assert crossings(lambda t, i: (lax.gather(t, i, PAIRS, (5, 3), mode="fill"),),
                     (table, idx), (0, None), 1) == [("process_allreduce", (3, 5, 3))]


SCRIPT = """
import numpy as np
import kiln, kiln.numpy as jnp
from kiln import P, lax
from kiln.sharding import NamedSharding

kiln.config.update("jax_num_cpu_devices", 1)
kiln.distributed.initialize()
p = kiln.process_index()
PAIRS = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                   start_index_map=(0,))
mesh = kiln.make_mesh((2,), ("rows",))
rows, whole = NamedSharding(mesh, P("rows")), NamedSharding(mesh, P())
T = (np.arange(40.0, dtype=np.float32).reshape(10, 4) - 7) / 3
T[3] = -0.0
I = np.array([[0, 9, -1, 12], [-11, 4, 5, 3]], np.int32)
table = kiln.make_array_from_process_local_data(rows, T[5 * p:5 * p + 5])


def lookups(t, i):
    return t[i], jnp.take(t, i, axis=0), jnp.take(t, i[0], axis=0, mode="fill"), t[2:7], t[:0]


def grads(t, i):
    return kiln.grad(lambda t: jnp.sum(jnp.tanh(t[i[0]]) * 2))(t)


f = kiln.jit(lookups, in_shardings=(rows, whole), out_shardings=whole)
got, want = f(table, I), kiln.jit(lookups)(T, I)
print(p, "lookups", all(np.array_equal(np.asarray(g), w, equal_nan=True) and
                        np.array_equal(np.signbit(np.asarray(g)), np.signbit(w))
                        for g, w in zip(got, want)))
empty = f(table, np.zeros((3, 0), np.int32))
print(p, "empty", [np.asarray(e).shape for e in empty[:3]])
g = kiln.jit(grads, in_shardings=(rows, whole), out_shardings=rows)(table, I)
print(p, "grad", type(g).__name__, np.allclose(g.local, kiln.jit(grads)(T, I)[5 * p:5 * p + 5]))


def along(t, l):
    return (jnp.take_along_axis(t, l, axis=1),
            kiln.grad(lambda t: jnp.sum(jnp.take_along_axis(t, l, axis=1) ** 2))(t))


L = np.array([[1], [3], [0], [-2], [3], [1], [0], [0], [2], [-1]], np.int32)
labels = kiln.make_array_from_process_local_data(rows, L[5 * p:5 * p + 5])
got, want = kiln.jit(along, in_shardings=(rows, rows))(table, labels), kiln.jit(along)(T, L)
print(p, "along", [str(o.sharding.spec) for o in got],
      all(np.array_equal(np.asarray(o.local), w[5 * p:5 * p + 5]) for o, w in zip(got, want)))


def windows(t, i):
    return (lax.gather(t, i, PAIRS, (3, 4), mode="fill", fill_value=-1.5),
            lax.gather(t, i, PAIRS, (4, 2), mode="clip"))


W = np.array([[0], [8], [-1], [4], [7]], np.int32)
got = kiln.jit(windows, in_shardings=(rows, whole), out_shardings=whole)(table, W)
want = kiln.jit(windows)(T, W)
joined = kiln.jit(lambda t, u: jnp.concatenate([u, t, t]), in_shardings=(rows, whole))(
    table, T[:2])
print(p, "joined", str(joined.sharding.spec), np.array_equal(
    np.asarray(joined.local), np.concatenate([T[:2], T, T])[11 * p:11 * p + 11]))
print(p, "windows", all(np.array_equal(np.asarray(g), w) and
                        np.array_equal(np.signbit(np.asarray(g)), np.signbit(w))
                        for g, w in zip(got, want)))
"""


@needs_mpi
def test_lookups_under_mpirun(tmp_path):
    rc, out, _ = mpirun(tmp_path, SCRIPT, limit=120)
    assert rc == 0, out
    for p in (0, 1):
        assert f"{p} lookups True" in out, out
        assert f"{p} empty [(3, 0, 4), (3, 0, 4), (0, 4)]" in out, out
        assert f"{p} grad GlobalArray True" in out, out
        assert f"""{p} along ["P('rows',)", "P('rows',)"] True""" in out, out
        assert f"{p} windows True" in out, out
        assert f"{p} joined P('rows',) True" in out, out
