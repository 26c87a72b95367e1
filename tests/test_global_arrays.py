"""Global arrays across processes (runtime/global_arrays.py, global_jit.py) and the partitioning
of a function over the processes (compiler/transforms/partition.py).

In this process, `kiln.distributed.compiling_for(p, 2)` makes kiln see a run of two processes
without joining one: the arrays, their shards and the errors are checked there, and so is the
partitioned SSA (which collectives it holds). The partition rules are checked against the
whole function with two "processes" run as two threads of this one (`TwoThreads`, an engine
whose collectives meet at a barrier) on the reference backend. The real thing runs under
`mpirun -np 2` (one launch, two CPU devices per process): global arrays' shards on both ranks,
pmap over their local shards, and a data-parallel training step under sharded jit against one
process on the whole batch.
"""
import pathlib
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st_

import kiln
import kiln.numpy as jnp
from kiln import P, staging, lax
from kiln.distributed import compiling_for
from kiln.global_arrays import GlobalArray
from kiln.sharding import Mesh, NamedSharding
from kiln.compiler.transforms.partition import partition, INFER
from kiln.compiler.primitives.partitioning import Grid
from kiln.compiler.primitives.processes import set_engine

from test_distributed import mpirun, needs_mpi

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@pytest.fixture
def second_of_two():
    """kiln as process 1 of a run of 2, and a sharding over a mesh of one device of each."""
    with compiling_for(1, 2):
        yield NamedSharding(Mesh(np.array(firsts(), dtype=object), ("batch",)), P("batch"))


def firsts():
    """The first device of each of the two processes."""
    return [kiln.devices()[0], kiln.devices()[kiln.local_device_count()]]


def test_a_global_array_holds_this_processs_block(second_of_two):
    batch = second_of_two
    a = kiln.make_array_from_process_local_data(batch, X[4:])
    assert type(a) is GlobalArray and a.shape == (8, 4) and a.dtype == np.float32
    assert a.sharding == batch and not a.is_fully_addressable
    [mine] = a.addressable_shards
    assert mine.device == firsts()[1] and mine.index == (slice(4, 8), slice(None))
    np.testing.assert_array_equal(np.asarray(mine.data), X[4:])
    assert [s.data is None for s in a.global_shards] == [True, False]
    assert repr(a) == "Array(shape=(8, 4), dtype=float32)"
    b = kiln.make_array_from_callback((8, 4), batch, lambda index: X[index])
    np.testing.assert_array_equal(np.asarray(b.addressable_shards[0].data), X[4:])
    c = kiln.make_array_from_single_device_arrays((8, 4), batch, [X[4:]])
    np.testing.assert_array_equal(c.local, X[4:])
    d = kiln.device_put(X, batch)   # the same value in every process: this one's block
    np.testing.assert_array_equal(d.local, X[4:])
    assert kiln.make_array_from_process_local_data(batch, X[4:], (8, 4)).shape == (8, 4)


def test_a_replicated_sharding_keeps_an_ordinary_array(second_of_two):
    whole = NamedSharding(second_of_two.mesh, P())
    r = kiln.make_array_from_process_local_data(whole, X)
    assert type(r) is kiln.Array and not r.is_fully_addressable
    np.testing.assert_array_equal(np.asarray(r + 1), X + 1)
    assert [s.data is None for s in r.global_shards] == [True, False]


def test_a_global_array_has_no_value_here(second_of_two):
    a = kiln.make_array_from_process_local_data(second_of_two, X[4:])
    for use in (np.asarray, lambda v: v + 1, lambda v: jnp.sum(v), repr_value):
        with pytest.raises(RuntimeError, match="spans non-addressable .*kiln.jit.*addressable_shards"):
            use(a)
    with pytest.raises(TypeError, match="global array of shape .8, 4. spanning several "
                                        "processes.*inside a jitted function"):
        kiln.grad(lambda v: jnp.sum(v))(a)


def repr_value(a):
    return a.tolist()


def test_layouts_and_shapes_kiln_does_not_take(second_of_two):
    batch = second_of_two
    with pytest.raises(ValueError, match=r"gives process 1 a block of shape \(4, 4\), but its "
                                         r"local data has shape \(8, 4\)"):
        kiln.make_array_from_process_local_data(batch, X, (8, 4))
    a = kiln.make_array_from_process_local_data(batch, X[4:])
    with pytest.raises(NotImplementedError, match="another layout across the processes"):
        kiln.device_put(a, NamedSharding(batch.mesh, P(None, "batch")))
    with pytest.raises(ValueError, match="pmap takes one entry per device"):
        kiln.pmap(lambda v: v)(a)
    with pytest.raises(ValueError, match="split across the processes along axis 0: map it "
                                         "along axis 0"):
        kiln.pmap(lambda v: v, in_axes=1)(kiln.make_array_from_process_local_data(
            batch, X[4:5]))


def test_the_blocks_in_another_order(second_of_two):
    reversed_mesh = Mesh(np.array(firsts()[::-1], dtype=object), ("batch",))
    flipped = NamedSharding(reversed_mesh, P("batch"))
    a = kiln.make_array_from_process_local_data(flipped, X[:4])   # process 1 holds block 0
    assert (a.split, a.owners) == (0, (1, 0)) and a.shape == (8, 4)
    [mine] = a.addressable_shards
    assert mine.index == (slice(0, 4), slice(None))
    np.testing.assert_array_equal(kiln.device_put(X, flipped).local, X[:4])
    with pytest.raises(ValueError, match=r"process p holds block p; this \(8, 4\) array's "
                                         r"processes hold blocks \[1, 0\]"):
        kiln.pmap(lambda v: v)(a)
    b = kiln.make_array_from_process_local_data(second_of_two, X[4:])
    with pytest.raises(NotImplementedError, match="different blocks .*process p holds block "
                                                  r"\[1, 0\]\[p\].*\[0, 1\]\[p\].*same mesh"):
        kiln.jit(lambda u, v: u + v)(a, b)


def test_a_mesh_of_four_processes_as_two_by_two():
    with compiling_for(2, 4):
        grid = Mesh(np.array([d for d in kiln.devices() if d.id % kiln.local_device_count()
                              == 0], dtype=object).reshape(2, 2), ("x", "y"))
        both = kiln.make_array_from_process_local_data(NamedSharding(grid, P(("x", "y"))),
                                                       X[4:6])
        assert (both.shape, both.owners) == ((8, 4), (0, 1, 2, 3))
        rows = kiln.make_array_from_process_local_data(NamedSharding(grid, P("x")), X[4:])
        assert (rows.shape, rows.owners) == ((8, 4), (0, 0, 1, 1))   # replicated over y
        cols = kiln.make_array_from_process_local_data(NamedSharding(grid, P(None, "y")),
                                                       X[:, :2])
        assert (cols.shape, cols.split, cols.owners) == ((8, 4), 1, (0, 1, 0, 1))
        tiles = kiln.make_array_from_process_local_data(NamedSharding(grid, P("x", "y")),
                                                        X[4:, :2])   # process 2: (1, 0)
        assert (tiles.shape, tiles.split, tiles.owners) == ((8, 4), (0, 1),
                                                            ((0, 0, 1, 1), (0, 1, 0, 1)))
        assert [s.index for s in tiles.addressable_shards] == [(slice(4, 8), slice(0, 2))]
        np.testing.assert_array_equal(kiln.device_put(X, tiles.sharding).local, X[4:, :2])
        with pytest.raises(ValueError, match=r"split along dimensions \[0, 1\]: use kiln.jit"):
            kiln.pmap(lambda v: v)(tiles)
        with pytest.raises(NotImplementedError, match=r"(?s)its process_allreduce\) inside a "
                           r"jit whose values are split over 2 mesh axes.*line \d+.*lax.psum"
                           r".*Call the pmap outside the jit"):
            kiln.jit(lambda m: kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(m[:1]))(
                tiles)


def loss(params, x, y):
    w, b = params
    logp = kiln.nn.log_softmax(jnp.tanh(x @ w + b))
    return -jnp.mean(jnp.sum(logp * y, axis=1))


def step(params, x, y):
    return [p - 0.5 * g for p, g in zip(params, kiln.grad(loss)(params, x, y))]


def prims(fn):
    """The primitive of each equation of `fn` after the passes."""
    return [eqn.prim.name for eqn in staging.run_pipeline(fn, "reference").eqns]


def test_the_data_parallel_step_reduces_across_processes_and_gathers_nothing():
    params = [np.ones((4, 3), np.float32), np.zeros(3, np.float32)]
    y = np.eye(3, dtype=np.float32)[np.arange(8) % 3]
    st, _, _ = staging.stage_call(step, (params, X, y), {}, staging.StaticArgs(step))
    local, dims = partition(st.fn, [None, None, 0, 0], [None, None], Grid(1, (0, 1)))
    assert dims == [None, None]
    assert [v.aval.shape for v in local.invars] == [(4, 3), (3,), (4, 4), (4, 3)]
    assert [v.aval.shape for v in local.outvars] == [(4, 3), (3,)]
    held = prims(local)
    assert held.count("process_allreduce") == 2 and "process_allgather" not in held   # one
    # allreduce per gradient (the loss's own is dead code)
    shapes = [v.aval.shape for e in staging.run_pipeline(local, "reference").eqns
              for v in e.outvars]
    assert (8, 3) not in shapes and (8, 4) not in shapes   # the bias and the mean's cotangent
    # are broadcast to this process's block, not to the whole batch and sliced


def test_a_primitive_without_a_rule_runs_on_gathered_values():
    def sorted_rows(x):
        return jnp.sort(x, axis=0) * 2
    st, _, _ = staging.stage_call(sorted_rows, (X,), {}, staging.StaticArgs(sorted_rows))
    local, _ = partition(st.fn, [0], [0], Grid(0, (0, 1)))
    assert "process_allgather" in prims(local) and local.outvars[0].aval.shape == (4, 4)


SCRIPT = """
import sys
import numpy as np
import kiln, kiln.numpy as jnp
from kiln import lax, P
from kiln.sharding import NamedSharding
sys.path.insert(0, {tests!r})
from test_global_arrays import step, loss

kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
p = kiln.process_index()
mesh = kiln.make_mesh((4,), ("batch",))
batch, whole = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
rng = np.random.default_rng(0)
X = rng.normal(size=(16, 5)).astype(np.float32)
Y = np.eye(3, dtype=np.float32)[np.arange(16) % 3]
params = [rng.normal(size=(5, 3)).astype(np.float32) * 0.3, np.zeros(3, np.float32)]

x = kiln.make_array_from_process_local_data(batch, X[8 * p:8 * p + 8])
y = kiln.make_array_from_process_local_data(batch, Y[8 * p:8 * p + 8])
print(p, "shards", x.shape, [(s.device.id, s.index[0].start) for s in x.addressable_shards])

train = kiln.jit(step, in_shardings=(whole, batch, batch), out_shardings=whole)
ps, ref = params, params
for _ in range(3):
    ps = train(ps, x, y)
    ref = kiln.jit(step)(ref, X, Y)
print(p, "step", type(ps[0]).__name__,
      max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(ps, ref)))
oracle = kiln.jit(step, in_shardings=(whole, batch, batch), out_shardings=whole,
                  backend="reference")(params, X, Y)   # host values: each keeps its block
once = kiln.jit(step)(params, X, Y)
print(p, "reference", max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(oracle, once)))

doubled = kiln.jit(lambda v: v * 2 + 1, in_shardings=batch, out_shardings=batch)(x)
print(p, "split", type(doubled).__name__, doubled.shape,
      np.array_equal(doubled.local, X[8 * p:8 * p + 8] * 2 + 1))
picked = kiln.jit(lambda v: jnp.sort(v, axis=0)[::4], out_shardings=whole)(x)
print(p, "gathered", np.allclose(np.asarray(picked), np.sort(X, axis=0)[::4]))
print(p, "plain", np.allclose(np.asarray(kiln.jit(lambda v: v.mean(0))(x)), X.mean(0)))

kept = kiln.jit(lambda v: jnp.tanh(v) * 2)(x)          # no shardings: the split is kept
print(p, "kept", type(kept).__name__, kept.sharding == batch,
      np.allclose(kept.local, np.tanh(X[8 * p:8 * p + 8]) * 2))
then = kiln.jit(lambda v: jnp.cumsum(v, 0) + v.sum(1, keepdims=True), in_shardings=batch)(kept)
want = np.cumsum(np.tanh(X) * 2, 0) + (np.tanh(X) * 2).sum(1, keepdims=True)
print(p, "then", type(then).__name__, np.allclose(then.local, want[8 * p:8 * p + 8], atol=1e-5))
whole_out = kiln.jit(lambda v: v[:, 1:3] * 2, out_shardings=whole)(then)
print(p, "whole", type(whole_out).__name__, np.allclose(np.asarray(whole_out), want[:, 1:3] * 2,
                                                        atol=1e-5))
hits = kiln.jit(lambda ps, v, t: (jnp.mean(jnp.argmax(v @ ps[0] + ps[1], 1) == jnp.argmax(t, 1)),
                                  jnp.argmax(v[:, 0]), jnp.max(v, 0)))(params, x, y)
print(p, "eval", [type(h).__name__ for h in hits], float(hits[0]) == float(np.mean(
    np.argmax(X @ params[0] + params[1], 1) == np.argmax(Y, 1))), int(hits[1]) == int(
    np.argmax(X[:, 0])), np.array_equal(np.asarray(hits[2]), X.max(0)))

flipped = NamedSharding(kiln.sharding.Mesh(np.array(kiln.devices()[::-1], dtype=object),
                                           ("batch",)), P("batch"))
fx = kiln.device_put(X, flipped)
fy = kiln.device_put(Y, flipped)
fs = kiln.jit(step, in_shardings=(NamedSharding(flipped.mesh, P()), flipped, flipped))(
    params, fx, fy)
print(p, "flipped", fx.owners, type(fs[0]).__name__,
      max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(fs, once)))

ids = np.array([3, 15, 8, 0, -1, 9, 7], np.int32)
moved = kiln.jit(lambda v, i: (v[2:14] * 2, v[::-1], jnp.pad(v, ((2, 2), (0, 0)), constant_values=7.0),
                             v[i], v.at[i].add(1.0), jnp.take(v, i, 0, mode="fill")))(x, ids)
wants = (X[2:14] * 2, X[::-1], np.pad(X, ((2, 2), (0, 0)), constant_values=7.0),
         X[np.where(ids < 0, ids + 16, ids)], None, X[np.where(ids < 0, ids + 16, ids)])
added = X.copy()
np.add.at(added, ids, 1.0)
wants = wants[:4] + (added,) + wants[5:]
print(p, "moved", [type(m).__name__ for m in moved], all(
    np.allclose(m.local if type(m).__name__ == "GlobalArray" else np.asarray(m),
                w[len(w) // 2 * p:len(w) // 2 * (p + 1)] if type(m).__name__ == "GlobalArray"
                else w) for m, w in zip(moved, wants)))

embed = kiln.grad(lambda t, i: jnp.sum(jnp.tanh(t[i]) ** 2))
g = kiln.jit(embed)(x, ids)
print(p, "embed", type(g).__name__, np.allclose(g.local, np.asarray(kiln.jit(embed)(X, ids))[
    8 * p:8 * p + 8], atol=1e-6))

rows = kiln.make_array_from_process_local_data(batch, X.reshape(4, 4, 5)[2 * p:2 * p + 2])
total = kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(rows)
print(p, "pmap", total.shape, np.allclose(np.asarray(total), X.reshape(4, 4, 5).sum(0)))
"""


@needs_mpi
def test_global_arrays_under_mpirun(tmp_path):
    tests = str(pathlib.Path(__file__).parent)
    rc, out, _ = mpirun(tmp_path, SCRIPT.format(tests=tests), limit=240)
    assert rc == 0, out
    lines = sorted(line for line in out.splitlines() if line[:2] in ("0 ", "1 "))
    for p in (0, 1):
        mine = {line.split()[1]: line for line in lines if line.startswith(f"{p} ")}
        assert mine["shards"] == f"{p} shards (16, 5) [({2 * p}, {8 * p}), ({2 * p + 1}, " \
                                 f"{8 * p + 4})]", out
        kind, err = mine["step"].split()[2:]
        assert kind == "Array" and float(err) < 1e-5, out
        assert float(mine["reference"].split()[2]) < 1e-5, out
        assert mine["split"] == f"{p} split GlobalArray (16, 5) True", out
        assert mine["gathered"].endswith("True") and mine["plain"].endswith("True"), out
        assert mine["pmap"] == f"{p} pmap (2, 4, 5) True", out
        assert mine["embed"] == f"{p} embed GlobalArray True", out
        assert mine["moved"] == f"{p} moved ['GlobalArray', 'GlobalArray', 'GlobalArray', " \
                                f"'Array', 'GlobalArray', 'Array'] True", out
        assert mine["kept"] == f"{p} kept GlobalArray True True", out
        assert mine["then"] == f"{p} then GlobalArray True", out
        assert mine["whole"] == f"{p} whole Array True", out
        assert mine["eval"] == f"{p} eval ['Array', 'Array', 'Array'] True True True", out
        kind, err = mine["flipped"].split()[4:]
        assert mine["flipped"].startswith(f"{p} flipped (1, 0) Array"), out
        assert float(err) < 1e-5, out


class Threads:
    """An engine for `processes.set_engine` that runs `n` "processes" as `n` threads of this
    one: each collective waits for all and combines their operands in thread order."""

    def __init__(self, n):
        self.barrier = threading.Barrier(n, timeout=20)
        self.slots = [None] * n
        self.local = threading.local()

    def _exchange(self, x):
        self.slots[self.local.process] = np.array(x)
        self.barrier.wait()
        both = list(self.slots)
        self.barrier.wait()
        return both

    def allreduce(self, x, op):
        parts = self._exchange(x)
        reduce = {"sum": np.sum, "max": np.max, "min": np.min}[op]
        return reduce(np.stack(parts), axis=0).astype(parts[0].dtype)   # as MPI: no promotion

    def allgather(self, x):
        return np.stack(self._exchange(x))

    def sendrecv(self, x, dest, source, tag):
        """Every "process" takes part in each round (as the partition rules emit them): the
        source must have sent to this one, with the same tag."""
        sent = self._exchange(np.array((dest, tag, x), dtype=object))
        if source is None:
            return None
        to, their_tag, data = sent[source]
        assert (to, their_tag) == (self.local.process, tag), (sent[source][:2], tag)
        return data


def as_threads(n, process):
    """[process(p) for p in range(n)], run as n "processes" on threads of this one that meet
    in a `Threads` engine's collectives; the first error is raised here."""
    engine = Threads(n)
    results = [None] * n

    def run(p):
        try:
            engine.local.process = p
            results[p] = process(p)
        except Exception as e:   # noqa: BLE001 - reported by the calling thread
            engine.barrier.abort()
            results[p] = e
    set_engine(engine)
    try:
        threads = [threading.Thread(target=run, args=(p,)) for p in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        set_engine(None)
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def run_partitioned(fun, args, in_dims, out_dims, owners=(0, 1)):
    """`fun`'s outputs on `args` (whole values) computed as `len(owners)` processes would,
    process p holding block owners[p] of each split value: each runs the partitioned SSA
    (reference backend) on its blocks; the split outputs joined (the processes holding the
    same block must agree)."""
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    n, count = len(owners), max(owners) + 1
    dims = [None] * n

    def process(p):
        fn, dims[p] = partition(st.fn, list(in_dims) + [None] * len(st.extra), out_dims,
                                Grid(p, owners), consts=st.extra)
        blocks = [np.split(np.asarray(a), count, axis=d)[owners[p]] if d is not None
                  else a for a, d in zip(args, in_dims)]
        return staging.compile_function(fn, "reference")(*blocks, *st.extra)
    results = as_threads(n, process)
    outs = []
    for k, d in enumerate(dims[0]):
        held = {}
        for p in range(n):
            if owners[p] in held or d is None:
                np.testing.assert_array_equal(results[p][k], held.get(owners[p], results[0][k]))
            held.setdefault(owners[p], results[p][k])
        outs.append(results[0][k] if d is None
                    else np.concatenate([held[b] for b in range(count)], axis=d))
    return outs, dims[0]


A = np.arange(24.0, dtype=np.float32).reshape(4, 6) / 7
B = np.arange(24.0, dtype=np.float32).reshape(6, 4) / 5
C = (np.arange(32.0, dtype=np.float32).reshape(2, 4, 4) - 9) / 3

CASES = [   # (function, arguments, split dimension of each, of each output)
    (lambda a: (jnp.tanh(a) * 2 + a, jnp.exp(a).T), (A,), (0,), (0, 1)),
    (lambda a: (jnp.tanh(a) * 2 + a,), (A,), (1,), (None,)),
    (lambda a, b: (a @ b,), (A, B), (0, None), (0,)),                 # split free dimension
    (lambda a, b: (a @ b,), (A, B), (1, 0), (None,)),                 # split contraction
    (lambda a, b: (a @ b,), (A, B), (1, None), (None,)),
    (lambda a, b: (a @ b,), (A, B), (None, 1), (1,)),                 # split rhs free
    (lambda a, b: (a @ b,), (A, B), (None, 0), (None,)),
    (lambda c: (jnp.einsum("bij,bkj->bik", c, c),), (C,), (0,), (0,)),  # batch dimension
    (lambda c: (jnp.einsum("bij,bkj->bik", c, c),), (C,), (1,), (1,)),
    (lambda a: (a.sum(0), a.max(1), a.min(), jnp.any(a > 2, axis=0), jnp.all(a > 0, 0)),
     (A,), (0,), (None, 0, None, None, None)),
    (lambda a: (a.sum(0), jnp.max(a, 1), jnp.min(a)), (A,), (1,), (0, None, None)),
    (lambda a: (a.reshape(2, 12), a.reshape(8, 3), a.reshape(4, 2, 3), a[:, None, :]),
     (A,), (0,), (0, 0, 0, 0)),
    (lambda c: (jnp.einsum("bij,bkj->bik", c, c),), (C,), (2,), (None,)),
    (lambda c: (c.reshape(8, 4), c.reshape(2, 16), jnp.squeeze(c[:, :1, :], 1)),
     (C,), (2,), (1, None, 1)),
    (lambda a, b: (jnp.sort(a, axis=0) + 1, a + b.sum(1)[:, None].T[:, :4].T),
     (A, B), (0, 0), (0, 1)),
    (lambda a: (jax_like_mean_loss(a),), (A,), (0,), (None,)),
]


def jax_like_mean_loss(a):
    return jnp.mean(jnp.sum(kiln.nn.log_softmax(a) * a, axis=1))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_partitioned_functions_agree_with_the_whole(case):
    fun, args, in_dims, out_dims = CASES[case]
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(*args, *st.extra)
    for got, want in zip(run_partitioned(fun, args, in_dims, out_dims)[0], whole):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


S = np.array(3, np.int32)            # a traced start index
N = A.copy()
N[3, 2] = N[1, 4] = np.nan           # argmax/argmin pick the first NaN, as in JAX
T = np.array([[1, 5, 5], [5, 2, 0], [5, 5, 1], [0, 1, 5]], np.int32)   # ties across blocks
LABELS = np.array([0, 5, 2, 1], np.int32)

INFERRED = [   # (function, arguments, split dimension of each, inferred split of each output)
    (lambda a, s: (a[:, 1:5:2], lax.dynamic_slice_in_dim(a, s, 2, axis=1),
                   lax.dynamic_update_slice(a, a[:, :2] * 3, (0, s)), jnp.pad(a, ((0, 0), (1, 2))),
                   a[:, ::-1], a[1:3]),
     (A, S), (0, None), (0, 0, 0, 0, 0, 0)),
    (lambda a: (a.sum(1), a.max(1), jnp.prod(a, 0), jnp.prod(a, 1), a.max(0)),
     (A,), (0,), (0, 0, None, 0, None)),
    (lambda a, b: (jnp.concatenate([a, b.T * 2], axis=1), jnp.concatenate([a, a])),
     (A, B), (0, 1), (0, 0)),                    # along the split: partition_rows.py
    (lambda a: (a.reshape(4, 2, 3), a.reshape(24), a.T, jnp.sort(a, axis=1), jnp.sort(a, 0)),
     (A,), (0,), (0, 0, 1, 0, None)),
    (lambda a, b, c: (jnp.einsum("bij,bkj->bik", c, c), a @ b, b.T @ a.T),
     (A, B, C), (0, None, 0), (0, 0, 1)),
    (lambda n, t: (jnp.argmax(n, 0), jnp.argmin(n, 0), jnp.argmax(t, 0), jnp.argmin(t, 0),
                   jnp.argmax(n, 1), jnp.max(t, 0)),
     (N, T), (0, 0), (None, None, None, None, 0, None)),
    (lambda a: (jnp.cumsum(a, 0), lax.cumsum(a, 0, reverse=True), jnp.cumprod(a, 0),
                lax.cummax(a, 0), lax.cummin(a, 0, reverse=True), lax.cumlogsumexp(a, 0),
                jnp.cumsum(a, 1)),
     (A,), (0,), (0, 0, 0, 0, 0, 0, 0)),
    (lambda a, labels: (jnp.mean(jnp.argmax(a, 1) == labels), jnp.argmax(a, 1)),
     (A, LABELS), (0, 0), (None, 0)),
    (lambda a, r: (a * r[:4, None], a - r, jnp.broadcast_to(r[:4, None, None], (4, 2, 3)) *
                   a.reshape(4, 2, 3)),                  # replicated broadcasts meet blocks
     (A, np.arange(6.0, dtype=np.float32) / 3), (0, None), (0, 0, 0)),
]
LAYOUTS = [(0, 1), (1, 0), (0, 0, 1, 1), (1, 0, 1, 0)]


@pytest.mark.parametrize("owners", LAYOUTS)
@pytest.mark.parametrize("case", range(len(INFERRED)))
def test_outputs_keep_the_split_the_rules_give_them(case, owners):
    fun, args, in_dims, expected = INFERRED[case]
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(*args, *st.extra)
    got, dims = run_partitioned(fun, args, in_dims, [INFER] * len(expected), owners)
    assert dims == list(expected)
    for g, w in zip(got, whole):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_the_new_rules_move_only_what_they_must():
    """Slices, concatenations, reshapes and reductions along other dimensions keep the blocks
    without communication (a sort along the split dimension gathers; a concatenation along
    it, [a, a] over 2 blocks of 2 rows, swaps one block of rows each way; a slice along it,
    a[1:3], leaves each row where it is); argmax over the split dimension is three allreduces for floats (best value,
    any NaN, first index) and two for integers; a cumsum along it one allgather of the block
    totals. (In case 5, max(t, 0) is the allreduce of argmax(t, 0)'s best value, shared.)"""
    for k, crossings in ((0, {}), (2, {"process_sendrecv": 2}),
                         (3, {"process_allgather": 1}), (5, {"process_allreduce": 2 * 3 + 2 * 2}),
                         (6, {"process_allgather": 6})):
        fun, args, in_dims, expected = INFERRED[k]
        st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
        local, _ = partition(st.fn, list(in_dims) + [None] * len(st.extra),
                             [INFER] * len(expected), Grid(1, (0, 1)))
        held = prims(local)
        for name in ("process_allreduce", "process_allgather", "process_sendrecv"):
            assert held.count(name) == crossings.get(name, 0), (k, name, held)


ROWS = np.arange(48.0, dtype=np.float32).reshape(8, 6) / 7
IDS = np.array([1, 7, 3, 0, -2, 9, 5, 3], np.int32)   # negative, out of range and repeated
FOURS = [(0, 1, 2, 3), (3, 2, 1, 0), (1, 0, 1, 0)]

MOVED = [   # (function, arguments, split dimension of each, split of each output over 2 and 4)
    (lambda x: (x[2:], x[:-2], x[1:7], x[::-1], jnp.pad(x, ((1, 3), (0, 0))),
                jnp.pad(x, ((2, 2), (1, 0)), constant_values=5.0), lax.slice(x, (3, 1), (5, 6)),
                lax.pad(x, np.float32(-1), ((-2, 2, 0), (0, 0, 0)))),
     (ROWS,), (0,), ((0, 0, 0, 0, 0, 0, 0, 0), (None, None, None, 0, 0, 0, None, 0))),
    (lambda x, i: (x[i], jnp.take(x, i, axis=0, mode="fill"), jnp.take(x, i, 0, mode="clip"),
                   x.at[i].add(1.0), x.at[i].set(2.0), x.at[i].max(3.0), x.at[i, 1:].get(),
                   x[i, 2]),
     (ROWS, IDS), (0, None), ((None, None, None, 0, 0, 0, None, None),) * 2),
    (lambda x, i: (x[i].sum(), jnp.take(x.astype(np.int32), i[:3], axis=0),
                   (x > 2)[i], x.T[:, i]),
     (ROWS, IDS), (0, 0), ((None, None, None, None),) * 2),
    (lambda x: (x[:, 2:4], x[::2], jnp.pad(x, ((0, 0), (1, 1))),
                lax.pad(x, np.float32(0), ((1, 1, 1), (0, 0, 0)))),
     (ROWS,), (0,), ((0, 0, 0, None),) * 2),
    (lambda x: (x[1::2], x[::3], x[7:0:-2], lax.slice(x, (1, 0), (8, 6), (3, 2))),
     (ROWS,), (0,), ((0, None, 0, None), (0, None, 0, None))),
]


@pytest.mark.parametrize("owners", LAYOUTS + FOURS)
@pytest.mark.parametrize("case", range(len(MOVED)))
def test_rows_move_along_the_split_dimension(case, owners):
    """Slices, pads and reversals along the split dimension keep it split where the block
    count divides the result (else gather: x[2:] over 4 blocks); gathers of whole rows are
    replicated, scatters into them stay split; all agree with the whole function."""
    fun, args, in_dims, expected = MOVED[case]
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(*args, *st.extra)
    got, dims = run_partitioned(fun, args, in_dims, [INFER] * len(whole), owners)
    assert dims == list(expected[max(owners) == 3])
    for g, w in zip(got, whole):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("owners", [(0, 1), (1, 0, 1, 0), (0, 1, 2, 3)])
@given(start=st_.integers(-4, 6), stop=st_.integers(-3, 8), step=st_.integers(1, 4),
       lo=st_.integers(-3, 4), hi=st_.integers(-3, 4), rows=st_.sampled_from([4, 8, 12]),
       dtype=st_.sampled_from([np.float32, np.int32, np.bool_]))
@settings(max_examples=10)
def test_any_slice_or_pad_of_the_split_dimension(owners, start, stop, step, lo, hi, rows,
                                                 dtype):
    x = (np.arange(rows * 3).reshape(rows, 3) % 5).astype(dtype)

    def fun(v):
        return v[start:stop:step], lax.pad(
            v, np.zeros((), dtype), ((lo, max(hi, -rows - lo), 0), (0, 0, 0)))
    st, _, _ = staging.stage_call(fun, (x,), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(x, *st.extra)
    got, _ = run_partitioned(fun, (x,), (0,), [INFER, INFER], owners)
    for g, w in zip(got, whole):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("owners", [(0, 1), (1, 0, 1, 0), (0, 1, 2, 3)])
@given(ids=st_.lists(st_.integers(-10, 10), min_size=0, max_size=6),
       rows=st_.sampled_from([4, 8]), dtype=st_.sampled_from([np.float32, np.int32, np.bool_]))
@settings(max_examples=10)
def test_any_lookup_or_scatter_of_rows(owners, ids, rows, dtype):
    x = (np.arange(rows * 2).reshape(rows, 2) % 3).astype(dtype)
    i = np.array(ids, np.int32)

    def fun(v, k):
        return (v[k], jnp.take(v, k, axis=0, mode="fill", fill_value=1),
                v.at[k].set(v[0]), v.at[k].max(v[-1]))
    st, _, _ = staging.stage_call(fun, (x, i), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(x, i, *st.extra)
    got, _ = run_partitioned(fun, (x, i), (0, None), [INFER] * 4, owners)
    for g, w in zip(got, whole):
        np.testing.assert_array_equal(g, w)


def test_moving_rows_sends_only_the_rows_that_cross_blocks():
    """x[2:] over 2 blocks (of 4 rows; the result's of 3): one round in which block 1 sends
    its first row to block 0 (rows 2, 3 and 4);
    x[1:7]: none (each block keeps its rows); x[::-1]: one round (block swap); an embedding
    lookup: one allreduce of the looked-up rows, its scatter-add none; nothing gathers."""
    def fun(x, i):
        return x[2:] * 2, x[1:7], x[::-1], x[i], x.at[i].add(1.0)
    st, _, _ = staging.stage_call(fun, (ROWS, IDS), {}, staging.StaticArgs(fun))
    for p in (0, 1):
        local, _ = partition(st.fn, [0, None] + [None] * len(st.extra), [INFER] * 5,
                             Grid(p, (0, 1)))
        fn = staging.run_pipeline(local, "reference")
        sends = [(e.params["dest"], e.params["source"], e.invars[0].aval.shape)
                 for e in fn.eqns if e.prim.name == "process_sendrecv"]
        assert sends == ([(None, 1, (1, 6)), (1, 1, (4, 6))] if p == 0 else
                         [(0, None, (1, 6)), (0, 0, (4, 6))]), (p, sends)
        assert prims(fn).count("process_allreduce") == 1
        assert "process_allgather" not in prims(fn)


def test_the_embedding_step_under_grad():
    """The lookup's forward pass is the masked lookup and one allreduce; its gradient (a
    scatter-add into zeros with the lookup's indices) stays split like the table, each
    process adding into its block's zeros: no gather of the table."""
    def loss(table, ids):
        return jnp.sum(jnp.tanh(table[ids]) ** 2)
    fun = kiln.value_and_grad(loss)
    st, _, _ = staging.stage_call(fun, (ROWS, IDS), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(ROWS, IDS, *st.extra)
    for owners in ((0, 1), (1, 0, 1, 0)):
        got, dims = run_partitioned(fun, (ROWS, IDS), (0, None), [INFER, INFER], owners)
        assert dims == [None, 0]
        for g, w in zip(got, whole):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    local, _ = partition(st.fn, [0, None] + [None] * len(st.extra), [INFER, INFER],
                         Grid(0, (0, 1)))
    assert prims(local).count("process_allreduce") == 1 and "process_allgather" not in \
        prims(local)
    added = [e.outvars[0].aval.shape for e in staging.run_pipeline(local, "reference").eqns
             if e.prim.name == "scatter_add"]
    assert added == [(4, 6)]   # into the block's zeros, not the whole table's


ROWS_A, COLS_B = (0, 0, 1, 1), (0, 1, 0, 1)   # 4 processes as a 2 x 2 mesh ("a", "b")
M = (np.arange(48.0, dtype=np.float32).reshape(8, 6) - 20) / 9
W = np.arange(18.0, dtype=np.float32).reshape(6, 3) / 10
V = np.arange(8.0, dtype=np.float32) - 3

TILED = [   # (function, arguments, each one's split over "a" and over "b",
            #  each output's (the split the computation leaves it))
    (lambda m: (jnp.tanh(m) * 2 + m, m.sum(), m.sum(0), m.sum(1), m.max(0), jnp.min(m, 1),
                m.T, jnp.argmax(m, 1)),
     (M,), ([0, 1],), ([0, 1], [None, None], [None, 0], [0, None], [None, 0], [0, None],
                       [1, 0], [0, None])),
    (lambda m, w: (m @ w, jnp.mean(m @ w), m @ w + 1),
     (M, W), ([0, 1], [None, None]), ([0, None], [None, None], [0, None])),
    (lambda x, w: (x @ w, x * 2),                    # rows over "a" only, whole over "b"
     (M, W), ([0, None], [None, None]), ([0, None], [0, None])),
    (lambda m, v: (m + v[:, None], m * m.mean(0), jnp.cumsum(m, 1), m[2:6, 1:5] * 2),
     (M, V), ([0, 1], [0, None]), ([0, 1], [0, 1], [0, 1], [0, 1])),
]


def run_tiled(fun, args, in_dims, out_dims):
    """`fun` partitioned over the 2 x 2 mesh of 4 "processes" as sharded jit does it
    (global_jit._partition: over "a", then over "b"), each thread on its blocks; each
    process's results, with each one's split over "a" and "b"."""
    from kiln.global_jit import _partition
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    axes = [(ROWS_A, None, None), (COLS_B, None, None)]
    dims = [None] * 4

    def process(p):
        fn, dims[p] = _partition(st.fn, list(in_dims) + [[None, None]] * len(st.extra),
                                 out_dims, axes, p, st.extra)
        blocks = [_tile(np.asarray(a), d, p) for a, d in zip(args, in_dims)]
        return staging.compile_function(fn, "reference")(*blocks, *st.extra)
    results = as_threads(4, process)
    return results, dims[0]


def _tile(a, dims, p):
    """Process p's block of `a`, split along dims[0] over "a" and dims[1] over "b"."""
    for d, owners in zip(dims, (ROWS_A, COLS_B)):
        if d is not None:
            a = np.split(a, 2, axis=d)[owners[p]]
    return a


@pytest.mark.parametrize("case", range(len(TILED)))
def test_two_dimensions_split_over_a_two_by_two_mesh(case):
    """Each process's results are its blocks of the whole function's (split over "a", then
    within that over "b"); reductions over one split dimension combine the blocks of the
    process's row or column of the mesh only."""
    fun, args, in_dims, expected = TILED[case]
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    whole = staging.compile_function(st.fn, "reference")(*args, *st.extra)
    results, dims = run_tiled(fun, args, in_dims, [INFER] * len(whole))
    assert dims == [list(d) for d in expected]
    for p in range(4):
        for got, want, d in zip(results[p], whole, dims):
            np.testing.assert_allclose(got, _tile(np.asarray(want), d, p), rtol=1e-5,
                                       atol=1e-5)


def test_a_reduction_over_one_mesh_axis_reads_its_row_of_the_mesh():
    """m.sum(1) of m split P("a", "b"): the local row sums, one sendrecv with the other
    process of this process's row of the mesh (3 for process 2), and the two blocks' sum in
    block order (the same bits in both)."""
    st, _, _ = staging.stage_call(lambda m: m.sum(1), (M,), {},
                                  staging.StaticArgs(lambda m: m.sum(1)))
    from kiln.global_jit import _partition
    fn, dims = _partition(st.fn, [[0, 1]], [INFER], [(ROWS_A, None, None),
                                                      (COLS_B, None, None)], 2)
    fn = staging.run_pipeline(fn, "reference")
    assert dims == [[0, None]] and "process_allgather" not in prims(fn)
    assert [(e.params["dest"], e.params["source"]) for e in fn.eqns
            if e.prim.name == "process_sendrecv"] == [(3, 3)]


FOUR = """
import sys
import numpy as np
import kiln, kiln.numpy as jnp
from kiln import P
from kiln.sharding import NamedSharding
sys.path.insert(0, {tests!r})
from test_global_arrays import step

kiln.config.update("jax_num_cpu_devices", 1)
kiln.distributed.initialize()
p = kiln.process_index()
mesh = kiln.make_mesh((2, 2), ("x", "y"))            # 4 processes of one device, as 2 x 2
whole = NamedSharding(mesh, P())
rng = np.random.default_rng(1)
X = rng.normal(size=(8, 5)).astype(np.float32)
Y = np.eye(3, dtype=np.float32)[np.arange(8) % 3]
params = [rng.normal(size=(5, 3)).astype(np.float32) * 0.3, np.zeros(3, np.float32)]
once = kiln.jit(step)(params, X, Y)
for name, spec in (("both", P(("x", "y"))), ("rows", P("x"))):
    s = NamedSharding(mesh, spec)
    x, y = kiln.device_put(X, s), kiln.device_put(Y, s)
    ps = kiln.jit(step, in_shardings=(whole, s, s), out_shardings=whole)(params, x, y)
    sums = kiln.jit(lambda v: (jnp.cumsum(v, 0), jnp.argmax(v, 0)))(x)
    b = x.owners[p]
    width = 8 // (max(x.owners) + 1)
    print(p, name, x.owners, type(sums[0]).__name__,
          np.allclose(sums[0].local, np.cumsum(X, 0)[b * width:(b + 1) * width], atol=1e-5),
          np.array_equal(np.asarray(sums[1]), np.argmax(X, 0)),
          max(float(np.abs(np.asarray(a) - w).max()) for a, w in zip(ps, once)) < 1e-5)
from kiln.experimental.multihost_utils import process_allgather
tiles = NamedSharding(mesh, P("x", "y"))
Z = rng.normal(size=(8, 6)).astype(np.float32)
Wz = rng.normal(size=(6, 3)).astype(np.float32)
z = kiln.device_put(Z, tiles)
outs = kiln.jit(lambda m, w: (jnp.tanh(m) * 2 + 1, m.sum(0), m.sum(1), m.sum(), m @ w,
                              m.max(1), m[2:6, 1:5], jnp.cumsum(m, 1), m.T),
                in_shardings=(tiles, whole))(z, Wz)
wants = (np.tanh(Z) * 2 + 1, Z.sum(0), Z.sum(1), Z.sum(), Z @ Wz, Z.max(1), Z[2:6, 1:5],
         np.cumsum(Z, 1), Z.T)
print(p, "tiles", z.split, [type(o).__name__ for o in outs],
      [str(o.sharding.spec) for o in outs if type(o).__name__ == "GlobalArray"],
      all(np.allclose(process_allgather(o, tiled=True) if type(o).__name__ == "GlobalArray"
                      else np.asarray(o), w, atol=1e-4) for o, w in zip(outs, wants)))
placed = kiln.jit(lambda m, w: (m.T @ m, (m @ w).sum(1)),
                  out_shardings=(tiles, whole))(z, kiln.device_put(Wz, whole))
print(p, "placed", type(placed[0]).__name__, placed[0].local.shape, type(placed[1]).__name__,
      np.allclose(process_allgather(placed[0], tiled=True), Z.T @ Z, atol=1e-4),
      np.allclose(np.asarray(placed[1]), (Z @ Wz).sum(1), atol=1e-4))
"""


@needs_mpi
def test_four_processes_as_two_by_two_under_mpirun(tmp_path):
    rc, out, _ = mpirun(tmp_path, FOUR.format(tests=str(pathlib.Path(__file__).parent)), np_=4,
                        limit=300)
    assert rc == 0, out
    for p in range(4):
        assert f"{p} both (0, 1, 2, 3) GlobalArray True True True" in out, out
        assert f"{p} rows (0, 0, 1, 1) GlobalArray True True True" in out, out
        assert f"{p} placed GlobalArray (3, 3) Array True True" in out, out
        assert f"{p} tiles (0, 1) ['GlobalArray', 'GlobalArray', 'GlobalArray', 'Array', " \
               f"'GlobalArray', 'GlobalArray', 'GlobalArray', 'GlobalArray', 'GlobalArray'] " \
               f"[\"P('x', 'y')\", \"P('y',)\", \"P('x',)\", \"P('x',)\", \"P('x',)\", " \
               f"\"P('x', 'y')\", \"P('x', 'y')\", \"P('y', 'x')\"] True" in out, out
