"""Top-level names added beside jit/grad/vmap: make_jaxpr, eval_shape, ShapeDtypeStruct,
typeof, custom_gradient, linear_transpose, closure_convert, named_call, named_scope,
ensure_compile_time_eval, checkpoint_policies, the option contexts, clear_caches,
print_environment_info; checked against JAX where JAX defines the answer."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def test_make_jaxpr_prints_ssa_and_returns_shapes():
    c = kiln.make_jaxpr(lambda x, y: jnp.sin(x) * y)(jnp.ones(3), 2.0)
    assert "sin(x)" in str(c) and "mul(" in str(c)
    assert [str(a) for a in c.in_avals] == ["f32[3]", "f32[]{weak}"]
    assert len(c.eqns) == 3 and c.consts == []
    c, shape = kiln.make_jaxpr(kiln.grad(lambda x: jnp.sum(x ** 2)), return_shape=True)(
        kiln.ShapeDtypeStruct((2,), jnp.float32))
    assert shape == kiln.ShapeDtypeStruct((2,), jnp.float32)
    assert "integer_pow" in str(c)


def test_make_jaxpr_static_argnums():
    c = kiln.make_jaxpr(lambda x, n: x * n, static_argnums=1)(jnp.ones(2), 3)
    assert len(c.in_avals) == 1


def test_eval_shape_matches_jax():
    def f(x, y):
        return {"a": x @ y, "b": (x.sum(0), jnp.concatenate([x, x]))}
    args = (np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))
    k = kiln.eval_shape(f, kiln.ShapeDtypeStruct((3, 4), jnp.float32), *args[1:])
    j = jax.eval_shape(lambda x, y: {"a": x @ y, "b": (x.sum(0), jjnp.concatenate([x, x]))},
                       *args)
    kl, jl = jax.tree.leaves(k), jax.tree.leaves(j)
    assert [(a.shape, a.dtype) for a in kl] == [(a.shape, a.dtype) for a in jl]
    assert repr(kiln.ShapeDtypeStruct((3,), np.float32)) == \
        repr(jax.ShapeDtypeStruct((3,), np.float32))


def test_typeof():
    assert str(kiln.typeof(jnp.ones((2, 3)))) == "f32[2,3]"
    assert kiln.typeof(1.0).weak_type and kiln.typeof(1.0).shape == ()


def test_custom_gradient_matches_jax():
    def make(np_):
        def f(x, y):
            return x * y, lambda g: (3.0 * g * y, g * x)
        return f
    for argnums in (0, 1):
        k = kiln.grad(kiln.custom_gradient(make(jnp)), argnums=argnums)(2.0, 5.0)
        j = jax.grad(jax.custom_gradient(make(jjnp)), argnums=argnums)(2.0, 5.0)
        assert float(k) == float(j)
    f = kiln.custom_gradient(lambda x: (jnp.sin(x), lambda g: g * 2.0))
    assert float(kiln.jit(kiln.grad(f))(1.0)) == 2.0
    assert float(f(1.0)) == pytest.approx(np.sin(1.0))


def test_linear_transpose_matches_jax():
    fk = lambda x: (2 * x, x.sum())   # noqa: E731
    t = kiln.linear_transpose(fk, kiln.ShapeDtypeStruct((3,), jnp.float32))
    (ct,) = t((jnp.arange(3.0), 1.0))
    (jt,) = jax.linear_transpose(fk, jjnp.ones(3))((jjnp.arange(3.0), 1.0))
    np.testing.assert_array_equal(ct, jt)
    with pytest.raises(TypeError, match="float or complex"):
        kiln.linear_transpose(lambda n: n, jnp.ones(2, jnp.int32))


def test_closure_convert_in_custom_vjp():
    def outer(x, w):
        def f(y):
            return jnp.sin(w * y)
        g, consts = kiln.closure_convert(f, x)
        assert [c.shape for c in consts] == [()]   # the traced `w`, hoisted as in JAX
        return g(x, *consts)
    np.testing.assert_allclose(kiln.jit(kiln.grad(outer))(0.5, 2.0), 2 * np.cos(1.0),
                               rtol=1e-6)


def test_named_call_scope_and_compile_time_eval():
    f = kiln.named_call(lambda x: x + 1, name="inc")
    assert f.__name__ == "inc" and float(kiln.jit(f)(1.0)) == 2.0

    @kiln.jit
    def g(x):
        with kiln.named_scope("layer"), kiln.ensure_compile_time_eval():
            return x * 2
    assert float(g(3.0)) == 6.0
    with pytest.raises(TypeError, match="string"):
        with kiln.named_scope(3):
            pass


def test_checkpoint_policies_answer_like_jax():
    names = [n for n in dir(jax.checkpoint_policies) if not n.startswith("_")]
    assert all(hasattr(kiln.checkpoint_policies, n) for n in names)
    p = kiln.checkpoint_policies
    assert p.everything_saveable() and not p.nothing_saveable()
    assert p.dots_saveable("dot_general") and not p.dots_saveable("sin")
    f = kiln.checkpoint(lambda x: jnp.sin(jnp.sin(x)), policy=p.dots_saveable)
    np.testing.assert_allclose(kiln.grad(f)(1.0), jax.grad(lambda x: jjnp.sin(jjnp.sin(x)))(1.0),
                               rtol=1e-6)


def test_debug_nans_and_infs():
    f = kiln.jit(lambda x: jnp.log(x))
    assert np.isnan(f(-1.0))
    with kiln.debug_nans(True):
        assert kiln.debug_nans.value
        with pytest.raises(FloatingPointError, match=r"nan\) encountered in log$"):
            f(-1.0)   # run again op by op, as JAX does: the operation is named
        with pytest.raises(FloatingPointError, match=r"nan.*log"):
            jnp.log(-1.0)
        f(1.0)
    assert not kiln.debug_nans.value
    with kiln.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"inf.*div"):
            jnp.ones(2) / 0.0
        assert np.isnan(jnp.log(-1.0))


def test_enable_x64_and_fixed_options():
    with kiln.enable_x64(True):
        assert jnp.arange(3.0).dtype == np.float64
    assert jnp.arange(3.0).dtype == np.float32
    with kiln.threefry_partitionable(True), kiln.default_prng_impl("threefry2x32"):
        pass
    with pytest.raises(ValueError, match="implements only"):
        with kiln.threefry_partitionable(False):
            pass


def test_clear_caches_recompiles(monkeypatch):
    f = kiln.jit(lambda x: x + 1)
    f(1.0)
    assert f._cache_size() == 1
    kiln.clear_caches()
    assert f._cache_size() == 0
    assert float(f(1.0)) == 2.0


def test_print_environment_info(capsys):
    kiln.print_environment_info()
    out = capsys.readouterr().out
    assert "kiln:" in out and "numpy:" in out and "devices:" in out
    assert kiln.print_environment_info(return_string=True) == out


def test_with_statements_on_static_context_managers():
    import contextlib
    log = []

    @contextlib.contextmanager
    def scope(name):
        log.append(("enter", name))
        yield name.upper()
        log.append(("exit", name))

    @kiln.jit
    def f(x):
        with scope("a") as tag, scope("b"):
            y = x * len(tag)
            if x > 0:            # a traced `if` returning inside the block
                return y
        return -y
    assert float(f(2.0)) == 2.0 and float(f(-2.0)) == 2.0
    assert log == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")]

    @kiln.jit
    def g(x):
        with contextlib.suppress(ZeroDivisionError):
            x = x + 1 / 0
        return x
    assert float(g(1.0)) == 1.0
    with pytest.raises(kiln.compiler.errors.CompileError, match="known when"):
        _with_traced(jnp.ones(2))


def _with_traced(x):
    def body(x):
        with x:
            return x
    return kiln.jit(body)(x)


def test_shape_dtype_struct_like_as_jax():
    for x, jx in [(jnp.ones(3), jjnp.ones(3)), (1.0, 1.0), (np.ones(2, np.int32),) * 2,
                  (kiln.ShapeDtypeStruct((2, 0), jnp.uint8), jax.ShapeDtypeStruct((2, 0), jnp.uint8))]:
        got, want = kiln.ShapeDtypeStruct.like(x), jax.ShapeDtypeStruct.like(jx)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    # inside jit, from a traced value: the callback's result type of JAX's docs
    f = kiln.jit(lambda x: kiln.pure_callback(np.sin, kiln.ShapeDtypeStruct.like(x), x))
    np.testing.assert_allclose(f(jnp.arange(3.0)), np.sin(np.arange(3.0)), rtol=1e-6)
