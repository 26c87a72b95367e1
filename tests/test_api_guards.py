"""The guard options at the top level (runtime/execution_guards.py): no_tracing, no_execution,
thread_guard, array_garbage_collection_guard; allow_f16_reductions, make_user_context and
memory, beside JAX's where JAX defines the answer."""
import gc
import logging
import subprocess
import sys
import threading

import jax
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import execution_guards


def test_no_tracing_refuses_new_specialisations_only():
    f = kiln.jit(lambda x: x * 2)
    x = jnp.ones(3)
    f(x)
    with kiln.no_tracing(True):
        np.testing.assert_array_equal(f(x), [2, 2, 2])   # cached: runs
        np.testing.assert_array_equal(x + 1, [2, 2, 2])   # eager: nothing is specialised
        with pytest.raises(RuntimeError, match="specialise <lambda>.*no_tracing"):
            f(jnp.ones(4))
        with pytest.raises(RuntimeError, match="no_tracing"):
            kiln.grad(lambda x: x * x)(1.0)
    assert not kiln.no_tracing.value
    np.testing.assert_array_equal(f(jnp.ones(4)), np.full(4, 2.0))


def test_no_execution_refuses_calls_and_eager_operations_but_not_compiling():
    f = kiln.jit(lambda x: x * 2)
    x = jnp.ones(3)
    f(x)
    with kiln.no_execution(True):
        for run in (lambda: f(x), lambda: x + 1, lambda: x + x, lambda: jnp.sin(x),
                    lambda: kiln.vmap(jnp.sin)(x), lambda: kiln.grad(jnp.sum)(x)):
            with pytest.raises(RuntimeError, match="execute .*no_execution option is set"):
                run()
        compiled = kiln.jit(lambda x: x - 1).lower(x).compile()   # compiling is allowed
        with pytest.raises(RuntimeError, match="no_execution"):
            compiled(x)
    np.testing.assert_array_equal(compiled(x), [0, 0, 0])
    with jax.no_execution(True), pytest.raises(RuntimeError, match="no_execution"):
        jax.numpy.ones(3) + 1   # JAX refuses eager operations as well


def test_thread_guard_checks_the_calling_thread():
    assert kiln.thread_guard.value is False
    with kiln.thread_guard(True):
        execution_guards.check_thread("pmap")   # the guarding thread: fine
        errors = []

        def other():
            try:
                execution_guards.check_thread("pmap")
            except RuntimeError as e:
                errors.append(str(e))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert errors and "thread other than the one that set kiln.thread_guard" in errors[0]
        # one process: mapped calls are not multi-process and run from any thread
        np.testing.assert_array_equal(kiln.pmap(lambda x: x + 1)(jnp.zeros(1)), [1.0])
    assert execution_guards.STATE.guarded_thread is None


def test_array_garbage_collection_guard_logs_arrays_freed_by_the_collector(caplog):
    assert kiln.array_garbage_collection_guard.value == "allow"
    with caplog.at_level(logging.ERROR, "kiln"):
        with kiln.array_garbage_collection_guard("log"):
            cycle = [jnp.ones(2)]
            cycle.append(cycle)
            del cycle
            plain = jnp.ones(3)
            del plain   # freed by reference counting: not logged
            gc.collect()
        cycle = [jnp.ones(5)]
        cycle.append(cycle)
        del cycle
        gc.collect()   # guard off again: not logged
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "shape (2,)" in logged[0] and "garbage collector" in logged[0]
    with pytest.raises(ValueError, match="allow.*log.*fatal"):
        kiln.config.update("array_garbage_collection_guard", "sometimes")


def test_array_garbage_collection_guard_fatal_ends_the_process():
    code = ("import gc, kiln, kiln.numpy as jnp\n"
            "kiln.config.update('array_garbage_collection_guard', 'fatal')\n"
            "c = [jnp.ones(2)]; c.append(c); del c; gc.collect(); print('survived')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "survived" not in done.stdout
    assert "Fatal: a kiln Array" in done.stderr


def test_allow_f16_reductions_as_jax():
    h = np.ones(3, np.float16)
    assert kiln.allow_f16_reductions.value is True is jax.allow_f16_reductions.value
    with kiln.allow_f16_reductions(False), jax.allow_f16_reductions(False):
        assert float(jnp.sum(h)) == float(jax.numpy.sum(h)) == 3.0
        for lax in (kiln.lax, jax.lax):
            with pytest.raises(ValueError, match="f16\\[3\\] is not allowed"):
                lax.reduce_sum(h, (0,))
        assert float(kiln.lax.reduce_sum(np.ones(3, np.float32), (0,))) == 3.0
    assert float(kiln.lax.reduce_sum(h, (0,))) == 3.0


def test_jax2tf_option_is_accepted():
    assert kiln.jax2tf_associative_scan_reductions.value is False
    with kiln.jax2tf_associative_scan_reductions(True):
        assert kiln.jax2tf_associative_scan_reductions.value is True
        np.testing.assert_array_equal(jnp.cumsum(jnp.arange(4)), [0, 1, 3, 6])


def test_jax_implementation_switches_are_accepted():
    """JAX 0.10.2's `jax_scan3`, `jax_remat3`, `jax_custom_vjp3` pick new implementations
    with the same results: both accept them, and a checkpointed gradient is unchanged."""
    f = kiln.checkpoint(lambda x: jnp.sum(jnp.sin(x) ** 2))
    x = np.linspace(0, 1, 4, dtype=np.float32)
    want = kiln.grad(f)(x)
    for name in ("jax_scan3", "jax_remat3", "jax_custom_vjp3"):
        assert getattr(jax.config, name) is False
        assert kiln.config.read(name) is False
        kiln.config.update(name, True)
        try:
            assert kiln.config.read(name) is True
            np.testing.assert_array_equal(kiln.grad(f)(x), want)
        finally:
            kiln.config.update(name, False)


def test_user_context_is_part_of_the_cache_key():
    ctx = kiln.make_user_context(1)
    assert ctx.value == 1
    g = kiln.jit(lambda x: x + ctx.value)
    x = jnp.zeros(2)
    np.testing.assert_array_equal(g(x), [1, 1])
    with ctx(5):
        assert ctx.value == 5
        np.testing.assert_array_equal(g(x), [5, 5])
    np.testing.assert_array_equal(g(x), [1, 1])
    assert "user context" in g.miss_reasons[1]
    ctx.set_global(2)
    assert ctx.get_global() == 2
    np.testing.assert_array_equal(g(x), [2, 2])
    np.testing.assert_array_equal(kiln.grad(lambda v: v * ctx.value)(1.0), 2.0)
    ctx.set_global(1)


def test_memory_spaces_as_jax():
    assert [s.name for s in kiln.memory.Space] == [s.name for s in jax.memory.Space]
    assert repr(kiln.memory.Space.Host) == repr(jax.memory.Space.Host)
