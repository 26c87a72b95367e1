"""`kiln.jit` end to end: expressions and calls compiled by the front end, the `jit` API (static
arguments, decorator forms, jit of jit), the specialisation cache and its miss reasons, globals
re-specialisation, `print` and `kiln.debug.print` as host callbacks, `disable_jit`, stage dumps
and the inspection API (`make_ir`, `lower().as_text()`, `compile().as_text()`).

Each construct is checked by running the same function eagerly (plain Python over kiln.numpy)
and through `kiln.jit` on hypothesis-drawn inputs and comparing values, dtypes and weak types.
The SSA verifier runs after every pass (`KILN_VERIFY`).
"""
import functools
import logging
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import lax, nn, random
from kiln.compiler.errors import ConcretizationError

SETTINGS = settings(max_examples=12, deadline=None)

floats = st.floats(-4, 4, width=32)
shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4)
vectors = hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=1, min_side=1,
                                                  max_side=5), elements=floats)


@st.composite
def pairs(draw, dtype=np.float32, elements=floats, min_side=0):
    """Two arrays of one shape (sides from `min_side`, 0-sized axes by default)."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=min_side, max_side=4))
    return (draw(hnp.arrays(dtype, shape, elements=elements)),
            draw(hnp.arrays(dtype, shape, elements=elements)))


@pytest.fixture(autouse=True)
def _verify(monkeypatch):
    monkeypatch.setenv("KILN_VERIFY", "1")


def _leaf(x):
    a = kiln.array.to_array(x)
    return str(a.dtype), a.weak_type, np.asarray(a._value)


def assert_same(got, want):
    got_leaves, got_tree = kiln.tree_util.tree_flatten(got)
    want_leaves, want_tree = kiln.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        gd, gw, gv = _leaf(g)
        wd, ww, wv = _leaf(w)
        assert (gd, gw) == (wd, ww), f"jit gives {gd} weak={gw}, eager {wd} weak={ww}"
        np.testing.assert_allclose(gv, wv, rtol=1e-5, atol=1e-5)


def check(fn, *args, **jit_kwargs):
    jitted = kiln.jit(fn, **jit_kwargs)
    assert_same(jitted(*args), fn(*args))
    return jitted


# ------------------------------------------------------------------------- expressions

def arithmetic(x, y):
    return (x + y, x - 2, 3 * x, x / (jnp.abs(y) + 1), x // 2, x % 3, x ** 2, -x, +x, abs(y),
            2.5 ** jnp.abs(x), 1 - x * y)


def comparisons(x, y):
    return x < y, x <= 1, x == y, x != 0.5, 2 > x, x >= y


def boolean_ops(x, y):
    a, b = x > 0, y < 0
    return a & b, a | b, a ^ b, ~a, jnp.logical_not(b)


def chained_scalar_comparison(x, y):
    s, a, b = x.sum(), x.ravel()[0], y.ravel()[0]
    return (-1.0 < s <= 3.0), (a < b < 2 * a), (0 <= 1 < 2)


def augmented(x, y):
    z = x
    z += y
    z -= 1
    z *= 2
    z /= 4
    z **= 2
    w = jnp.zeros((x.shape[-1], 2))
    m = x
    m @= w
    n = 5
    n //= 2
    n *= x.sum()
    return z, m, n


@SETTINGS
@given(pairs())
@pytest.mark.parametrize("fn", [arithmetic, comparisons, boolean_ops, augmented])
def test_operators_on_arrays_and_scalars(fn, xy):
    x, y = map(jnp.asarray, xy)
    check(fn, x, y)


@SETTINGS
@given(pairs(min_side=1))
def test_chained_comparisons(xy):
    check(chained_scalar_comparison, *map(jnp.asarray, xy))


def integer_ops(a, b):
    return a & b, a | b, a ^ b, ~a, a << 2, a >> 1, a // (jnp.abs(b) + 1), a % 7, a * 3


@SETTINGS
@given(pairs(np.int32, st.integers(-100, 100)))
def test_integer_operators(ab):
    check(integer_ops, *map(jnp.asarray, ab))


def unpacking(x, y):
    a, b = x, y
    (c, d), e = (a, b), 3
    first, *middle, last = (x, y, a, b, e)
    *init, final = [x, y]
    r0, *rs = x  # an array unpacks along its leading axis
    return a, b, c, d, e, first, middle, last, init, final, r0, rs


@SETTINGS
@given(pairs(min_side=1))
def test_tuple_and_star_unpacking(xy):
    check(unpacking, *map(jnp.asarray, xy))


def static_indexing(x):
    return (x[0], x[-1], x[1:], x[::-1], x[None, :], x[..., 0], x[:, None],
            x[jnp.array([0, 0])], x.at[0].set(5.0), x.at[1:].multiply(2.0),
            x.at[0].add(1.0), x.at[-1].get())


def traced_indexing(x, i):
    return x[i], x.at[i].set(-1.0), x.at[i].add(10.0), x[i] * 2, x[:, i], x[i, -1]


def mask_update(x):
    return x.at[x > 0].set(0.0), jnp.where(x > 1, x, -x)


@SETTINGS
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1,
                                               max_side=4), elements=floats),
       st.integers(-6, 6))
def test_indexing_and_slicing(x, i):
    x = jnp.asarray(x)
    check(static_indexing, x)
    check(traced_indexing, x, jnp.int32(i))
    check(mask_update, x)


def test_boolean_mask_update_compiles_to_select():
    text = str(kiln.make_ir(mask_update)(jnp.ones(3)))
    assert "select_n(" in text and "scatter" not in text


def attributes_and_methods(x):
    n = x.shape[0] * x.ndim + x.size
    y = x.T.reshape(-1).astype(jnp.float32)
    return (n, x.dtype == jnp.float32, y, x.sum(axis=0), x.mean(), x.max(), x.min(axis=-1),
            x.argmax(), x.cumsum(), x.clip(-1, 1), x.round(), x.transpose().flatten())


@SETTINGS
@given(hnp.arrays(np.float32, shapes, elements=floats))
def test_attributes_and_methods(x):
    check(attributes_and_methods, jnp.asarray(x))


# ------------------------------------------------------------------------------- calls

def library_calls(x, key):
    k1, k2 = random.split(key)
    noise = random.normal(k1, x.shape)
    u = random.uniform(k2, (2,))
    return (jnp.exp(x), jnp.where(x > 0, x, 0.0), nn.relu(x), nn.softmax(x),
            lax.add(x, x), jnp.concatenate([x, x]), jnp.linalg.norm(x), noise, u)


@settings(max_examples=4, deadline=None)  # each example specialises the PRNG afresh
@given(vectors, st.integers(0, 2 ** 31 - 1))
def test_calls_to_kiln_numpy_nn_lax_random(x, seed):
    check(library_calls, jnp.asarray(x), random.PRNGKey(seed))


def _square(v):
    return v * v


def _norm(v):
    return jnp.sqrt(jnp.sum(_square(v)))


def _normalise(v, eps=1e-3):
    return v / (_norm(v) + eps)


def _power(v, n):
    if n == 0:
        return jnp.ones_like(v)
    return v * _power(v, n - 1)


def _collatz_depth(v, n):
    if n <= 1:
        return v
    return _collatz_depth(v + 1, n // 2 if n % 2 == 0 else 3 * n + 1)


def user_helpers(x):
    return _normalise(x), _normalise(x, eps=1.0), _power(x, 5), _collatz_depth(x, 6)


@SETTINGS
@given(vectors)
def test_user_helpers_and_static_recursion(x):
    check(user_helpers, jnp.asarray(x))


def test_helpers_are_inlined():
    text = str(kiln.make_ir(user_helpers)(jnp.ones(3)))
    assert "sqrt(" in text and "_power" not in text


SCALE = jnp.asarray([1.0, 2.0, 3.0])
OFFSET = 0.5


def reads_globals(x):
    return x * SCALE + OFFSET


def make_closure(w):
    def inner(x):
        return x * w + bias

    bias = jnp.asarray([2.0, 1.0, 0.0])
    return inner


def test_globals_and_closures_become_implicit_arguments():
    x = jnp.asarray([1.0, -1.0, 0.5])
    check(reads_globals, x)
    ir = kiln.make_ir(reads_globals)(x)
    assert len(ir.invars) == 2  # x and the global array SCALE
    closure = make_closure(jnp.asarray([3.0, 4.0, 5.0]))
    check(closure, x)
    assert len(kiln.make_ir(closure)(x).invars) == 3


class Model:
    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return jnp.tanh(x * self.w) + self.helper(x)

    def helper(self, x):
        return x.sum()


def scaled(x, factor, offset=0.0):
    return x * factor + offset


def nested_and_lambdas(x):
    def inner(v, k=2):
        return v * k
    sq = lambda v: v * v  # noqa: E731
    compose = lambda f, g: (lambda v: f(g(v)))  # noqa: E731
    return inner(x), inner(x, k=3), sq(x), compose(sq, inner)(x), list(map(sq, [x, 1.0]))


@SETTINGS
@given(vectors)
def test_partial_bound_methods_lambdas_nested_functions(x):
    x = jnp.asarray(x)
    check(functools.partial(scaled, factor=3.0), x)
    check(functools.partial(scaled, x, 2.0), 1.0)
    model = Model(jnp.float32(0.5))
    check(model.apply, x)
    check(lambda v: jnp.sin(v) * 2, x)
    check(nested_and_lambdas, x)


@kiln.jit
def decorated(x):
    return x * 2


@kiln.jit(static_argnums=1)
def decorated_static(x, n):
    for _ in range(n):
        x = x + 1
    return x


@functools.partial(kiln.jit, static_argnames="mode")
def decorated_partial(x, mode="add"):
    return x + 1 if mode == "add" else x * 10


def calls_jitted(x):
    return decorated(x) + decorated_static(x, 2) + decorated_partial(x, mode="mul")


def test_decorator_forms_and_jit_of_jit():
    x = jnp.arange(3.0)
    assert_same(decorated(x), x * 2)
    assert_same(decorated_static(x, 3), x + 3)
    assert_same(decorated_partial(x), x + 1)
    assert_same(decorated_partial(x, mode="mul"), x * 10)
    assert_same(kiln.jit(decorated)(x), x * 2)
    assert_same(kiln.jit(kiln.jit(calls_jitted))(x), x * 2 + x + 2 + x * 10)
    # The inner jitted functions are inlined into the outer specialisation.
    text = str(kiln.make_ir(calls_jitted)(x))
    assert "decorated" not in text


# ------------------------------------------------------------------------ static arguments

def with_statics(x, n, scale, *, mode="sum"):
    y = x * scale
    for _ in range(n):
        y = y + 1
    return y.sum() if mode == "sum" else y


@pytest.mark.parametrize("kwargs,call", [
    (dict(static_argnums=(1, 2)), lambda f, x: f(x, 2, 3.0)),
    (dict(static_argnums=(-2, -1)), lambda f, x: f(x, 2, 3.0)),
    (dict(static_argnames=("n", "scale")), lambda f, x: f(x, n=2, scale=3.0)),
    (dict(static_argnums=1, static_argnames="mode"), lambda f, x: f(x, 2, 3.0, mode="all")),
])
def test_static_argnums_and_argnames(kwargs, call):
    x = jnp.arange(4.0)
    jitted = kiln.jit(with_statics, **kwargs)
    assert_same(call(jitted, x), call(with_statics, x))
    assert_same(call(jitted, x + 1), call(with_statics, x + 1))
    assert jitted._cache_size() == 1


def needs_static_shape(n, x):
    return jnp.zeros((n,)) + x


def test_static_values_key_the_cache():
    f = kiln.jit(needs_static_shape, static_argnums=0)
    assert f(2, 1.0).shape == (2,)
    assert f(3, 1.0).shape == (3,)
    assert f(2, 5.0).shape == (2,)
    assert f._cache_size() == 2
    assert f.miss_reasons[-1] == "static argument 0: 2 -> 3"


def test_unhashable_static_argument_is_a_value_error():
    f = kiln.jit(needs_static_shape, static_argnums=0)
    with pytest.raises(ValueError, match="Non-hashable static arguments") as info:
        f([2], 1.0)
    assert "list" in str(info.value)
    g = kiln.jit(with_statics, static_argnames="mode")
    with pytest.raises(ValueError, match="'mode'"):
        g(jnp.ones(2), 1, 1.0, mode={"a": 1})


def test_donate_argnums_is_accepted_and_recorded():
    f = kiln.jit(lambda x, y: x * y, donate_argnums=0, donate_argnames="y")
    assert f.donate_argnums == (0,) and f.donate_argnames == ("y",)
    assert_same(f(jnp.ones(2), 2.0), jnp.ones(2) * 2)


# --------------------------------------------------------------------------------- cache

def plus_one(x):
    return x + 1


def test_cache_size_and_miss_reasons():
    f = kiln.jit(plus_one)
    f(jnp.zeros(3))
    f(jnp.ones(3))
    assert f._cache_size() == 1
    f(jnp.zeros(4))
    f(jnp.zeros(3, jnp.int32))
    f(jnp.zeros(3))
    assert f._cache_size() == 3
    assert f.miss_reasons[:2] == ["first call", "argument 0: f32[3] -> f32[4]"]
    assert "-> i32[3]" in f.miss_reasons[2]
    # A weakly typed Python scalar and a strongly typed array are different signatures; the
    # reason is given against the closest specialisation.
    f(1.0)
    f(jnp.float32(1.0))
    assert f._cache_size() == 5
    assert f.miss_reasons[-2:] == ["argument 0: f32[3] -> f32[]{weak}",
                                   "argument 0: f32[]{weak} -> f32[]"]


def test_pytree_structure_keys_the_cache():
    f = kiln.jit(lambda t: t["a"] + t["b"][0])
    f({"a": jnp.ones(2), "b": (jnp.ones(2),)})
    f({"a": jnp.ones(2), "b": [jnp.ones(2)]})
    assert f._cache_size() == 2
    assert "structure" in f.miss_reasons[-1]


def test_log_compiles(monkeypatch, caplog):
    monkeypatch.setenv("KILN_LOG_COMPILES", "1")
    f = kiln.jit(plus_one)
    f.clear_cache()   # jit(plus_one) objects share specialisations: other tests made some
    with caplog.at_level(logging.DEBUG, logger="kiln"):
        f(jnp.zeros(3))
        f(jnp.zeros(3))
        f(jnp.zeros(4))
    messages = [r.getMessage() for r in caplog.records if r.name == "kiln"]
    assert len(messages) == 2
    assert "plus_one" in messages[0] and "first call" in messages[0]
    assert "argument 0: f32[3] -> f32[4]" in messages[1]


def traced_once(x):
    print("tracing", x.shape)   # runs when kiln specialises, as when JAX traces
    return x * 2.0


def test_jit_objects_of_one_function_share_specialisations(capsys):
    # As JAX's jit caches by function: `jit(f)(x)` written inline traces f once per type.
    kiln.jit(traced_once).clear_cache()
    for _ in range(3):
        assert_same(kiln.jit(traced_once)(jnp.ones(3)), jnp.ones(3) * 2)
    kiln.jit(traced_once)(jnp.ones(4))
    assert capsys.readouterr().out == "tracing (3,)\ntracing (4,)\n"
    # other options, another backend, a partial: specialisations of their own
    kiln.jit(traced_once, donate_argnums=0)(jnp.ones(3))
    kiln.jit(traced_once, backend="reference")(jnp.ones(3))
    kiln.jit(functools.partial(traced_once))(jnp.ones(3))
    kiln.jit(functools.partial(traced_once))(jnp.ones(3))
    assert capsys.readouterr().out == "tracing (3,)\n" * 4
    assert kiln.jit(traced_once)._cache_size() == 2


def test_no_logging_without_the_variable(monkeypatch, caplog):
    monkeypatch.delenv("KILN_LOG_COMPILES", raising=False)
    with caplog.at_level(logging.DEBUG, logger="kiln"):
        kiln.jit(plus_one)(jnp.zeros(3))
    assert not [r for r in caplog.records if r.name == "kiln"]


# ------------------------------------------------------------------------------ globals

shift = 1.0


def add_shift(x):
    return x + shift


def test_changed_global_respecialises():
    global shift
    f = kiln.jit(add_shift)
    x = jnp.zeros(2)
    try:
        assert_same(f(x), x + 1.0)
        shift = 10.0
        assert_same(f(x), x + 10.0)
        assert f.miss_reasons[-1] == "global 'shift' changed since it was compiled"
        assert_same(f(x), x + 10.0)
        assert len(f.miss_reasons) == 2
    finally:
        shift = 1.0


# -------------------------------------------------------------------------------- print

def prints(x, y):
    print("x is", x, "and y =", y, sep=" ")
    z = x * 2
    kiln.debug.print("z={z} first={}", y[0], z=z)
    return z


def test_print_runs_at_every_call_with_runtime_values(capsys):
    f = kiln.jit(prints)
    f(jnp.asarray([1.0, 2.0]), jnp.asarray([3]))
    f(jnp.asarray([5.0, 6.0]), jnp.asarray([7]))
    out = capsys.readouterr().out.splitlines()
    assert out == ["x is [1. 2.] and y = [3]", "z=[2. 4.] first=3",
                   "x is [5. 6.] and y = [7]", "z=[10. 12.] first=7"]
    assert f._cache_size() == 1


def prints_in_loop(x):
    for i in range(3):
        x = x + 1
        print("step", i, x)
    return x


def test_print_inside_a_compiled_loop(capsys):
    kiln.jit(prints_in_loop)(jnp.zeros(1))
    assert capsys.readouterr().out.splitlines() == ["step 0 [1.]", "step 1 [2.]",
                                                    "step 2 [3.]"]


def test_print_survives_simplification():
    text = kiln.jit(prints).lower(jnp.ones(2), jnp.ones(1, jnp.int32)).as_text()
    assert text.count("debug_print(") == 2


def test_debug_print_outside_jit(capsys):
    kiln.debug.print("a={a} b={}", 2, a=jnp.asarray(1))
    assert capsys.readouterr().out == "a=1 b=2\n"


# --------------------------------------------------------------------------- disable_jit

def only_python(x):
    return float(x[0]) + 1  # needs a concrete value: fails under jit


def test_disable_jit_runs_plain_python():
    f = kiln.jit(only_python)
    with kiln.disable_jit():
        assert f(jnp.asarray([1.0])) == 2.0
    with pytest.raises(TypeError):
        f(jnp.asarray([1.0]))


@pytest.mark.parametrize("variable", ["KILN_DISABLE_JIT", "JAX_DISABLE_JIT"])
def test_disable_jit_environment_variable(tmp_path, variable):
    import subprocess
    import sys
    script = tmp_path / "prog.py"
    script.write_text("import kiln, kiln.numpy as jnp\n"
                      "def f(x):\n"
                      "    return float(x[0]) + 1\n"
                      "print(kiln.config.read('jax_disable_jit'), kiln.jit(f)(jnp.asarray([1.0])))\n")
    env = dict(os.environ, **{variable: "1"})
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True 2.0"


def test_disable_jit_option_in_every_thread_and_overridden_by_a_block():
    import threading
    f = kiln.jit(only_python)
    x = jnp.asarray([1.0])
    kiln.config.update("jax_disable_jit", True)
    try:
        assert kiln.config.read("jax_disable_jit") is True
        assert f(x) == 2.0
        seen = []
        thread = threading.Thread(target=lambda: seen.append(f(x)))
        thread.start()
        thread.join()
        assert seen == [2.0]
        with kiln.disable_jit(False):   # the block decides for its thread
            with pytest.raises(TypeError):
                f(x)
    finally:
        kiln.config.update("jax_disable_jit", False)
    with pytest.raises(TypeError):
        f(x)


# ------------------------------------------------------------- debug_nans inside jit

def log_of_negative(x):
    w = 3 * jnp.square(x)
    return jnp.log(-w)


def test_debug_nans_in_jit_reruns_op_by_op_as_jax(capsys):
    """A NaN out of a jitted call: the function runs again as plain Python and the operation
    that made it raises, with the user's line in the traceback, as JAX does."""
    jax = pytest.importorskip("jax")
    import traceback
    with kiln.debug_nans(True):
        with pytest.raises(FloatingPointError) as info:
            kiln.jit(log_of_negative)(5.0)
    printed = capsys.readouterr().out
    with jax.debug_nans(True):
        with pytest.raises(FloatingPointError) as theirs:
            jax.jit(lambda x: jax.numpy.log(-3 * jax.numpy.square(x)))(5.0)
    line = ("Invalid nan value encountered in the output of a jax.jit function. Calling the "
            "de-optimized version.\n")
    assert printed == line and line in capsys.readouterr().out   # JAX's line (JAX: twice)
    assert str(info.value) == str(theirs.value) == "invalid value (nan) encountered in log"
    lines = traceback.format_tb(info.value.__traceback__)
    assert any("return jnp.log(-w)" in line for line in lines), lines


def test_debug_nans_in_jit_says_when_op_by_op_finds_nothing(capsys):
    with kiln.debug_nans(True):
        with pytest.raises(FloatingPointError,
                           match=r"encountered in jit\(<lambda>\)\. Because debug_nans.*none "
                                 r"did.*given or wrote as a constant"):
            kiln.jit(lambda x: x * 1)(np.float32(np.nan))


# ---------------------------------------------------------------------------- inspection

def named_values(inputs, weights):
    hidden = jnp.tanh(inputs @ weights)
    total = hidden.sum()
    return total


def test_make_ir_text_has_user_names_and_shapes():
    fn = kiln.make_ir(named_values)(jnp.ones((2, 3)), jnp.ones((3, 4)))
    text = str(fn)
    assert "def named_values(inputs: 'f32[2,3]', weights: 'f32[3,4]')" in text
    assert "hidden" in text and "total" in text
    assert "f32[2,4]" in text


def test_make_ir_with_static_argnums():
    fn = kiln.make_ir(needs_static_shape, static_argnums=0)(3, jnp.float32(1.0))
    assert fn.invars[0].name == "x" and fn.invars[0].aval.shape == ()
    assert fn.out_avals[0].shape == (3,)


def stupid_fn(x):
    y = jnp.copy(x)
    for _ in range(1000):
        x = x * 1.0001
    return y


def test_lower_and_compile_as_text():
    x = jnp.ones(3)
    lowered = kiln.jit(stupid_fn).lower(x)
    text = lowered.as_text()
    assert "def stupid_fn" in text and "mul" not in text
    compiled = lowered.compile()
    assert isinstance(compiled.as_text(), str) and compiled.as_text()
    assert_same(kiln.jit(stupid_fn)(x), x)


def doubled_plus(x, y):
    return 2 * x + y


def test_trace_lower_compile_with_shape_dtype_structs():
    # aot.md: jit(f).trace(...) with values or ShapeDtypeStructs, then lower and compile.
    traced = kiln.jit(doubled_plus).trace(3, 4)
    assert "mul" in str(traced.jaxpr) and traced.fun_name == "doubled_plus"
    assert traced.out_info == kiln.ShapeDtypeStruct((), np.int32, weak_type=True)
    assert int(traced.lower().compile()(3, 4)) == 10
    i32 = kiln.ShapeDtypeStruct((), np.dtype("int32"))
    compiled = kiln.jit(doubled_plus).trace(i32, i32).lower().compile()
    assert int(compiled(3, 4)) == 10   # weak Python ints fit an int32 signature, as in JAX
    with pytest.raises(TypeError, match=r"compiled for arguments of types \(i32\[\], i32\[\]\)"):
        compiled(jnp.arange(3), jnp.arange(3))
    assert int(kiln.jit(doubled_plus, static_argnums=0).trace(10, i32).lower().compile()(5)) == 25
    lowered = kiln.jit(lambda a: {"s": a.sum(), "t": a}).lower(
        kiln.ShapeDtypeStruct((2, 3), np.float32))
    assert lowered.out_info == {"s": kiln.ShapeDtypeStruct((), np.float32),
                                "t": kiln.ShapeDtypeStruct((2, 3), np.float32)}


@pytest.mark.parametrize("how", ["KILN_DUMP_DIR", "JAX_DUMP_IR_TO", "jax_dump_ir_to"])
def test_dump_dir_writes_every_stage(tmp_path, monkeypatch, how):
    """KILN_DUMP_DIR, or JAX's option (environment or config.update), names the directory."""
    monkeypatch.delenv("KILN_DUMP_DIR", raising=False)
    if how.startswith("jax_"):
        kiln.config.update(how, str(tmp_path))
        kiln.config.update("jax_dump_ir_modes", "stablehlo")   # recorded
    else:
        monkeypatch.setenv(how, str(tmp_path))
    try:
        kiln.jit(lambda a, b: named_values(a, b))(jnp.ones((2, 3)), jnp.ones((3, 4)))
    finally:
        kiln.config.update("jax_dump_ir_to", None)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[0].startswith("lambda.00-input")   # a fresh function: specialised here
    assert len(files) >= 2
    assert "hidden" in (tmp_path / files[0]).read_text()


def prints_in_branches(x):
    if x.sum() > 0:
        print("positive", x)
    else:
        kiln.debug.print("not positive: {}", x)
    return x


def prints_only_in_loop(x):
    for i in range(3):
        print("i =", i)
    return x


def test_print_inside_traced_control_flow(capsys):
    f = kiln.jit(prints_in_branches)
    f(jnp.asarray([1.0]))
    f(jnp.asarray([-1.0]))
    kiln.jit(prints_only_in_loop)(jnp.zeros(1))
    assert capsys.readouterr().out.splitlines() == [
        "positive [1.]", "not positive: [-1.]", "i = 0", "i = 1", "i = 2"]
    assert "debug_print(" in f.lower(jnp.ones(1)).as_text()


def checks_isinstance(x, y):
    flags = (isinstance(x, jnp.ndarray), isinstance(x, kiln.Array),
             isinstance(x, (int, jnp.ndarray)), isinstance(x, float), isinstance(y, int))
    return x * 2 if isinstance(x, jnp.ndarray) else x, flags


def test_isinstance_of_traced_values_is_that_of_arrays():
    assert_same(kiln.jit(checks_isinstance, static_argnums=1)(jnp.ones(2), 3),
                checks_isinstance(jnp.ones(2), 3))


_USER_MODULE = """
import kiln.numpy as jnp

SCALE = 2.0


def relu_py(x):
    if x.sum() > 0:
        return x * SCALE
    return x * 0
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user module whose name starts like a standard one (`math...`) in a real file."""
    import importlib
    import sys
    (tmp_path / "mathutils_kiln_test.py").write_text(_USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("mathutils_kiln_test")
    yield module
    sys.modules.pop("mathutils_kiln_test", None)


def test_helpers_of_user_modules_are_specialised(user_module):
    f = kiln.jit(lambda x: user_module.relu_py(x) + 1)
    assert_same(f(jnp.ones(2)), jnp.ones(2) * 3)
    assert_same(f(-jnp.ones(2)), jnp.ones(2))


def test_changed_global_of_another_module_respecialises(user_module):
    f = kiln.jit(lambda x: x * user_module.SCALE)
    assert_same(f(jnp.ones(2)), jnp.ones(2) * 2)
    user_module.SCALE = 5.0
    assert_same(f(jnp.ones(2)), jnp.ones(2) * 5)
    assert f.miss_reasons[-1] == "global 'SCALE' changed since it was compiled"
    # ... also when the helper that reads it is in that module.
    g = kiln.jit(user_module.relu_py)
    assert_same(g(jnp.ones(2)), jnp.ones(2) * 5)
    user_module.SCALE = 1.0
    assert_same(g(jnp.ones(2)), jnp.ones(2))


def reads_a_global_often(x):
    for _ in [0] * 50:  # unrolled: 50 reads of `shift`
        x = x + shift
    return x


def test_guards_are_recorded_once_per_global():
    f = kiln.jit(reads_a_global_often)
    f(jnp.zeros(1))
    (entry,) = f._cache.values()
    # user contexts made by earlier tests (test_api_guards.py) guard every specialisation too
    names = [name for _, name, _ in entry.guards if not name.startswith("user context")]
    assert names == ["shift"]


def uses_the_standard_library(x):
    import math
    import statistics
    import textwrap
    scale = statistics.mean([1.0, 3.0]) * math.sqrt(4.0)
    label = textwrap.shorten("a b c", width=10)
    return x * scale, label == "a b c"


def test_standard_library_functions_run_as_python():
    assert_same(kiln.jit(uses_the_standard_library)(jnp.ones(2)), (jnp.ones(2) * 4.0, True))


def prints_with_options(x):
    print("a", x, sep="", end="|\n", flush=True)
    print("b", x, sep=None, end=None)
    kiln.debug.print("{s:.2f} {v}", s=x.sum(), v=x)
    return x


def prints_f_strings(x, y):
    print(f"x = {x}")
    print(f"y = {y!r}", "and", y, f"{{braces}} {y.sum():.3f}|{3:>3}", sep="; ", end="!\n")
    return x


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_f_strings_of_traced_values_print_runtime_values(capsys, backend):
    x, y = np.arange(3.0, dtype=np.float32), np.arange(2.0, dtype=np.float32)
    kiln.jit(prints_f_strings, backend=backend)(x, y)
    kiln.jit(prints_f_strings, backend=backend)(x + 1, y)   # every call, its own values
    assert capsys.readouterr().out.splitlines() == [
        f"x = {x}", f"y = {y!r}; and; {y}; {{braces}} 1.000|  3!",
        f"x = {x + 1}", f"y = {y!r}; and; {y}; {{braces}} 1.000|  3!"]


def keeps_an_f_string(x):
    text = f"x = {x}"
    return x, text


def test_an_f_string_of_a_traced_value_elsewhere_is_a_located_error():
    with pytest.raises(ConcretizationError, match="f-string needs the value") as e:
        kiln.jit(keeps_an_f_string)(1.0)
    assert "test_jit.py" in str(e.value) and "argument of print" in str(e.value)


def test_print_options_and_format_specs(capsys):
    kiln.jit(prints_with_options)(jnp.asarray([1.0, 2.5]))
    assert capsys.readouterr().out.splitlines() == ["a[1.  2.5]|", "b [1.  2.5]", "3.50 [1.  2.5]"]


def test_compiled_executable_takes_the_dynamic_arguments():
    params = [jnp.ones((2, 2)), jnp.full((2, 2), 2.0)]
    compiled = kiln.jit(for_over_layers, static_argnums=2).lower(params, jnp.ones(2), 3).compile()
    assert_same(compiled(params, jnp.ones(2)), for_over_layers(params, jnp.ones(2), 3))
    with pytest.raises(TypeError, match=r"compiled for arguments of types \(f32\[2,2\], "
                                        r"f32\[2,2\], f32\[2\]\) but is called with"):
        compiled(params, jnp.ones(3))


def for_over_layers(params, x, repeat):
    for _ in range(repeat):
        for w in params:
            x = jnp.tanh(x @ w)
    return x


@pytest.mark.parametrize("kwargs,message", [
    (dict(static_argnums=5), "Jitted function has static_argnums=(5,), but only accepts 3 "
                             "positional arguments."),
    (dict(static_argnums=(-4,)), "Jitted function has static_argnums=(-4,), but only accepts 3 "
                                 "positional arguments."),
    (dict(static_argnames=("q", "n")), "Jitted function has invalid argnames {'q'} in "
                                       "static_argnames. Function does not take these args."),
])
def test_static_arguments_the_function_cannot_take(kwargs, message):
    # JAX 0.10.2's messages, raised by jit itself.
    with pytest.raises(ValueError) as info:
        kiln.jit(with_statics, **kwargs)
    assert str(info.value) == message
    kiln.jit(lambda *a, **k: a, static_argnums=7, static_argnames="anything")


class Layer:
    """A callable object whose methods branch on traced values."""

    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        if x.sum() > 0:
            return x * self.w
        return x - self.w

    @classmethod
    def make(cls, w):
        return cls(w)

    @staticmethod
    def act(x):
        return jnp.tanh(x) if x.sum() > 0 else x


def uses_layers(x):
    return Layer(2.0)(x) + Layer.act(x) + Layer.make(3.0)(x)


@SETTINGS
@given(vectors)
def test_callable_objects_static_and_class_methods(x):
    x = jnp.asarray(x)
    check(Layer(jnp.float32(0.5)), x)
    check(uses_layers, x)


PAIR_OF_LAMBDAS = [lambda x: x + 1, lambda x: x * 10]
NESTED_LAMBDA = lambda x: (lambda y: y * 3)(x) + 1  # noqa: E731


def test_lambdas_sharing_a_line_are_told_apart():
    x = jnp.asarray([1.0, 2.0])
    assert_same(kiln.jit(PAIR_OF_LAMBDAS[0])(x), x + 1)
    assert_same(kiln.jit(PAIR_OF_LAMBDAS[1])(x), x * 10)
    assert_same(kiln.jit(NESTED_LAMBDA)(x), x * 3 + 1)


def test_lambda_on_a_line_with_unbalanced_brackets():
    out = kiln.jit(
        lambda x: x - 1)(jnp.ones(2))
    assert_same(out, jnp.zeros(2))


def jits_a_helper_inside(x):
    return kiln.jit(_power, static_argnums=1)(x, 3) + kiln.jit(early_sign)(x)


def early_sign(x):
    if x.sum() > 0:
        return x * 0 + 1
    return x * 0 - 1


@SETTINGS
@given(vectors)
def test_jit_called_inside_a_jitted_function(x):
    check(jits_a_helper_inside, jnp.asarray(x))


def _plus_zeros(x):
    return x + jnp.zeros(3)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_enable_x64_is_part_of_the_specialisation(backend):
    """The dtypes a function makes for itself (`jnp.zeros(3)`) follow enable_x64 at each
    call, as in JAX: a specialisation made under one value is not reused under the other,
    by the fast path either."""
    f = kiln.jit(_plus_zeros, backend=backend)
    x = np.int32([1, 2, 3])
    assert [f(x).dtype for _ in range(3)] == [np.float32] * 3
    with kiln.enable_x64(True):
        assert [f(x).dtype for _ in range(2)] == [np.float64] * 2
    assert f(x).dtype == np.float32
    assert f.miss_reasons == ["first call",
                              "an option changed since it was compiled (enable_x64)"]


def test_enable_x64_under_pmap():
    p = kiln.pmap(_plus_zeros)
    x = np.ones((1, 3), np.int32)
    assert p(x).dtype == p(x).dtype == np.float32
    with kiln.enable_x64(True):
        assert p(x).dtype == np.float64
    assert p(x).dtype == np.float32
