"""What libraries built on JAX's internals (flax) reach, compared with JAX 0.10.2 where JAX has
it: the trace state (`kiln.extend.core.get_opaque_trace_state`), partial evaluation
(`kiln.interpreters.partial_eval.trace_to_jaxpr_nounits`), wrapped functions
(`kiln.extend.linear_util`, `kiln.api_util.flatten_fun`, `debug_info`), JAX's narrow float
names, and the Python that the specialiser walks in such libraries: `functools.wraps` over a
local function, generator functions, classes made in the function whose methods are local
functions, item assignment into other containers, and loops abandoned after changing objects."""
import functools
import inspect
import weakref

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.api_util import debug_info, flatten_fun
from kiln.extend import linear_util as lu
from kiln.extend.core import get_opaque_trace_state
from kiln.interpreters import partial_eval as pe

jax = pytest.importorskip("jax")


# ---------------------------------------------------------------------------- trace state

_SEEN = []


def _states(x):
    seen = _SEEN
    seen.append(get_opaque_trace_state())
    kiln.vmap(lambda v: seen.append(get_opaque_trace_state()) or v)(x)
    seen.append(get_opaque_trace_state())
    return x * 2


def test_trace_state_is_one_per_specialisation():
    eager = get_opaque_trace_state()
    assert eager == get_opaque_trace_state()
    kiln.jit(_states)(jnp.ones(3))
    outer, inner, again = _SEEN
    assert outer == again and outer != eager and inner != outer and inner != eager
    with pytest.raises(TypeError, match="unhashable"):
        hash(eager)


# ------------------------------------------------------------------------ partial evaluation

def _split_me(np_, a, b):
    return [np_.sin(a) * 2.0 + 1.0, a * b, np_.zeros((300, 300)) + a[0]]


def _partial(mod, pe_mod, lu_mod, a):
    pvals = [pe_mod.PartialVal.known(a),
             pe_mod.PartialVal.unknown(mod.core.ShapedArray((3,), np.float32))]
    fun = functools.partial(_split_me, mod.numpy)
    _, out, res = pe_mod.trace_to_jaxpr_nounits(lu_mod.wrap_init(
        fun, debug_info=mod.api_util.debug_info("test", fun, (a, a), {})), pvals)
    return out, res


def test_trace_to_jaxpr_nounits_matches_jax():
    import jax.api_util, jax.core  # noqa: F401
    from jax.extend import linear_util as jlu
    from jax.interpreters import partial_eval as jpe
    a = np.array([0.5, 1.0, 2.0], np.float32)
    got, _ = _partial(kiln, pe, lu, jnp.asarray(a))
    want, _ = _partial(jax, jpe, jlu, jax.numpy.asarray(a))
    assert [pv.is_known() for pv in got] == [pv.is_known() for pv in want] == [True, False, True]
    for g, w in zip(got, want):
        if g.is_known():
            np.testing.assert_allclose(np.asarray(g.get_known()), np.asarray(w.get_known()),
                                       rtol=1e-6)
        else:
            assert g.get_aval().shape == w.get_aval().shape == (3,)


def _known_inside(a):
    out, _ = _partial(kiln, pe, lu, a)
    return out[0].get_known() + out[2].get_known()[0, :3]


def test_known_outputs_inside_jit_are_computed_by_the_enclosing_function():
    a = np.array([0.5, 1.0, 2.0], np.float32)
    want = np.sin(a) * 2 + 1 + a[0]
    np.testing.assert_allclose(np.asarray(kiln.jit(_known_inside)(a)), want, rtol=1e-6)


# -------------------------------------------------------------------- wrapped functions

def _pytree_fun(x, y, scale=1.0):
    return {"sum": (x["a"] + y) * scale, "pair": (x["b"], y)}


@pytest.mark.parametrize("mod_name", ["kiln", "jax"])
def test_flatten_fun_and_debug_info_match_jax(mod_name):
    import jax.api_util  # noqa: F401
    import jax.extend.linear_util  # noqa: F401
    mod = kiln if mod_name == "kiln" else jax
    args = ({"a": np.float32(1.0), "b": np.float32(2.0)}, np.float32(3.0))
    kwargs = {"scale": 2.0}
    leaves, tree = mod.tree_util.tree_flatten((args, kwargs))
    info = mod.api_util.debug_info("test", _pytree_fun, args, kwargs)
    assert info.traced_for == "test" and info.func_src_info.startswith("_pytree_fun at ")
    assert info.arg_names == ("x['a']", "x['b']", "y", "scale")
    f, out_tree = mod.api_util.flatten_fun(mod.extend.linear_util.wrap_init(
        _pytree_fun, debug_info=info), tree)
    out = f.call_wrapped(*leaves)
    assert [float(v) for v in out] == [2.0, 3.0, 8.0]
    assert mod.tree_util.tree_unflatten(out_tree(), out)["sum"] == 8.0


def test_out_tree_before_a_call_is_an_error():
    _, out_tree = flatten_fun(lu.wrap_init(_pytree_fun), kiln.tree_util.tree_structure(((1, 2),
                                                                                       {})))
    with pytest.raises(lu.StoreException, match="Store empty"):   # JAX's error
        out_tree()
    assert debug_info("jit", len, (), {}).func_src_info == "len"


def test_narrow_float_names_exist_and_refuse_arrays():
    assert jnp.float8_e4m3fn in (jnp.float8_e4m3fn, jnp.float8_e5m2)
    for make in (lambda: jnp.zeros(3, jnp.float8_e4m3fn), lambda: jnp.float8_e5m2(1.0),
                 lambda: jnp.dtype(jnp.float4_e2m1fn)):
        with pytest.raises(TypeError, match="narrow floating-point types; kiln has no arrays"):
            make()
    assert kiln.__version_info__ == jax.__version_info__
    assert kiln.dtypes.supports_inf(jnp.float32) and not kiln.dtypes.supports_inf(jnp.int32)


# ------------------------------------------------------- Python the specialiser walks

def _wrapping(x):
    def scale(v):
        return v * 3.0

    @functools.wraps(scale)
    def wrapper(v):
        return scale(v) + 1.0
    return wrapper(x), wrapper.__name__ == "scale"


def _squares(xs):
    for x in xs:
        yield x * x


def _sum_of_generator(x):
    return sum(_squares([x, x + 1.0]))


class _Base:
    def __init__(self, k):
        self.k = k


def _class_with_local_method(x):
    def times(self, v):
        return v * self.k
    cls = type("Scaled", (_Base,), {"times": times})
    return cls(4.0).times(x)


_CACHE = weakref.WeakKeyDictionary()


class _Key:
    pass


def _weak_item(x):
    key = _Key()
    _CACHE[key] = 1
    return x + len(_CACHE)


class _Parent:
    def __init__(self):
        self.children = {}


class _Child:
    """Registers itself in its parent as it is made (natively, as flax's modules do)."""
    def __init__(self, parent):
        self.name = f"child_{len(parent.children)}"
        parent.children[self.name] = self


def _loop_registering(x):
    parent = _Parent()
    for _ in range(3):
        x = x * 2.0 + len(_Child(parent).name)
    return x, sorted(parent.children)


@pytest.mark.parametrize("f, x, want", [
    (_wrapping, 1.0, (4.0, True)),
    (_sum_of_generator, 2.0, 13.0),
    (_class_with_local_method, 2.0, 8.0),
    (_loop_registering, 1.0, (57.0, ["child_0", "child_1", "child_2"])),
])
def test_walked_python_runs_as_python_does(f, x, want):
    assert repr(f(x)) == repr(want)    # plain Python
    got = kiln.jit(f)(x) if not isinstance(want, tuple) else kiln.jit(lambda v: f(v)[0])(x)
    np.testing.assert_allclose(np.asarray(got), want[0] if isinstance(want, tuple) else want)
    if isinstance(want, tuple) and f is _loop_registering:
        out = []
        kiln.jit(lambda v: out.append(f(v)[1]) or v)(x)
        assert out == [want[1]]


def test_item_assignment_into_other_containers():
    assert float(kiln.jit(_weak_item)(1.0)) == 2.0


def test_instantiate_makes_known_outputs_unknown_as_in_jax():
    from jax.extend import linear_util as jlu
    from jax.interpreters import partial_eval as jpe
    a = np.array([0.5, 1.0, 2.0], np.float32)
    for mod, pe_mod, lu_mod in ((kiln, pe, lu), (jax, jpe, jlu)):
        pvals = [pe_mod.PartialVal.known(mod.numpy.asarray(a)),
                 pe_mod.PartialVal.unknown(mod.core.ShapedArray((3,), np.float32))]
        fun = lu_mod.wrap_init(functools.partial(_split_me, mod.numpy),
                               debug_info=mod.api_util.debug_info("t", len, (), {}))
        _, out, res = pe_mod.trace_to_jaxpr_nounits(fun, pvals, instantiate=[True, False,
                                                                             False])
        assert [pv.is_known() for pv in out] == [False, False, True]
        assert out[0].get_aval().shape == (3,)
        assert any(np.allclose(np.asarray(r), np.sin(a) * 2 + 1) for r in res)


def test_get_opaque_trace_state_in_kiln_core_is_deprecated_as_in_jax():
    import kiln.core
    with pytest.warns(DeprecationWarning, match="kiln.extend.core.get_opaque_trace_state"):
        assert kiln.core.get_opaque_trace_state() == get_opaque_trace_state()


def test_registered_paths_leave_tracebacks_as_kiln_does(tmp_path):
    import subprocess
    import sys
    lib = tmp_path / "somelib"
    lib.mkdir()
    (lib / "layers.py").write_text(
        "import kiln.numpy as jnp\n"
        "from kiln._traceback import api_boundary\n\n\n"
        "@api_boundary\n"
        "def layer(x, w):\n"
        "    return jnp.dot(x, w)\n")
    (tmp_path / "main.py").write_text(
        "import sys\nsys.path.insert(0, sys.argv[1])\n"
        "from kiln.extend.source_info_util import register_exclusion\n"
        "import kiln.numpy as jnp\n"
        "if sys.argv[2] == '1':\n"
        "    register_exclusion(sys.argv[3])\n"
        "from somelib.layers import layer\n"
        "layer(jnp.ones((3, 4)), jnp.ones((5, 2)))\n")
    for hide in ("0", "1"):
        err = subprocess.run([sys.executable, str(tmp_path / "main.py"), str(tmp_path), hide,
                              str(lib)], capture_output=True, text=True, timeout=120).stderr
        assert "contracting dimensions" in err
        assert ("layers.py" in err) == (hide == "0"), err


def _traced_dot_general(lhs, rhs, dims, precision=None, preferred_element_type=None):
    return kiln.lax.dot_general(lhs, rhs, dims, precision,
                                preferred_element_type=preferred_element_type) * 2.0


def test_einsum_calls_its_dot_general_hook_as_jax_does():
    import jax.numpy as jjnp
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.ones((4, 2), np.float32)
    calls = []

    def jax_hook(lhs, rhs, dims, precision=None, preferred_element_type=None):
        calls.append(dims)
        return jax.lax.dot_general(lhs, rhs, dims, precision,
                                   preferred_element_type=preferred_element_type) * 2.0
    want = jjnp.einsum("ij,jk,kl->il", a, b, c, _dot_general=jax_hook)
    got = jnp.einsum("ij,jk,kl->il", a, b, c, _dot_general=_traced_dot_general)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    jitted = kiln.jit(lambda x, y: jnp.einsum("ij,jk->ik", x, y,
                                              _dot_general=_traced_dot_general))
    np.testing.assert_allclose(np.asarray(jitted(a, b)), 2 * a @ b)
    assert len(calls) == 2


def _signature_of_local(x):
    def f(a, b=2, *rest, c, d=4, **kw):
        return a
    return x, str(inspect.signature(f)), str(inspect.signature(lambda u, v=1: u))


def test_local_functions_have_signatures():
    seen = []
    kiln.jit(lambda x: seen.append(_signature_of_local(x)[1:]) or x)(1.0)
    assert seen == [("(a, b=2, *rest, c, d=4, **kw)", "(u, v=1)")]
