"""The cases of tests/test_checkify.py: each written once over a namespace (`jax`, `jnp`,
`lax`, `checkify`) so that it runs on kiln and on JAX 0.10.2, whose outcomes
`tests/goldens/make_checkify_goldens.py` records in `tests/goldens/checkify_jax_0_10_2.json`.

Covered: `check` eager, under `checkify`, under `jit` (refused) and under `grad`; `checkify`
of `jit` and `jit` of `checkify`; vmap of checkify (mapped errors, the example `throw()`
reports) and checkify of vmap; checks in cond, while_loop (its test and body), scan and
fori_loop bodies, remat, custom_jvp and custom_vjp (their functions, a backward pass, the
user's rule kept); the automatic checks (index, static indices, NaN, division) and their
sets, and the primitive a NaN is blamed on through jnp and jax.nn functions; `check_error`
(of mapped errors too), `debug_check`, the payload formats.
"""
import numpy as np


def outcome(ns, case):
    """What a case gives, as [kind, message, output leaves] (JSON-able): ["error", `get()`,
    leaves] for an (Error, out) pair, [exception type name, its first line, None], or
    ["value", None, leaves]."""
    try:
        r = case(ns)
    except Exception as e:
        return [type(e).__name__, str(e).split("\n")[0], None]
    leaves = lambda t: [np.asarray(x).tolist() for x in ns.jax.tree_util.tree_leaves(t)]
    if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], ns.checkify.Error):
        return ["error", r[0].get(), leaves(r[1])]
    return ["value", None, leaves(r)]


# --------------------------------------------------------------------------- cases

def _f(ns):
    def f(x, i):
        ns.checkify.check(i >= 0, "index needs to be non-negative, got {i}", i=i)
        return ns.jnp.sin(x[i])
    return f


def _positive(ns):
    def g(x):
        ns.checkify.check(ns.jnp.all(x > 0), "x must be positive, got {}", x)
        return ns.jnp.log(x)
    return g


def _throw(ns, checked, *args):
    err, _ = checked(*args)
    err.throw()
    return "no error"


CASES = {
    "eager check passes": lambda ns: ns.checkify.check(ns.jnp.array(True), "bad"),
    "eager check fails": lambda ns: ns.checkify.check(ns.jnp.array(False), "bad {}",
                                                      ns.jnp.array(3)),
    "eager check python bool": lambda ns: ns.checkify.check(False, "bad {x}",
                                                            x=ns.jnp.float32(1.5)),
    "non-scalar predicate": lambda ns: ns.checkify.check(ns.jnp.array([True]), "bad"),
    "numpy bool predicate": lambda ns: ns.checkify.check(np.bool_(True), "bad"),
    "python int format argument": lambda ns: ns.checkify.checkify(_f(ns))(ns.jnp.ones(5), 1),
    "eager debug_check": lambda ns: ns.checkify.debug_check(False, "never"),
    "jit of checkify fails": lambda ns: ns.jax.jit(ns.checkify.checkify(_f(ns)))(
        ns.jnp.ones(5), -2),
    "jit of checkify passes": lambda ns: ns.jax.jit(ns.checkify.checkify(_f(ns)))(
        ns.jnp.ones(5), 2),
    "checkify eager": lambda ns: ns.checkify.checkify(_f(ns))(ns.jnp.ones(5), ns.jnp.array(-3)),
    "checkify of jit": lambda ns: ns.checkify.checkify(ns.jax.jit(_f(ns)))(
        ns.jnp.ones(5), ns.jnp.array(-2)),
    "checkify of jit, Python int": lambda ns: ns.checkify.checkify(ns.jax.jit(_f(ns)))(
        ns.jnp.ones(5), -2),
    "checkify of jit, static Python int": lambda ns: ns.checkify.checkify(
        ns.jax.jit(_f(ns), static_argnums=1))(ns.jnp.ones(5), -2),
    "static index out of bounds": lambda ns: ns.checkify.checkify(
        lambda x: x[100], errors=ns.checkify.index_checks)(ns.jnp.arange(5.)),
    "static negative index out of bounds, 2-d": lambda ns: ns.checkify.checkify(
        lambda x: x[1:3, -9], errors=ns.checkify.index_checks)(ns.jnp.ones((3, 5))),
    "static index in bounds": lambda ns: ns.checkify.checkify(
        lambda x: x[-2], errors=ns.checkify.index_checks)(ns.jnp.arange(5.)),
    "checkify of jit, static index": lambda ns: ns.checkify.checkify(
        ns.jax.jit(lambda x, i: x[i]), errors=ns.checkify.index_checks)(ns.jnp.ones(5), 100),
    "jit without checkify": lambda ns: ns.jax.jit(_f(ns))(ns.jnp.ones(5), 1),
    "out of bounds": lambda ns: ns.checkify.checkify(_f(ns), errors=ns.checkify.all_checks)(
        ns.jnp.ones(5), ns.jnp.array(9)),
    "nan": lambda ns: ns.checkify.checkify(_f(ns), errors=ns.checkify.all_checks)(
        ns.jnp.array([np.inf, 1.]), ns.jnp.array(0)),
    "throw nan": lambda ns: _throw(ns, ns.checkify.checkify(_f(ns), errors=ns.checkify.all_checks),
                                   ns.jnp.array([np.inf, 1.]), ns.jnp.array(0)),
    "throw passes": lambda ns: _throw(ns, ns.checkify.checkify(_f(ns)), ns.jnp.ones(5),
                                      ns.jnp.array(0)),
    "all but div": lambda ns: ns.checkify.checkify(
        lambda x, y: x // y, errors=ns.checkify.all_checks - ns.checkify.div_checks)(
        ns.jnp.arange(3), ns.jnp.array([1, 0, 2])),
    "integer division": lambda ns: ns.checkify.checkify(
        lambda x, y: x // y, errors=ns.checkify.div_checks)(ns.jnp.arange(3),
                                                            ns.jnp.array([1, 0, 2])),
    "float division": lambda ns: ns.checkify.checkify(
        lambda x: x / x, errors=ns.checkify.float_checks)(ns.jnp.zeros(3)),
    "nan from log": lambda ns: ns.checkify.checkify(
        ns.jnp.log, errors=ns.checkify.nan_checks)(ns.jnp.array([-1., 2.])),
    "no nan": lambda ns: ns.checkify.checkify(
        ns.jnp.log, errors=ns.checkify.nan_checks)(ns.jnp.array([1., 2.])),
    "set arithmetic": lambda ns: sorted(c.__name__ for c in [
        *(ns.checkify.all_checks - ns.checkify.float_checks), *ns.checkify.automatic_checks]),
    "user checks only by default": lambda ns: ns.checkify.checkify(lambda x, i: x[i])(
        ns.jnp.ones(5), ns.jnp.array(10)),
    "gather out of bounds": lambda ns: ns.checkify.checkify(
        lambda x, i: x[i], errors=ns.checkify.index_checks)(ns.jnp.ones(5),
                                                            ns.jnp.array([0, 7, 9])),
    "gather out of bounds, axis 1": lambda ns: ns.checkify.checkify(
        lambda x, i, j: x[i, j], errors=ns.checkify.index_checks)(
        ns.jnp.ones((3, 4)), ns.jnp.array([0, 1]), ns.jnp.array([2, 6])),
    "dynamic_update_slice out of bounds": lambda ns: ns.checkify.checkify(
        lambda x, i: ns.lax.dynamic_update_slice(x, ns.jnp.ones(2), (i,)),
        errors=ns.checkify.index_checks)(ns.jnp.ones(5), ns.jnp.array(4)),
    "dynamic_slice out of bounds": lambda ns: ns.checkify.checkify(
        lambda x, i: ns.lax.dynamic_slice(x, (i, 0), (2, 2)),
        errors=ns.checkify.index_checks)(ns.jnp.ones((5, 3)), ns.jnp.array(4)),
    "scatter out of bounds": lambda ns: ns.checkify.checkify(
        lambda x, i: x.at[i].add(1.), errors=ns.checkify.all_checks)(ns.jnp.ones(5),
                                                                     ns.jnp.array([1, -9])),
    "vmap of checkify": lambda ns: ns.jax.vmap(ns.checkify.checkify(_positive(ns)))(
        ns.jnp.array([1., -2., 3., -4.])),
    "vmap of checkify, throw": lambda ns: _throw(
        ns, ns.jax.vmap(ns.checkify.checkify(_positive(ns))), ns.jnp.array([1., -2., 3., -4.])),
    "checkify of vmap": lambda ns: ns.checkify.checkify(ns.jax.vmap(_positive(ns)))(
        ns.jnp.array([1., -2., 3., -4.])),
    "jit of vmap of checkify": lambda ns: ns.jax.jit(ns.jax.vmap(ns.checkify.checkify(
        _positive(ns))))(ns.jnp.array([1., 2., -3.])),
    "checkify of grad": lambda ns: ns.checkify.checkify(ns.jax.grad(_h(ns)))(-1.),
    "grad eager fails": lambda ns: ns.jax.grad(_h(ns))(-1.),
    "grad eager passes": lambda ns: ns.jax.grad(_h(ns))(1.),
    "jit of grad": lambda ns: ns.jax.jit(ns.jax.grad(_h(ns)))(1.),
    "nan in a gradient": lambda ns: ns.checkify.checkify(
        ns.jax.grad(lambda x: x / (1 + ns.jnp.sqrt(x))), errors=ns.checkify.nan_checks)(0.),
    "cond": lambda ns: ns.checkify.checkify(_cond(ns))(ns.jnp.float32(20.)),
    "cond, other branch": lambda ns: ns.checkify.checkify(_cond(ns))(ns.jnp.float32(-20.)),
    "jit of cond": lambda ns: ns.jax.jit(ns.checkify.checkify(_cond(ns)))(ns.jnp.float32(20.)),
    "while body": lambda ns: ns.checkify.checkify(_while(ns))(ns.jnp.float32(2.)),
    "while body passes": lambda ns: ns.checkify.checkify(_while(ns))(ns.jnp.float32(0.)),
    "while test": lambda ns: ns.checkify.checkify(_while_test(ns))(ns.jnp.int32(3)),
    "while test, first": lambda ns: ns.checkify.checkify(_while_test(ns))(ns.jnp.int32(60)),
    "scan": lambda ns: ns.checkify.checkify(_scan(ns))(ns.jnp.array([1., 2., -3., -4.])),
    "fori_loop, jit": lambda ns: ns.jax.jit(ns.checkify.checkify(_fori(ns)))(
        ns.jnp.float32(0.)),
    "check_error eager": lambda ns: _reraise(ns)(ns.jnp.array([-1.])),
    "check_error under checkify": lambda ns: ns.checkify.checkify(_reraise(ns))(
        ns.jnp.array([-1.])),
    "check_error under jit": lambda ns: ns.jax.jit(_reraise(ns))(ns.jnp.array([1.])),
    "check_error of a mapped error, under checkify": lambda ns: ns.checkify.checkify(
        _rethrow_mapped(ns))(ns.jnp.array([[1.], [-2.], [-3.], [4.]])),
    "check_error of a mapped error, eager": lambda ns: _rethrow_mapped(ns)(
        ns.jnp.array([[1.], [-2.], [-3.], [4.]])),
    "check_error of a non-error": lambda ns: ns.checkify.check_error(3),
    "debug_check under checkify": lambda ns: ns.checkify.checkify(_debug(ns))(
        ns.jnp.float32(-1.)),
    "debug_check under jit": lambda ns: ns.jax.jit(_debug(ns))(ns.jnp.float32(-1.)),
    "str of an error": lambda ns: str(ns.checkify.checkify(_positive(ns))(
        ns.jnp.array([-1.]))[0]),
    "init_error": lambda ns: ns.checkify.init_error.get(),
    "user check before an earlier index check": lambda ns: ns.checkify.checkify(
        lambda x, i: (x[i], ns.checkify.check(i < 3, "user {}", i))[0],
        errors=ns.checkify.all_checks)(ns.jnp.ones(5), ns.jnp.array(7)),
    "keyword and pytree formats": lambda ns: ns.checkify.checkify(
        lambda x: (ns.checkify.check(x > 0, "{a} {b} {}", (x, x), b=x + 1, a=x * 2), x)[1])(
        ns.jnp.float32(-1.)),
    "remat": lambda ns: ns.checkify.checkify(ns.jax.checkpoint(_positive(ns)))(
        ns.jnp.array([-1.])),
    "custom_jvp": lambda ns: ns.checkify.checkify(_custom(ns))(ns.jnp.float32(-2.)),
    "gradient check in custom_vjp": lambda ns: ns.jax.grad(_negative_gradient(ns))(-1.),
    "the error as aux of value_and_grad, jit": lambda ns: _aux(ns, ns.jax.jit(
        ns.jax.value_and_grad(_loss(ns), has_aux=True))(-2.)),
    "custom_vjp rule kept under checkify": lambda ns: _aux(ns, ns.jax.value_and_grad(
        _custom_vjp_loss(ns), has_aux=True)(2.)),
    "check in a custom_vjp function": lambda ns: _swap(_custom_vjp_loss(ns)(-1.)),
    "custom_vjp rule kept under checkify, jit": lambda ns: _aux(ns, ns.jax.jit(
        ns.jax.value_and_grad(_custom_vjp_loss(ns), has_aux=True))(2.)),
    "keyword arguments": lambda ns: ns.checkify.checkify(
        lambda x, *, i: _h(ns)(x) + i)(ns.jnp.float32(-1.), i=ns.jnp.float32(2.)),
}


def _loss(ns):
    def loss(x):
        err, y = ns.checkify.checkify(_h(ns), errors=ns.checkify.all_checks)(x)
        return y, err
    return loss


def _swap(pair):
    return pair[1], pair[0]


def _aux(ns, result):
    (value, err), grad = result
    return err, (value, grad)


def _h(ns):
    def h(x):
        ns.checkify.check(x > 0, "must be positive {}", x)
        return ns.jnp.sin(x) * x
    return h


def _cond(ns):
    def c(x):
        def t(x):
            ns.checkify.check(x < 10, "too big {}", x)
            return x * 2
        return ns.lax.cond(x > 0, t, lambda x: x - 1., x)
    return c


def _while(ns):
    def w(x):
        def body(c):
            i, v = c
            ns.checkify.check(v < 100, "overflow at step {}: {}", i, v)
            return i + 1, v * 3
        return ns.lax.while_loop(lambda c: c[0] < 10, body, (0, x))
    return w


def _while_test(ns):
    def w(x):
        def test(c):
            ns.checkify.check(c < 50, "test saw {}", c)
            return c < 40
        return ns.lax.while_loop(test, lambda c: c + 7, x)
    return w


def _scan(ns):
    def s(xs):
        def body(c, x):
            ns.checkify.check(x >= 0, "negative element {}", x)
            return c + x, c
        return ns.lax.scan(body, 0., xs)
    return s


def _fori(ns):
    def f(x):
        def body(i, c):
            ns.checkify.check(c < 5, "fori {} {}", i, c)
            return c + 1.
        return ns.lax.fori_loop(0, 10, body, x)
    return f


def _reraise(ns):
    def r(x):
        err, y = ns.checkify.checkify(_positive(ns))(x)
        ns.checkify.check_error(err)
        return y
    return r


def _debug(ns):
    def d(x):
        ns.checkify.debug_check(x > 0, "debug {}", x)
        return x
    return d


def _custom(ns):
    @ns.jax.custom_jvp
    def c(x):
        ns.checkify.check(x > 0, "custom {}", x)
        return x
    c.defjvp(lambda p, t: (c(p[0]), t[0]))
    return c


def _negative_gradient(ns):
    @ns.jax.custom_vjp
    def assert_gradient_negative(x):
        return x

    def bwd(_, g):
        ns.checkify.check(g < 0, "gradient needs to be negative!")
        return (g,)
    assert_gradient_negative.defvjp(lambda x: (assert_gradient_negative(x), None), bwd)
    return assert_gradient_negative


def _rethrow_mapped(ns):
    def r(xs):
        err, y = ns.jax.vmap(ns.checkify.checkify(_positive(ns)))(xs)
        ns.checkify.check_error(err)
        return y
    return r


def _custom_vjp_loss(ns):
    @ns.jax.custom_vjp
    def f(x):
        ns.checkify.check(x > 0, "f {}", x)
        return ns.jnp.sin(x)
    f.defvjp(lambda x: (ns.jnp.sin(x), x), lambda x, g: (g * 100.,))

    def loss(x):
        err, y = ns.checkify.checkify(f)(x)
        return y, err
    return loss


# Which primitive a NaN is blamed on, through jnp and jax.nn functions: the primitives they
# are built of must be JAX's.
NAN_SOURCES = {
    "mean of log": (lambda ns, x: ns.jnp.mean(ns.jnp.log(x)), [1., -1.]),
    "softmax": (lambda ns, x: ns.jax.nn.softmax(x), [np.inf, 1.]),
    "var": (lambda ns, x: ns.jnp.var(x), [np.inf, 1.]),
    "arccos": (lambda ns, x: ns.jnp.arccos(x), [2., 1.]),
    "sum": (lambda ns, x: ns.jnp.sum(x), [np.inf, -np.inf]),
    "cumsum": (lambda ns, x: ns.jnp.cumsum(x), [np.inf, -np.inf]),
    "power": (lambda ns, x: x ** 0.5, [-1., 2.]),
    "square": (lambda ns, x: ns.jnp.square(x) - x ** 2, [np.inf, 2.]),
    "logsumexp": (lambda ns, x: ns.jax.nn.logsumexp(x), [np.inf, -np.inf]),
    "masked log": (lambda ns, x: ns.jnp.where(x > 0, ns.jnp.log(x), 0.), [-1., 2.]),
    "remainder": (lambda ns, x: ns.jnp.remainder(x, 0.), [1., 2.]),
}


def _nan_case(source, value):
    return lambda ns: ns.checkify.checkify(lambda v: source(ns, v),
                                           errors=ns.checkify.float_checks)(
        ns.jnp.array(value, np.float32))


CASES.update({f"nan from {name}": _nan_case(*source) for name, source in NAN_SOURCES.items()})
