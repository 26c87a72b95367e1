"""`try` statements in compiled functions run at specialisation, as JAX runs them at trace
time: each program here runs under kiln and under JAX (the oracle), and the results, which
encode the handler that ran, must agree."""
import os

import numpy as np
import pytest

import kiln
import kiln.numpy as kjnp
from kiln import lax as klax
from kiln.compiler.errors import CompileError

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

TABLE = {"a": 2.0}


def lookup(k):
    return TABLE[k]


def key_error(jnp, lax, x):
    try:
        y = x * lookup("b")          # raised in a helper
    except KeyError as e:
        y = x + len(str(e)) * 1000   # `as e` binds the KeyError as raised: str(e) == "'b'"
    else:
        y = y + 100
    finally:
        y = y - 1
    return y


def shape_error(jnp, lax, x):
    try:
        z = jnp.dot(x, jnp.ones(5))
    except TypeError:
        z = x.sum() + 50
    return z


def user_raise(jnp, lax, x):
    try:
        if x.shape[0] > 2:
            raise ValueError("too long")
        return x * 2
    except ValueError as e:
        return x[:2] + len(str(e))


def nested_reraise(jnp, lax, x):
    try:
        try:
            v = [1, 2][5]
        except IndexError:
            x = x + 10
            raise
    except IndexError:
        v = 20
    return x + v


def concretization(jnp, lax, x):
    try:
        return x * int(x)
    except TypeError:             # JAX: ConcretizationTypeError, kiln: ConcretizationError
        return x - 5


def fori_body(i, c):
    try:
        return c + TABLE["zz"]
    except KeyError:              # the body is traced once: caught once
        return c * 3 + i


def in_fori_loop(jnp, lax, x):
    return lax.fori_loop(0, 5, fori_body, x)


def in_while_loop(jnp, lax, x):
    def step(c):
        try:
            return c + TABLE["nope"]
        except KeyError:
            return c + 1.5
    return lax.while_loop(lambda c: c.sum() < 20, step, x)


def in_unrolled_loop(jnp, lax, x):
    acc = x
    for k in ["a", "q", "a"]:
        try:
            acc = acc * TABLE[k]
        except KeyError:
            acc = acc - 1000
            continue
        acc = acc + 1
    return acc


def in_range_loop(jnp, lax, x):
    acc = x
    for i in range(4):            # Python (and JAX) unroll: the handler runs for i = 2, 3
        try:
            acc = acc + [1.0, 2.0][i]
        except IndexError:
            acc = acc * 2
    return acc


def finally_and_return(jnp, lax, x):
    try:
        return x + TABLE["q"]
    except KeyError:
        return x - 1
    finally:
        x = x * 100


def partial_body(jnp, lax, x):
    try:
        a = x * 2                 # assigned before the exception: kept, as in Python
        b = x.reshape(7)
    except TypeError:
        b = a + 1
    return b


def no_exception(jnp, lax, x):
    y = x
    try:
        y = y + 1
    except Exception:
        y = y * 0
    else:
        y = y * 10
    finally:
        y = y - 3
    return y


PROGRAMS = [key_error, shape_error, user_raise, nested_reraise, concretization, in_fori_loop,
            in_while_loop, in_unrolled_loop, in_range_loop, finally_and_return, partial_body,
            no_exception]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_try_agrees_with_jax(program):
    x = np.arange(3.0, dtype=np.float32)
    got = kiln.jit(lambda x: program(kjnp, klax, x))(x)
    want = jax.jit(lambda x: program(jjnp, jax.lax, x))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_try_under_grad_and_vmap():
    def loss(x):
        try:
            return kjnp.sum(x ** TABLE["p"])
        except KeyError:
            return kjnp.sum(x ** 3)
    np.testing.assert_allclose(np.asarray(kiln.grad(loss)(kjnp.arange(3.0))), [0, 3, 12])
    np.testing.assert_allclose(np.asarray(kiln.vmap(loss)(kjnp.ones((2, 3)))), [3, 3])


def test_return_under_traced_if_in_try_body():
    @kiln.jit
    def f(x):
        try:
            if x.sum() > 0:
                return x * 2
            y = x + 1
        except KeyError:
            y = x
        return y + 100
    assert f(kjnp.ones(2)).tolist() == [2, 2]
    assert f(-kjnp.ones(2)).tolist() == [100, 100]


def test_try_in_python_while_on_traced_values():
    @kiln.jit
    def f(x):
        while x.sum() < 10:       # compiled to a while_loop: its body is specialised once
            try:
                x = x + TABLE["missing"]
            except KeyError:
                x = x + 1.0
        return x
    assert f(kjnp.zeros(2)).tolist() == [5, 5]


def test_raise_caught_in_the_same_traced_branch():
    @kiln.jit
    def f(x):
        if x.sum() > 0:
            try:
                raise ValueError
            except ValueError:
                x = x * 3
        return x
    assert f(kjnp.ones(2)).tolist() == [3, 3]
    assert f(-kjnp.ones(2)).tolist() == [-1, -1]


def test_raise_under_traced_if_is_still_a_located_error():
    def f(x):
        try:
            if x.sum() > 0:
                raise ValueError("at run time")
        except ValueError:
            pass
        return x
    with pytest.raises(CompileError) as info:
        kiln.jit(f)(kjnp.ones(2))
    assert "compiled code cannot raise" in str(info.value)
    assert os.path.basename(__file__) in str(info.value)
    assert 'raise ValueError("at run time")' in str(info.value)


def test_bare_raise_outside_a_handler():
    def f(x):
        raise
    with pytest.raises(RuntimeError, match="No active exception to reraise") as info:
        kiln.jit(f)(kjnp.ones(2))
    assert os.path.basename(__file__) in str(info.value)


def test_unmatched_exception_propagates():
    def f(x):
        try:
            return x + TABLE["q"]
        except ValueError:
            return x
    with pytest.raises(KeyError):
        kiln.jit(f)(kjnp.ones(2))


def raises_in_a_branch(jnp, x):
    try:
        if x < 3:
            return 2 * x ** 3
        else:
            raise ValueError
    except ValueError:
        return jnp.pi * x


@pytest.mark.parametrize("x", [4.0, 2.0])
def test_raise_in_a_traced_branch_handled_by_a_returning_handler(x):
    """The autodiff cookbook's `vjp` of a function that raises: JAX runs the `if` on the
    concrete primal; kiln compiles it, with the handler as the raising branch's continuation."""
    _, k_vjp = kiln.vjp(lambda x: raises_in_a_branch(kjnp, x), x)
    _, j_vjp = jax.vjp(lambda x: raises_in_a_branch(jjnp, x), x)
    np.testing.assert_allclose(np.asarray(kiln.jit(k_vjp)(1.0)[0]),
                               np.asarray(jax.jit(j_vjp)(1.0)[0]), rtol=1e-6)


def test_jax_error_names_catch_kiln_errors():
    def f(errors, x):
        try:
            return x * int(x)
        except errors.ConcretizationTypeError:
            return x - 5
    got = kiln.jit(lambda x: f(kiln.errors, x))(np.float32(2))
    want = jax.jit(lambda x: f(jax.errors, x))(np.float32(2))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
