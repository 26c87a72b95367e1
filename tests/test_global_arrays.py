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

import kiln
import kiln.numpy as jnp
from kiln import P, staging
from kiln.distributed import compiling_for
from kiln.global_arrays import GlobalArray
from kiln.sharding import Mesh, NamedSharding
from kiln.compiler.transforms.partition import partition
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
    reversed_mesh = Mesh(np.array(firsts()[::-1], dtype=object), ("batch",))
    with pytest.raises(NotImplementedError, match="process p holding block p"):
        kiln.make_array_from_process_local_data(NamedSharding(reversed_mesh, P("batch")), X[4:])
    a = kiln.make_array_from_process_local_data(batch, X[4:])
    with pytest.raises(NotImplementedError, match="another layout across the processes"):
        kiln.device_put(a, NamedSharding(batch.mesh, P(None, "batch")))
    with pytest.raises(ValueError, match="pmap takes one entry per device"):
        kiln.pmap(lambda v: v)(a)
    with pytest.raises(ValueError, match="split across the processes along axis 0: map it "
                                         "along axis 0"):
        kiln.pmap(lambda v: v, in_axes=1)(kiln.make_array_from_process_local_data(
            batch, X[4:5]))


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
    local = partition(st.fn, [None, None, 0, 0], [None, None], 1, 2)
    assert [v.aval.shape for v in local.invars] == [(4, 3), (3,), (4, 4), (4, 3)]
    assert [v.aval.shape for v in local.outvars] == [(4, 3), (3,)]
    held = prims(local)
    assert held.count("process_allreduce") == 2 and "process_allgather" not in held   # one
    # allreduce per gradient (the loss's own is dead code)


def test_a_primitive_without_a_rule_runs_on_gathered_values():
    def sorted_rows(x):
        return jnp.sort(x, axis=0) * 2
    st, _, _ = staging.stage_call(sorted_rows, (X,), {}, staging.StaticArgs(sorted_rows))
    local = partition(st.fn, [0], [0], 0, 2)
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


class TwoThreads:
    """An engine for `processes.set_engine` that runs two "processes" as two threads of this
    one: each collective waits for both and combines their operands in thread order."""

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=20)
        self.slots = [None, None]
        self.local = threading.local()

    def _exchange(self, x):
        self.slots[self.local.process] = np.array(x)
        self.barrier.wait()
        both = list(self.slots)
        self.barrier.wait()
        return both

    def allreduce(self, x, op):
        a, b = self._exchange(x)
        return {"sum": np.add, "max": np.maximum, "min": np.minimum}[op](a, b)

    def allgather(self, x):
        return np.stack(self._exchange(x))


def run_partitioned(fun, args, in_dims, out_dims):
    """`fun`'s outputs on `args` (whole values) computed as two processes would: each runs the
    partitioned SSA (reference backend) on its blocks; the split outputs joined."""
    st, _, _ = staging.stage_call(fun, tuple(args), {}, staging.StaticArgs(fun))
    engine = TwoThreads()
    results = [None, None]

    def process(p):
        try:
            engine.local.process = p
            fn = partition(st.fn, list(in_dims) + [None] * len(st.extra), out_dims, p, 2)
            blocks = [np.split(np.asarray(a), 2, axis=d)[p] if d is not None else a
                      for a, d in zip(args, in_dims)]
            results[p] = staging.compile_function(fn, "reference")(*blocks, *st.extra)
        except Exception as e:   # noqa: BLE001 - reported by the calling thread
            engine.barrier.abort()
            results[p] = e
    set_engine(engine)
    try:
        threads = [threading.Thread(target=process, args=(p,)) for p in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        set_engine(None)
    for r in results:
        if isinstance(r, Exception):
            raise r
    outs = []
    for k, d in enumerate(out_dims):
        if d is None:
            np.testing.assert_array_equal(results[0][k], results[1][k])
            outs.append(results[0][k])
        else:
            outs.append(np.concatenate([results[0][k], results[1][k]], axis=d))
    return outs


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
    for got, want in zip(run_partitioned(fun, args, in_dims, out_dims), whole):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
