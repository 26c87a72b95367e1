"""Python side effects on containers from outside the call happen while kiln specialises the
function, as they happen while JAX traces it: once per specialisation (not at every call),
once for a body compiled once (a fori_loop body), once per iteration of a Python loop (which
Python and JAX unroll, and which kiln unrolls when its body changes such a container).
Storing a traced value in one is refused (JAX leaves a tracer in it)."""
import numpy as np
import pytest

import kiln
import kiln.numpy as kjnp
from kiln import lax as klax
from kiln.compiler.errors import CompileError

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402


def program(jit, jnp, lax):
    calls, seen = [], {}

    @jit
    def f(x):
        calls.append("traced")
        for i in range(3):
            calls.append(i)
        for k in ["a", "b"]:
            seen[k] = len(calls)

        def body(i, c):
            calls.append("body")
            return c + i
        return lax.fori_loop(0, 4, body, x)
    out = [np.asarray(f(jnp.ones(2))).tolist(), np.asarray(f(jnp.ones(2))).tolist(),
           np.asarray(f(jnp.ones(3))).tolist()]
    return out, calls, seen


def test_effects_on_outer_containers_agree_with_jax():
    assert program(kiln.jit, kjnp, klax) == program(jax.jit, jjnp, jax.lax)


def test_iterator_advanced_in_a_compiled_loop_body_once():
    def run(jit, lax):
        it = iter(range(10))
        return int(jit(lambda x: lax.fori_loop(0, 10, lambda i, c: c + next(it), x))(0))
    assert run(kiln.jit, klax) == run(jax.jit, jax.lax) == 0


def test_storing_a_traced_value_in_an_outer_list_is_refused():
    log = []

    def f(x):
        log.append(x)
        return x
    with pytest.raises(CompileError, match="stores a traced value in a list") as info:
        kiln.jit(f)(kjnp.ones(2))
    assert "log.append(x)" in str(info.value) and log == []
