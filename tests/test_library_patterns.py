"""What libraries written for JAX do inside transformed functions, on kiln and on JAX 0.10.2
(equinox's patterns; tests/test_compat_equinox.py runs equinox itself): `del` of list and dict
items and attributes; lists made by `[None] * n` filled with traced values; objects made by
`object.__new__`; callable objects given to `tree_map`; `vmap` axes given as a registered
pytree node; `custom_vjp` with `symbolic_zeros=True` (perturbed flags, Python residuals,
zero cotangents); `eval_jaxpr` of `make_jaxpr`'s result; `axis_primitive_batchers`;
`to_tangent_aval`; the primitives as `lax.<name>_p`; host callbacks after one raised; and the
traceback exclusions of `jax._src.traceback_util`."""
import dataclasses
import os

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
import kiln.custom_derivatives
import kiln.extend.core
import kiln.interpreters.batching
from kiln import lax as klax
from kiln.compiler.errors import CompileError

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
import jax.custom_derivatives  # noqa: E402
import jax.extend.core  # noqa: E402
import jax.interpreters.batching  # noqa: E402

KILN = dict(lib=kiln, np=knp, cd=kiln.custom_derivatives, Array=kiln.Array,
            core=kiln.extend.core, batching=kiln.interpreters.batching, shaped=kiln.core)
JAX = dict(lib=jax, np=jjnp, cd=jax.custom_derivatives, Array=jax.Array,
           core=jax.extend.core, batching=jax.interpreters.batching, shaped=jax.core)
BOTH = pytest.mark.parametrize("side", [KILN, JAX], ids=["kiln", "jax"])


class Box:
    pass


def _containers(x):
    d = {"a": x, "b": x * 2}
    del d["a"]
    xs = [x, x + 1, x + 2]
    del xs[0]
    box = object.__new__(Box)      # equinox's State.set makes its result so
    box.value = x * 3
    box.gone = 1
    del box.gone
    filled = [None] * 3            # equinox's hashable_partition
    for i in range(3):
        filled[i] = x * i
    return d["b"] + xs[0] + box.value + filled[1] + filled[2] + len(d) + hasattr(box, "gone")


def test_containers_changed_inside_a_jitted_function():
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_allclose(kiln.jit(_containers)(x), jax.jit(_containers)(x))


def _deletes_array_item(x):
    del x[0]
    return x


def test_del_of_an_array_item_is_refused_with_the_line():
    with pytest.raises(CompileError) as e:
        kiln.jit(_deletes_array_item)(np.ones(3, np.float32))
    assert "del of items of array values is not supported" in str(e.value)
    assert "del x[0]" in str(e.value) and "jnp.delete" in str(e.value)


@dataclasses.dataclass(frozen=True)
class IfArray:                     # equinox's `if_array`: not a pytree, called by tree_map
    axis: int
    array_type: type

    def __call__(self, v):
        return self.axis if isinstance(v, self.array_type) else None


@BOTH
def test_callable_object_given_to_tree_map_sees_arrays(side):
    lib = side["lib"]

    def f(x):
        axes = lib.tree_util.tree_map(IfArray(2, side["Array"]), (x, "name"))
        return x * axes[0] + (axes[1] is None)
    assert float(lib.jit(f)(1.5)) == 4.0


@kiln.tree_util.register_pytree_node_class
@jax.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.a, self.b), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@BOTH
def test_vmap_axes_given_as_a_registered_pytree_node(side):
    lib = side["lib"]
    pair = Pair(np.arange(6.0, dtype=np.float32).reshape(3, 2), np.float32(10.0))
    out = lib.vmap(lambda p: p.a * p.b, in_axes=(Pair(0, None),))(pair)
    np.testing.assert_allclose(out, pair.a * 10.0)


def _symbolic_zeros_function(side):
    cd = side["cd"]

    @cd.custom_vjp
    def f(x, y):
        return x * y

    def fwd(x, y):
        assert type(x) is cd.CustomVJPPrimal and type(y) is cd.CustomVJPPrimal
        return x.value * y.value, (x.value, y.value, x.perturbed, y.perturbed)

    def bwd(res, g):
        x, y, px, py = res          # the flags reach bwd as Python bools
        return (g * y * (10.0 if px else 1.0),
                g * x * 10.0 * (3.0 if px else 1.0) if py
                else cd.SymbolicZero(side["shaped"].ShapedArray((), x.dtype)))
    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


@BOTH
def test_custom_vjp_with_symbolic_zeros_gets_perturbed_flags(side):
    lib, f = side["lib"], _symbolic_zeros_function(side)
    x, y = np.float32(2.0), np.float32(3.0)
    assert float(lib.grad(f)(x, y)) == 30.0
    assert float(lib.jit(lib.grad(f, argnums=1))(x, y)) == 20.0
    assert [float(g) for g in lib.grad(f, argnums=(0, 1))(x, y)] == [30.0, 60.0]
    xs = np.array([1.0, 2.0], np.float32)
    np.testing.assert_allclose(lib.vmap(lib.grad(f), in_axes=(0, None))(xs, y), [30.0, 30.0])
    # differentiating a batched call: the flags reach the batched rule (x is not perturbed)
    assert float(lib.grad(lambda v: lib.vmap(f, in_axes=(0, None))(xs, v).sum())(y)) == 30.0
    assert float(f(x, y)) == 6.0


@BOTH
def test_eval_jaxpr_runs_make_jaxprs_result(side):
    lib, np_ = side["lib"], side["np"]
    w = np_.arange(3.0)

    def f(x):
        return np_.sin(x) * w

    def g(x):
        closed = lib.make_jaxpr(f)(x)
        return lib.core.eval_jaxpr(closed.jaxpr, closed.consts, x)[0]
    x = np.linspace(0.0, 1.0, 3).astype(np.float32)
    want = np.sin(x) * np.arange(3.0)
    np.testing.assert_allclose(g(x), want, rtol=1e-6)
    np.testing.assert_allclose(lib.jit(g)(x), want, rtol=1e-6)
    np.testing.assert_allclose(lib.grad(lambda v: g(v).sum())(x), np.cos(x) * np.arange(3.0),
                               rtol=1e-6)


@BOTH
def test_axis_primitive_batchers_rule_gets_the_batch_size(side):
    lib, core = side["lib"], side["core"]
    prim = core.Primitive("scaled_by_batch")
    prim.def_impl(lambda x: x * 2)
    prim.def_abstract_eval(lambda a: side["shaped"].ShapedArray(a.shape, a.dtype))
    seen = []

    def rule(axis_size, axis_name, trace_type, args, dims):
        seen.append((axis_size, axis_name))
        return prim.bind(*args) + axis_size, dims[0]
    side["batching"].axis_primitive_batchers[prim] = rule
    out = lib.vmap(prim.bind)(np.arange(4.0, dtype=np.float32))
    np.testing.assert_allclose(out, np.arange(4.0) * 2 + 4)
    assert [size for size, _ in seen] == [4]
    if side is KILN:
        assert seen[0][1] is None   # JAX passes the vmap's axis name, or an anonymous one


@BOTH
def test_tangent_types(side):
    lib, np_ = side["lib"], side["np"]
    ints = lib.typeof(np_.arange(3)).to_tangent_aval()
    floats = lib.typeof(np_.ones(2)).to_tangent_aval()
    assert (ints.shape, ints.dtype) == ((3,), lib.dtypes.float0)
    assert (floats.shape, floats.dtype) == ((2,), np.float32)
    assert lib.typeof(1.0).to_tangent_aval().weak_type


def test_lax_primitives_are_kilns():
    closed = kiln.make_jaxpr(klax.stop_gradient)(np.ones(2, np.float32))
    assert [e.prim for e in closed.eqns] == [klax.stop_gradient_p]
    assert kiln.custom_derivatives.custom_jvp_call_p.name == "custom_jvp_call"
    with pytest.raises(AttributeError, match="no attribute 'no_such_p'"):
        klax.no_such_p


def _raises(v):
    raise RuntimeError("first callback failed")


def test_no_host_callback_runs_after_one_raised():
    calls = []

    def second(v):
        calls.append(1)
        return v

    def f(x):
        spec = kiln.ShapeDtypeStruct(x.shape, x.dtype)
        y = kiln.pure_callback(_raises, spec, x)
        kiln.debug.print("after {}", y)
        return kiln.pure_callback(second, spec, y)
    with pytest.raises(RuntimeError, match="first callback failed"):
        kiln.jit(f)(np.ones(2, np.float32))
    assert calls == []
    assert float(kiln.jit(lambda x: kiln.pure_callback(second, x, x))(np.float32(1.0))) == 1.0
    assert calls == [1]


def test_registered_exclusions_are_hidden_from_tracebacks(tmp_path):
    import kiln._traceback as tb
    library = tmp_path / "library.py"
    library.write_text("def call(f):\n    return f()\n")
    namespace = {}
    exec(compile(library.read_text(), str(library), "exec"), namespace)

    def fails():
        raise ValueError("user error")
    try:
        namespace["call"](fails)
    except ValueError as e:
        frames = e.__traceback__
    shown = lambda t: [os.path.basename(f.tb_frame.f_code.co_filename)  # noqa: E731
                       for f in _walk(tb.filter_traceback(t))]
    assert "library.py" in shown(frames)
    tb.register_exclusion(str(library))
    assert "library.py" not in shown(frames) and "test_library_patterns.py" in shown(frames)
    assert not tb.include_filename(str(library)) and tb.include_filename(__file__)


def _walk(t):
    while t is not None:
        yield t
        t = t.tb_next


@BOTH
def test_traced_values_of_the_function_being_traced(side):
    import importlib
    lib, core = side["lib"], side["core"]
    ad = importlib.import_module(side["lib"].__name__ + ".interpreters.ad")
    flags = []

    def f(x):
        main = core.find_top_trace((x,)).main
        y, z = x * 2, side["np"].ones(2)
        flags.append([isinstance(v, ad.JVPTracer) and v._trace.main is main for v in (y, z)])
        return y
    ones = np.ones(2, np.float32)
    np.testing.assert_allclose(lib.jvp(f, (ones,), (ones,))[1], 2 * ones)
    assert flags == [[True, False]]
