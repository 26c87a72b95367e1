"""Memory of the LLVM backend: in-place updates, donated arguments, peak memory.

- In place (buffers.plan_storage): dynamic_update_slice, scatter and elementwise code write
  over an operand that nothing reads afterwards, and a loop carry the body updates in place
  lives in one buffer for the whole loop. Programs of updates (operands read afterwards or
  not, loops with several carries, swapped carries, scans with stacked outputs, nested loops,
  trip counts 0 and 1) are drawn with hypothesis and compared with the reference backend; the
  plans themselves are checked (a row update in a fori_loop copies nothing per trip). A
  reduction over axes of size 1 and a broadcast inserting axes of size 1 read their operand
  in place, and an output they make of a temporary is that temporary, computed in the output
  buffer (what jit(pmap(psum)) leaves with one device per process).
- Donation (`donate_argnums` / `donate_argnames`, as in JAX): an output of a donated input's
  shape and dtype is computed in its buffer, the donated Array is deleted (using it raises
  JAX's error), an unusable donation warns and leaves the argument alone, and a buffer that
  something else still uses (a NumPy view, another argument, a NumPy array argument) is
  copied first, never overwritten; a second process loading the code from the disk cache
  still donates.
- Peak memory of `x * x + x * 2.0` on a 5000x5000 float32 array is the input plus the output:
  measured in a subprocess as the growth of the peak resident set during one call (Linux's
  VmHWM, reset through /proc/self/clear_refs) with the buffer pool off, so that the output
  is fresh memory and any temporary would show; resident memory does not depend on timing,
  so the measure holds on a loaded machine.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.llvm import codegen
from kiln.compiler.backends.llvm.executable import donation

SETTINGS = settings(max_examples=15, deadline=None)


def reference(f, *args, **kwargs):
    out = kiln.jit(f, backend="reference", **kwargs)(*args)
    return kiln.tree_util.tree_map(np.asarray, out)


def check(got, want):
    got = kiln.tree_util.tree_map(np.asarray, got)
    for g, w in zip(kiln.tree_util.tree_leaves(got), kiln.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def plan_of(f, *args, donated=()):
    """The storage plan of `f`'s top-level function as the LLVM backend compiles it."""
    fn = kiln.jit(f).lower(*args)._entry.ssa
    return fn, codegen.plan_function(fn, donation(fn, donated))


def address(a):
    return np.asarray(a).__array_interface__["data"][0]


def ones(shape, dtype=np.float32):
    """A kiln Array owning a fresh buffer (`jnp.ones` may be a broadcast view)."""
    return jnp.asarray(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) % 7 + 1)


# ------------------------------------------------------------------------- in place

def updates(x, i, j, rows, read_after):
    t = x * 1.5
    u = t.at[i].set(rows[0])
    v = u.at[j].add(rows[1])
    w = lax.dynamic_update_slice(v, rows[:1] * 2.0, (j, 0))
    s = w.at[jnp.array([i, j, i])].max(rows[2])
    if read_after:   # the operands stay alive: nothing may be updated in place
        return s, t + u.sum(), v * w
    return s


@SETTINGS
@given(st.integers(1, 5), st.integers(0, 4), st.integers(-6, 6), st.integers(-6, 6),
       st.booleans(), st.sampled_from([np.float32, np.float64, np.int32]))
def test_update_chains_match_the_reference(n, m, i, j, read_after, dtype):
    x = np.arange(n * m, dtype=dtype).reshape(n, m)
    rows = (np.arange(3 * m, dtype=dtype).reshape(3, m) + 3).astype(dtype)
    f = kiln.jit(updates, static_argnums=4)
    check(f(x, np.int32(i), np.int32(j), rows, read_after),
          reference(updates, x, np.int32(i), np.int32(j), rows, read_after,
                    static_argnums=4))


def test_an_update_chain_shares_one_buffer():
    x, rows = np.ones((6, 4), np.float32), np.ones((3, 4), np.float32)
    fn, plan = plan_of(lambda x, i, j, r: updates(x, i, j, r, False), x, np.int32(1),
                       np.int32(2), rows)
    updating = [e for e in fn.eqns
                if e.prim.name in ("scatter", "scatter_add", "scatter_max", "dynamic_update_slice")]
    assert len(updating) == 4
    assert len({plan.location(e.outvars[0]) for e in updating}) == 1
    assert all(plan.location(e.outvars[0]) == plan.location(e.invars[0]) for e in updating)


def fori_rows(x, rows, n=None):
    n = rows.shape[0] if n is None else n
    return lax.fori_loop(0, n, lambda i, x: x.at[i].set(rows[i] * 2.0), x)


def test_a_row_update_in_a_fori_loop_copies_nothing_per_trip():
    """The carry is computed in place by the loop body (and by the loop, on a donated
    input): the body's scatter has one buffer for operand and result."""
    x, rows = np.zeros((50, 8), np.float32), np.ones((5, 8), np.float32)
    fn, plan = plan_of(fori_rows, x, rows, donated=(0,))
    loop = next(e for e in fn.eqns if e.prim.name in ("scan", "while_loop"))
    from kiln.compiler.backends.llvm.lower_control import _Carries
    body = loop.params["body"] if loop.prim.name == "scan" else loop.params["body_fn"]
    carries = _Carries(body, loop.params["num_consts"], len(loop.outvars)
                       if loop.prim.name == "while_loop" else loop.params["num_carry"])
    assert carries.inplace == {1}
    assert plan.held == {0: 0}
    check(kiln.jit(fori_rows)(x, rows), reference(fori_rows, x, rows))


def scaled_then_rows(x, rows):
    return fori_rows(x * 2.0, rows)


def test_a_loop_runs_in_place_on_a_dying_temporary():
    """x * 2.0 is computed in the output buffer, and the loop updates it there."""
    x, rows = np.ones((64, 8), np.float32), np.ones((5, 8), np.float32)
    fn, plan = plan_of(scaled_then_rows, x, rows)
    loop = next(e for e in fn.eqns if e.prim.name in ("scan", "while_loop"))
    start = loop.invars[loop.params["num_consts"] + 1]
    assert plan.location(start) == plan.location(loop.outvars[1]) == ("out", 0)
    assert plan.workspace < x.nbytes
    check(kiln.jit(scaled_then_rows)(x, rows), reference(scaled_then_rows, x, rows))


def swap_loop(a, b, n):
    def body(k, carry):
        a, b, c = carry
        return b.at[k % b.shape[0]].set(a[0] + c), a, c * 2.0
    return lax.fori_loop(0, n, body, (a, b, jnp.float32(1.0)))


def nested_loop(x, n):
    def outer(i, x):
        def inner(carry):
            k, y = carry
            return k + 1, y.at[(i + k) % y.shape[0]].add(1.0)
        return lax.while_loop(lambda c: c[0] < i, inner, (0, x))[1] * 0.5
    return lax.fori_loop(0, n, outer, x)


def scan_with_ys(x, rows):
    def body(c, r):
        c2 = c.at[0].set(r)
        return c2, c2.sum(axis=1)
    return lax.scan(body, x, rows)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 5))
def test_loops_with_carries_updated_in_place_match_the_reference(n, m, trips):
    a = np.arange(n * m, dtype=np.float32).reshape(n, m)
    b = -a - 1
    rows = np.arange(trips * m, dtype=np.float32).reshape(trips, m)
    some_rows = np.arange((trips + 1) * m, dtype=np.float32).reshape(trips + 1, m)
    for f, args in ((swap_loop, (a, b, trips)), (nested_loop, (a, trips)),
                    (scan_with_ys, (a, rows)),
                    (fori_rows, (np.zeros((trips + 2, m), np.float32), some_rows, trips))):
        check(kiln.jit(f)(*args), reference(f, *args))


def elementwise_after_matmul(x, w):
    t = x @ w
    return jnp.tanh(t) * 2.0 + t


def test_an_elementwise_result_is_computed_over_a_dying_temporary():
    """The product is computed in the output buffer and the fused tail writes over it: no
    workspace at all."""
    x, w = np.ones((64, 32), np.float32), np.ones((32, 48), np.float32) / 32
    fn, plan = plan_of(elementwise_after_matmul, x, w)
    assert plan.workspace == 0
    assert {plan.location(v) for e in fn.eqns for v in e.outvars} == {("out", 0)}
    check(kiln.jit(elementwise_after_matmul)(x, w), reference(elementwise_after_matmul, x, w))


def test_an_operand_read_through_a_view_is_not_overwritten():
    """x + x.T reads x at other positions than it writes: never in place, even donated."""
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    f = kiln.jit(lambda x: x + x.T, donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f(jnp.asarray(x.copy()))
    np.testing.assert_array_equal(np.asarray(got), x + x.T)


def unit_views(x, w, op):
    """A reduction over an axis of size 1 and a broadcast that only inserts axes of size 1,
    of a product (which stays its own equation): both read the product's bytes in place."""
    t = getattr(lax, f"reduce_{op}")(x[:, None] @ w, (1,))
    return lax.broadcast_in_dim(t, (1, x.shape[0], 1, w.shape[1]), (1, 3)), t


def test_an_output_made_by_views_of_a_temporary_is_that_temporary():
    """The product is computed in the output buffer; the reduction and the broadcast are
    aliases of it (no code). Returning the reduction too puts the product in that output, and
    the broadcast's own code writes the other."""
    x, w = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((4, 5), np.float32)
    fn, plan = plan_of(lambda x, w: unit_views(x, w, "max")[0], x, w)
    product = next(e for e in fn.eqns if e.prim.name == "dot_general").outvars[0]
    assert plan.location(product) == plan.location(fn.outvars[0]) == ("out", 0)
    assert plan.where[fn.outvars[0]][0] == "alias" and not plan.copies and plan.workspace == 0
    fn, plan = plan_of(lambda x, w: unit_views(x, w, "max"), x, w)
    product = next(e for e in fn.eqns if e.prim.name == "dot_general").outvars[0]
    assert plan.location(product) == ("out", 1) and plan.where[fn.outvars[0]] == ("out", 0)
    assert not plan.copies and plan.workspace == 0


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 3),
       st.sampled_from([("sum", np.float32), ("prod", np.float64), ("max", np.float32),
                        ("min", np.float32), ("and", np.int32), ("or", np.int32),
                        ("xor", np.int32)]))
def test_unit_reductions_and_broadcasts_match_the_reference(a, b, case):
    op, dtype = case
    x = (np.arange(a * 4).reshape(a, 4) % 5 - 2).astype(dtype)
    w = (np.arange(4 * b).reshape(4, b) % 3 - 1).astype(dtype)
    check(kiln.jit(unit_views, static_argnums=2)(x, w, op),
          reference(unit_views, x, w, op, static_argnums=2))


# ------------------------------------------------------------------------- donation

def test_a_donated_argument_becomes_the_output_and_is_deleted():
    f = kiln.jit(lambda x: x * x + x * 2.0, donate_argnums=0)
    x = ones((300, 400))
    want = np.asarray(x) ** 2 + np.asarray(x) * 2
    at = address(x)
    y = f(x)
    np.testing.assert_allclose(np.asarray(y), want)
    assert address(y) == at
    assert x.is_deleted() and not y.is_deleted()
    with pytest.raises(RuntimeError, match=r"deleted with shape=float32\[300,400\]"):
        x + 1.0
    with pytest.raises(RuntimeError, match="deleted"):
        f(x)
    assert "deleted" in repr(x)


def test_a_donated_loop_state_keeps_its_buffer():
    """x = step(x) over and over updates one buffer: no allocation, no copy."""
    step = kiln.jit(lambda x, i: x.at[i].set(x[i] * 3.0 + 1.0), donate_argnums=0)
    x = ones((512, 512))   # 1 MB: a buffer of the memory pool after the first call
    want = np.asarray(x).copy()
    x = step(x, 0)
    want[0] = want[0] * 3 + 1
    at = address(x)
    for i in range(1, 6):
        x = step(x, i)
        want[i] = want[i] * 3 + 1
        assert address(x) == at
    np.testing.assert_array_equal(np.asarray(x), want)


def test_donated_pytrees_and_keyword_arguments():
    def update(params, grads, lr):
        return {k: params[k] - lr * grads[k] for k in params}
    f = kiln.jit(update, donate_argnames="params")
    params = {"w": ones((8, 4)), "b": ones((4,))}
    grads = {"w": ones((8, 4)), "b": ones((4,))}
    want = {k: np.asarray(params[k]) - 0.5 * np.asarray(grads[k]) for k in params}
    at = {k: address(v) for k, v in params.items()}
    got = f(params=params, grads=grads, lr=0.5)
    for k in want:
        np.testing.assert_allclose(np.asarray(got[k]), want[k])
        assert address(got[k]) == at[k] and params[k].is_deleted()
    assert not any(g.is_deleted() for g in grads.values())


@pytest.mark.parametrize("n, d", [(16, 4), (1, 1), (0, 3)])
def test_a_gradient_step_computes_the_new_parameters_in_the_donated_ones(n, d):
    """`w - lr * dw` (a fusion reading `w` and the dying temporary `dw`) is computed over
    `w`, not over `dw`: the donation is used (no warning), as in JAX's training examples."""
    def loss(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.mean(x)

    def step(params, x):
        grads = kiln.grad(loss)(params, x)
        return [(w - 0.1 * dw, b - 0.1 * db) for (w, b), (dw, db) in zip(params, grads)]
    rng = np.random.RandomState(0)
    donated = [tuple(jnp.asarray(rng.randn(*shape).astype(np.float32)) for shape in layer)
               for layer in (((d, 3), (3,)), ((3, 2), (2,)))]   # fresh buffers, as ones()
    x = rng.randn(n, d).astype(np.float32)
    want = reference(step, donated, x)
    at = [address(a) for layer in donated for a in layer]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = kiln.jit(step, donate_argnums=0)(donated, x)
    check(got, want)
    assert [address(a) for layer in got for a in layer] == at
    assert all(a.is_deleted() for layer in donated for a in layer)


def test_an_unusable_donation_warns_and_leaves_the_argument():
    f = kiln.jit(lambda x: jnp.sum(x), donate_argnums=0)
    x = ones((5,))
    with pytest.warns(UserWarning, match=r"donated buffers were not usable: f32\[5\]"):
        f(x)
    assert not x.is_deleted() and float(jnp.sum(x)) == 15.0


@pytest.mark.parametrize("case", ["numpy view", "same array twice", "numpy argument"])
def test_a_buffer_still_in_use_is_copied_not_overwritten(case):
    f = kiln.jit(lambda x, y: (x * 2.0, y + 1.0), donate_argnums=0)
    x = ones((6, 5))
    original = np.asarray(x).copy()
    if case == "numpy view":
        view = np.asarray(x)
        out = f(x, np.zeros((6, 5), np.float32))
        np.testing.assert_array_equal(view, original)
    elif case == "same array twice":
        out = f(x, x)
        np.testing.assert_array_equal(np.asarray(out[1]), original + 1)
    else:
        x = original.copy()
        out = f(x, np.zeros((6, 5), np.float32))
        np.testing.assert_array_equal(x, original)
    np.testing.assert_array_equal(np.asarray(out[0]), original * 2)


def test_donation_through_lower_and_compile_copies():
    f = kiln.jit(lambda x: x * 3.0, donate_argnums=0)
    x = ones((4, 4))
    compiled = f.lower(x).compile()
    y = compiled(x)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(ones((4, 4))) * 3)


def test_donated_fori_loop_matches_the_reference():
    x, rows = np.zeros((40, 6), np.float32), np.arange(60, dtype=np.float32).reshape(10, 6)
    f = kiln.jit(fori_rows, donate_argnums=0)
    y = jnp.asarray(x.copy())
    at = address(y)
    got = f(y, rows)
    assert address(got) == at
    check(got, reference(fori_rows, x, rows))


DONATING = """
import numpy as np, kiln, kiln.numpy as jnp
f = kiln.jit(lambda x: x.at[0].set(x[1] + 1.0), donate_argnums=0)
x = jnp.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
at = x._value.__array_interface__["data"][0]
y = f(x)
print(y._value.__array_interface__["data"][0] == at, x.is_deleted(), np.asarray(y)[0].tolist())
"""


def test_a_donating_function_from_the_disk_cache_still_donates(tmp_path):
    """A second process loads the object code from the disk cache: the donated buffer is
    still taken over (the outputs it holds come from the storage plan again)."""
    script = tmp_path / "donating.py"
    script.write_text(DONATING)
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             timeout=300, env=env)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n")[0] == "True True [4.0, 5.0, 6.0]"


# ----------------------------------------------------------------------- peak memory

PEAK = """
import numpy as np, kiln

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

f = kiln.jit(lambda x: x * x + x * 2.0)
x = np.ones((5000, 5000), np.float32)
out = f(x)               # compiles; the output's pages are touched
assert np.all(np.asarray(out) == 3.0)
del out                  # the pool is off: its memory goes back to the system
try:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak resident set restarts from the current one
except OSError:
    raise SystemExit("no clear_refs")
before = status("VmRSS")
out = f(x)
print(status("VmHWM") - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_peak_memory_of_a_fused_elementwise_function_is_input_plus_output(tmp_path):
    """During the call the resident set grows by the 100 MB output only (the 100 MB input is
    resident before): no temporary, no copy of the input."""
    fn, plan = plan_of(lambda x: x * x + x * 2.0, np.ones((5000, 5000), np.float32))
    assert plan.workspace == 0
    script = tmp_path / "peak.py"
    script.write_text(PEAK)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "KILN_BUFFER_POOL": "0"})
    if "no clear_refs" in run.stderr:   # a sandbox without it: the peak cannot be reset
        pytest.skip("/proc/self/clear_refs is not writable here")
    assert run.returncode == 0, run.stderr
    growth = int(run.stdout.split()[-1])
    output = 5000 * 5000 * 4
    assert 0.9 * output < growth < output + (16 << 20), growth
