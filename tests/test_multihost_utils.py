"""kiln.experimental.multihost_utils against JAX's in one process, and under `mpirun -np 2`
(each function across the processes: runtime/experimental/multihost_utils.py)."""
import json

import numpy as np
import pytest

import kiln
from kiln.experimental import multihost_utils as mhu

from test_distributed import mpirun, needs_mpi

jax = pytest.importorskip("jax")
from jax.experimental import multihost_utils as jax_mhu  # noqa: E402

TREE = {"a": np.arange(6.0).reshape(2, 3), "b": np.int32(3), "c": [np.ones(2, np.float16)]}


@pytest.mark.parametrize("tiled", [False, True])
def test_process_allgather_matches_jax_in_one_process(tiled):
    ours, theirs = mhu.process_allgather(TREE, tiled), jax_mhu.process_allgather(TREE, tiled)
    for o, t in zip(kiln.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert type(o) is np.ndarray and o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_array_equal(o, t)


def test_broadcast_assert_and_barrier_in_one_process():
    out = mhu.broadcast_one_to_all(TREE)
    assert all(type(x) is np.ndarray for x in kiln.tree_util.tree_leaves(out))
    np.testing.assert_array_equal(out["a"], TREE["a"])
    mhu.assert_equal(TREE, "same")
    mhu.sync_global_devices("here")
    assert mhu.reached_preemption_sync_point(7) is jax_mhu.reached_preemption_sync_point(7)


def test_host_local_and_global_in_one_process():
    mesh = kiln.make_mesh((1,), ("x",))
    g = mhu.host_local_array_to_global_array({"w": np.arange(4.0)}, mesh, kiln.P("x"))["w"]
    assert g.sharding == kiln.sharding.NamedSharding(mesh, kiln.P("x"))
    back = mhu.global_array_to_host_local_array(g, mesh, kiln.P("x"))
    np.testing.assert_array_equal(np.asarray(back), np.arange(4.0))
    with pytest.raises(ValueError, match="PartitionSpec\\(\\) if you wanted to replicate"):
        mhu.host_local_array_to_global_array(np.arange(4.0), mesh, None)
    with pytest.raises(ValueError, match="structure of the inputs"):
        mhu.host_local_array_to_global_array([np.ones(2), np.ones(2)], mesh, [kiln.P("x")])


SCRIPT = """
import json, signal, os
import numpy as np
import kiln
from kiln.experimental import multihost_utils as mhu
from kiln.sharding import NamedSharding

kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
p = kiln.process_index()
out = {}
tree = {"f": np.arange(6.0).reshape(2, 3) + p, "i": np.int32(10 * p), "b": np.array([p == 1, True])}
stacked = mhu.process_allgather(tree)
tiled = mhu.process_allgather(tree, tiled=True)
out["stacked"] = {k: v.tolist() for k, v in stacked.items()}
out["tiled"] = {k: v.tolist() for k, v in tiled.items()}
out["dtypes"] = [str(v.dtype) for v in stacked.values()]
out["bcast"] = {k: np.asarray(v).tolist() for k, v in mhu.broadcast_one_to_all(tree).items()}
out["bcast1"] = mhu.broadcast_one_to_all(np.float32(p + 5), is_source=p == 1).tolist()
mhu.assert_equal({"x": np.arange(3)}, "equal")
try:
    mhu.assert_equal(np.arange(3) + p, "differs")
    out["assert"] = "passed"
except AssertionError as e:
    out["assert"] = str(e)[:8]
try:
    mhu.process_allgather(np.zeros(2 + p))
except ValueError as e:
    out["shapes"] = "processes [" in str(e) and "same shapes" in str(e)
mhu.sync_global_devices("step")
try:
    mhu.sync_global_devices(f"name{p}")
except AssertionError as e:
    out["sync"] = "sync_global_devices name mismatch" in str(e)
mesh = kiln.make_mesh((4,), ("batch",))
g = mhu.host_local_array_to_global_array(np.arange(4.0) * (p + 1), mesh, kiln.P("batch"))
out["global"] = [type(g).__name__, list(g.shape)]
out["whole"] = mhu.process_allgather(g, tiled=True).tolist()
try:
    mhu.process_allgather(g)
except ValueError as e:
    out["untiled"] = "only supports tiled=True" in str(e)
local = mhu.global_array_to_host_local_array(g, mesh, kiln.P("batch"))
out["local"] = [np.asarray(local).tolist(), [d.id for d in local.sharding.mesh.devices.flat]]
steps = []
for step in range(6):
    if step == 2 and p == 1:
        os.kill(os.getpid(), signal.SIGTERM)
    steps.append(mhu.reached_preemption_sync_point(step))
out["preempt"] = steps
print("RESULT", p, json.dumps(out))
"""


@needs_mpi
def test_multihost_utils_under_mpirun(tmp_path):
    rc, text, _ = mpirun(tmp_path, SCRIPT, limit=120)
    assert rc == 0, text
    results = {int(line.split()[1]): json.loads(line.split(maxsplit=2)[2])
               for line in text.splitlines() if line.startswith("RESULT")}
    assert set(results) == {0, 1}, text
    f = [np.arange(6.0).reshape(2, 3) + p for p in (0, 1)]
    for p, out in results.items():
        assert out["stacked"]["f"] == np.stack(f).tolist()
        assert out["stacked"]["i"] == [0, 10] and out["tiled"]["i"] == [0, 10]
        assert out["stacked"]["b"] == [[False, True], [True, True]]
        assert out["tiled"]["f"] == np.concatenate(f).tolist()
        assert out["dtypes"] == ["bool", "float64", "int32"]   # the keys in sorted order
        assert out["bcast"] == {"f": f[0].tolist(), "i": 0, "b": [False, True]}
        assert out["bcast1"] == 6.0
        assert out["assert"] == "differs." and out["shapes"] and out["sync"]
        assert out["global"] == ["GlobalArray", [8]] and out["untiled"]
        assert out["whole"] == [0.0, 1.0, 2.0, 3.0, 0.0, 2.0, 4.0, 6.0]
        assert out["local"] == [(np.arange(4.0) * (p + 1)).tolist(), [2 * p, 2 * p + 1]]
        assert out["preempt"] == [False, False, False, True, False, False]
