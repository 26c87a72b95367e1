"""Threads and `kiln.jit` on the LLVM backend: first calls from several threads at once.

Several Python threads start together (a Barrier) and call jitted functions that have not been
compiled yet: one function with the same argument types (it must be specialised once), one
function with different shapes (sizes 0 and 1 included), and different functions (loops,
conditionals, vmap with a named axis, grad) compiled side by side. Every result is compared
with the reference backend; a thread that does not finish in time is a deadlock. The
specialiser's state is per thread: while one thread is stopped in the middle of tracing,
another thread's eager operations with large results must run eagerly (not be staged into
the other thread's function), and `disable_jit` in one thread leaves the others compiling.
Repeated calls of a compiled function from 8 threads give every thread its own right results.
The disk cache is off here, so that first calls really compile.
"""
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax

THREADS = 8
TIMEOUT = 300   # seconds a thread may take before the test calls it a deadlock


@pytest.fixture(autouse=True, scope="module")
def compile_for_real():
    """No disk cache: the threads' first calls really run LLVM (as on a first run)."""
    old = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = "off"
    yield
    if old is None:
        del os.environ["KILN_CACHE_DIR"]
    else:
        os.environ["KILN_CACHE_DIR"] = old


def run_together(work, n=THREADS):
    """`work(k)` for k in range(n), each in its own thread, all released at once; the results
    in order. An exception in a thread is raised here; a thread still running after TIMEOUT
    fails the test."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def run(k):
        barrier.wait()
        try:
            results[k] = work(k)
        except BaseException as e:   # reported in the main thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread did not finish: deadlock?"
    if errors:
        raise errors[0]
    return results


def reference(f, *args, **kwargs):
    return np.asarray(kiln.jit(f, backend="reference", **kwargs)(*args))


def check(got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-6)


def layer(x, w):
    h = jnp.tanh(x @ w) + jnp.sum(x, axis=1, keepdims=True)
    for _ in range(3):
        h = h * 0.5 + jnp.sin(h)
    return h


# ------------------------------------------------------------------------- first calls

def test_first_calls_with_the_same_types_compile_once():
    f = kiln.jit(layer)
    f.clear_cache()   # jit(layer) objects share their specialisations
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    xs = [np.full((5, 4), 0.1 * k, np.float32) for k in range(THREADS)]
    got = run_together(lambda k: f(xs[k], w))
    for x, g in zip(xs, got):
        check(g, reference(layer, x, w))
    assert f.miss_reasons == ["first call"]


@settings(max_examples=4, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=THREADS, max_size=THREADS))
def test_first_calls_with_different_shapes(rows):
    """Each distinct shape is specialised once, whichever thread gets there first."""
    f = kiln.jit(layer)
    f.clear_cache()   # jit(layer) objects share their specialisations
    w = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    xs = [np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 10 for n in rows]
    got = run_together(lambda k: f(xs[k], w))
    for x, g in zip(xs, got):
        check(g, reference(layer, x, w))
    assert len(f.miss_reasons) == len(set(rows))


def _loop(x):
    def body(i, acc):
        return acc * 0.9 + jnp.cos(acc + i)
    return lax.fori_loop(0, 7, body, x)


def _branch(x):
    return lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)


def _python_control(x):
    total = x
    while jnp.max(total) < 10.0:
        total = total * 2.0 + 1.0
    return total


def _named_vmap(x):
    return kiln.vmap(lambda row: row - lax.pmean(row, "b"), axis_name="b")(x)


def _gradient(x):
    return kiln.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2))(x)


def _scan(x):
    return lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(x.shape[1:], x.dtype), x)[1]


def _sort(x):
    return jnp.sort(x, axis=0) + jnp.cumsum(x, axis=1)


def _update(x):
    return x.at[1].set(x[0] * 3.0).at[:, 0].add(1.0)


FUNCTIONS = [_loop, _branch, _python_control, _named_vmap, _gradient, _scan, _sort, _update]


def test_different_functions_compile_at_once():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    jitted = [kiln.jit(f) for f in FUNCTIONS]
    got = run_together(lambda k: jitted[k](x), n=len(FUNCTIONS))
    for f, g in zip(FUNCTIONS, got):
        check(g, reference(f, x))


def test_each_thread_compiles_and_calls_its_own_functions():
    """Threads that specialise several functions each, interleaved with calls."""
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def work(k):
        fs = [kiln.jit(FUNCTIONS[(k + j) % len(FUNCTIONS)]) for j in range(3)]
        return [np.asarray(f(x + k)) for f in fs for _ in range(2)]
    got = run_together(work, n=4)
    for k, outs in enumerate(got):
        for j in range(3):
            want = reference(FUNCTIONS[(k + j) % len(FUNCTIONS)], x + k)
            check(outs[2 * j], want)
            check(outs[2 * j + 1], want)


# ------------------------------------------------------------------ per-thread state

def test_tracing_in_one_thread_does_not_capture_another_threads_eager_operations():
    """Thread A stops in the middle of specialising; thread B's eager operations (large enough
    to be staged when they run inside a specialisation) must run eagerly, in B."""
    inside, resume = threading.Event(), threading.Event()

    def traced(x):
        y = x * 2.0
        inside.set()
        resume.wait(TIMEOUT)
        return y + jnp.ones(x.shape)

    def a():
        return np.asarray(kiln.jit(traced)(np.ones(5000, np.float32)))

    def b():
        inside.wait(TIMEOUT)
        try:
            big = jnp.full((10_000,), 3.0) + 1.0   # would be staged inside a specialisation
            return type(big), np.asarray(big)
        finally:
            resume.set()
    got = run_together(lambda k: (a, b)[k](), n=2)
    check(got[0], np.full(5000, 3.0))
    assert got[1][0] is kiln.Array
    check(got[1][1], np.full(10_000, 4.0))


def test_disable_jit_is_per_thread():
    """While one thread runs under disable_jit (plain Python: a NumPy result), another
    thread's call of the same function is compiled (a kiln Array)."""
    entered, done = threading.Event(), threading.Event()
    f = kiln.jit(lambda x: x + 1.0)

    def plain():
        with kiln.disable_jit():
            entered.set()
            done.wait(TIMEOUT)
            return f(np.float32(1.0))

    def compiled():
        entered.wait(TIMEOUT)
        try:
            return f(np.float32(1.0))
        finally:
            done.set()
    got = run_together(lambda k: (plain, compiled)[k](), n=2)
    assert type(got[0]) is not kiln.Array and type(got[1]) is kiln.Array
    assert float(got[0]) == float(got[1]) == 2.0


# ----------------------------------------------------------------------- repeated calls

def test_repeated_calls_from_eight_threads():
    f = kiln.jit(lambda x, y: jnp.cumsum(jnp.sin(x) * y, axis=0) + x)
    xs = [np.full((300, 5), k, np.float32) for k in range(THREADS)]
    f(xs[0], np.float32(1.0))

    def work(k):
        y = np.float32(k + 1)
        outs = [np.asarray(f(xs[k], y)) for _ in range(200)]
        return all(np.array_equal(o, outs[0]) for o in outs), outs[0]
    for k, (same, out) in enumerate(run_together(work)):
        assert same
        check(out, np.cumsum(np.sin(xs[k]) * (k + 1), axis=0) + xs[k])
