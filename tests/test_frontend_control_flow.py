"""The front end's Python control flow under `kiln.jit`, against the same function run eagerly.

Every function here is plain Python over `kiln.numpy`; each test calls it eagerly (Python runs
the `if`/`while`/`for`) and through `kiln.jit` (the specialiser compiles control flow on traced
values into `cond`/`while_loop`/`scan`) on hypothesis-drawn inputs, and compares values, dtypes
and weak types. Tests also check the shape of the SSA form where it matters (a 1000-iteration
`for` is one `scan`, not 1000 copies). The SSA verifier runs after every pass (`KILN_VERIFY`).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import lax

SETTINGS = settings(max_examples=12, deadline=None)

floats = st.floats(-4, 4, width=32)
vectors = hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=1, min_side=1,
                                                  max_side=5), elements=floats)
matrices = hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1,
                                                   max_side=4), elements=floats)


@pytest.fixture(autouse=True)
def _verify(monkeypatch):
    monkeypatch.setenv("KILN_VERIFY", "1")


def _leaf(x):
    """(dtype, weak_type, value) of a result leaf; Python scalars are weakly typed."""
    a = kiln.array.to_array(x)
    return str(a.dtype), a.weak_type, np.asarray(a._value)


def assert_same(got, want, weak=True):
    """Same structure, dtypes and values; and weak types unless `weak` is False (a Python
    `if` joining a Python scalar with an array is strongly typed under jit, whichever
    branch runs)."""
    got_leaves, got_tree = kiln.tree_util.tree_flatten(got)
    want_leaves, want_tree = kiln.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        gd, gw, gv = _leaf(g)
        wd, ww, wv = _leaf(w)
        assert gd == wd and (gw == ww or not weak), \
            f"jit gives {gd} weak={gw}, eager {wd} weak={ww}"
        np.testing.assert_allclose(gv, wv, rtol=1e-5, atol=1e-5)


def check(fn, *args, weak=True, **jit_kwargs):
    """jit(fn)(*args) equals fn(*args); returns the jitted function."""
    jitted = kiln.jit(fn, **jit_kwargs)
    want = fn(*args)
    assert_same(jitted(*args), want, weak)
    return jitted


def ssa_text(fn, *args, **jit_kwargs):
    return kiln.jit(fn, **jit_kwargs).lower(*args).as_text()


def primitives_in(fn, *args):
    """Names of every primitive in the (unsimplified) SSA form, regions included."""
    return str(kiln.make_ir(fn)(*args))


# --------------------------------------------------------------------------------- `if`

def if_elif_else(x):
    s = jnp.sum(x)
    if s > 1.0:
        y = x * 2
    elif s < -1.0:
        y = -x
    else:
        y = x + 1
    return y


def if_without_else(x):
    y = x
    if jnp.max(x) > 0:
        y = y * 3
    return y


def if_joins_scalar_and_array(x):
    total = 0.0
    if x[0] > 0:
        total = jnp.sum(x)
    return total


def if_on_comparison_chain(x):
    if -1.0 < x[0] <= 2.0:
        z = x * 10
    else:
        z = x / 10
    return z


def if_boolean_operators(x):
    a = jnp.sum(x)
    if a > 0 and not x[0] < 0 or a < -3:
        out = a
    else:
        out = -a
    return out


def if_several_variables(x):
    lo, hi, count = x, x, 0
    if x[-1] >= 0:
        lo = x - 1
        count = count + 1
    else:
        hi = x + 1
        count = count + 2
    return lo, hi, count


@SETTINGS
@given(vectors)
@pytest.mark.parametrize("fn", [if_elif_else, if_without_else, if_joins_scalar_and_array,
                                if_on_comparison_chain, if_boolean_operators,
                                if_several_variables])
def test_if_on_traced_values(fn, x):
    check(fn, jnp.asarray(x), weak=fn is not if_joins_scalar_and_array)


def test_if_on_traced_value_compiles_to_cond():
    text = ssa_text(if_elif_else, jnp.ones(3))
    assert text.count("cond(") == 2


def ifexp(x):
    return x * 2 if x.sum() > 0 else x - 5


@SETTINGS
@given(vectors)
def test_conditional_expression(x):
    check(ifexp, jnp.asarray(x))


def static_if(x, mode):
    if mode == "double":
        return x * 2
    elif mode == "neg":
        return -x
    return x


def test_if_on_static_value_takes_one_branch():
    x = jnp.arange(3.0)
    j = check(static_if, x, "neg", static_argnums=1)
    assert_same(j(x, "double"), x * 2)
    assert "cond" not in ssa_text(static_if, x, "neg", static_argnums=1)


# ------------------------------------------------------------------------ early return

def early_return_one_branch(x):
    if x[0] > 0:
        return x * 2
    y = x + 1
    return y * y


def early_return_nested(x):
    if x[0] > 0:
        if x[-1] > 0:
            return x * 3
        x = x - 1
    elif x[0] < -1:
        return -x
    z = x + 10
    return z


def early_return_both_branches(x):
    s = x.sum()
    if s > 0:
        return s, x
    else:
        return -s, x * 0


def early_return_in_else_only(x):
    if x[0] > 1:
        y = x + 1
    else:
        return x
    return y * 2


@SETTINGS
@given(vectors)
@pytest.mark.parametrize("fn", [early_return_one_branch, early_return_nested,
                                early_return_both_branches, early_return_in_else_only])
def test_early_return(fn, x):
    check(fn, jnp.asarray(x))


# ------------------------------------------------------------------------------ `while`

def while_traced(x):
    x = jnp.abs(x) + 0.5
    steps = 0
    while jnp.sum(x) < 100.0:
        x = x * 2
        steps += 1
    return x, steps


def while_with_static_start(x, n):
    i = 0
    acc = x
    while i < n:  # i starts static; n is traced: the loop compiles
        acc = acc + i
        i = i + 1
    return acc, i


def while_with_and(x):
    i = 0
    while i < 5 and x.sum() < 50.0:
        x = x + 3.0
        i += 1
    return x, i


def while_static(x):
    n = 0
    while n < 4:
        x = x * 2
        n += 1
    return x


@SETTINGS
@given(vectors)
def test_while_on_traced_values(x):
    check(while_traced, jnp.asarray(x))
    check(while_with_and, jnp.asarray(x))
    check(while_static, jnp.asarray(x))


@SETTINGS
@given(vectors, st.integers(-2, 6))
def test_while_with_traced_bound(x, n):
    check(while_with_static_start, jnp.asarray(x), jnp.int32(n))


def test_traced_while_compiles_to_while_loop():
    assert "while_loop(" in ssa_text(while_traced, jnp.ones(3))
    assert "while_loop" not in ssa_text(while_static, jnp.ones(3))


def while_break(x):
    i = 0
    while i < 10:
        if x.sum() > 20.0:
            break
        x = x + 1.0
        i += 1
    return x


def while_continue(x):
    i = 0
    while x.sum() < 20.0:
        i += 1
        x = x + 1.0
        if x[0] > 2.0:
            continue
        x = x + 0.5
    return x, i


@SETTINGS
@given(vectors)
def test_break_and_continue_on_traced_values(x):
    check(while_break, jnp.asarray(x))
    check(while_continue, jnp.asarray(x))


def static_break_continue(x):
    for k in range(10):
        if k % 2 == 0:
            continue
        if k > 6:
            break
        x = x + k
    return x


def test_break_and_continue_on_static_values():
    check(static_break_continue, jnp.arange(3.0))


# -------------------------------------------------------------------------------- `for`

def range_loop_1000(x):
    for i in range(1000):
        x = x * 0.999 + i * 1e-3
    return x


def test_range_loop_is_a_real_loop():
    x = jnp.linspace(0.0, 1.0, 4)
    check(range_loop_1000, x)
    text = str(kiln.make_ir(range_loop_1000)(x))
    assert "scan(" in text or "while_loop(" in text
    assert text.count("mul(") < 5, text


def range_loop_with_start_and_step(x):
    acc = jnp.zeros_like(x)
    for i in range(3, 40, 3):
        acc = acc + x * i
    return acc


def range_loop_index_into_array(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + x[i] * i
    return total


def range_loop_int8_carry(x):
    for i in range(5):
        x = x + i
    return x


@SETTINGS
@given(vectors)
def test_range_loops(x):
    check(range_loop_with_start_and_step, jnp.asarray(x))
    check(range_loop_index_into_array, jnp.asarray(x))


def test_range_loop_keeps_python_int_semantics_for_index():
    # `i` is a Python int in eager code: `int8 + i` stays int8.
    check(range_loop_int8_carry, jnp.arange(4, dtype=jnp.int8))
    x = jnp.arange(4, dtype=jnp.int8)
    assert "scan(" in str(kiln.make_ir(range_loop_int8_carry)(x))


def range_loop_needs_static_index(x):
    parts = []
    for i in range(3):
        parts.append(x[: i + 1].sum())  # slice bounds must be static
    return parts


def range_loop_over_python_list(x):
    scales = [1.0, 2.0, 3.0]
    for i in range(3):
        x = x * scales[i]
    return x


def test_range_loop_unrolls_when_index_must_be_static():
    x = jnp.arange(4.0)
    check(range_loop_needs_static_index, x)
    check(range_loop_over_python_list, x)


def for_over_array(xs):
    s = jnp.zeros(xs.shape[1:], xs.dtype)
    m = -jnp.inf
    for row in xs:
        s = s + row
        m = jnp.maximum(m, row.sum())
    return s, m


def for_over_vector_with_python_scalar_carry(xs):
    total = 0.0
    for v in xs.ravel():
        total = total + v * v
    return total


@SETTINGS
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4),
                  elements=floats))
def test_for_over_array_leading_axis(xs):
    # With no iterations, eager code returns the initial Python float (weakly typed); the
    # compiled loop's carry has the strongly typed dtype the body gives it, as in JAX.
    check(for_over_array, jnp.asarray(xs), weak=xs.shape[0] > 0)
    check(for_over_vector_with_python_scalar_carry, jnp.asarray(xs), weak=xs.size > 0)


def test_for_over_array_compiles_to_scan():
    assert "scan(" in str(kiln.make_ir(for_over_array)(jnp.ones((50, 3))))


def for_over_static_containers(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    for k, (w, _) in enumerate(params):
        x = x + k * w.sum()
    for a, b in zip([1.0, 2.0], [3.0, 4.0]):
        x = x * a + b
    for key in {"p": 1, "q": 2}:
        x = x + len(key)
    return x


@SETTINGS
@given(st.integers(1, 4), st.integers(0, 3))
def test_for_over_static_containers(n, batch):
    rng = np.random.default_rng(n * 10 + batch)
    params = [(jnp.asarray(rng.normal(size=(n, n)).astype(np.float32)),
               jnp.asarray(rng.normal(size=(n,)).astype(np.float32))) for _ in range(2)]
    x = jnp.asarray(rng.normal(size=(batch, n)).astype(np.float32))
    check(for_over_static_containers, params, x)


def comprehensions(x):
    squares = [x * k for k in range(3)]
    evens = [v for k, v in enumerate(squares) if k % 2 == 0]
    table = {f"p{k}": v.sum() for k, v in enumerate(evens)}
    nested = [a * b for a in (1, 2) for b in (3.0, 4.0)]
    gen = sum(v.mean() for v in squares)
    return squares, evens, table, nested, gen


@SETTINGS
@given(vectors)
def test_comprehensions(x):
    check(comprehensions, jnp.asarray(x))


def local_containers(x):
    acc = []
    stats = {}
    for k in range(3):
        acc.append(x * k)
    stats["sum"] = acc[-1].sum()
    stats["n"] = len(acc)
    acc[0] = acc[0] + 1
    stats["sum"] += 1
    first, *rest = acc
    nested = [[x], {"a": [1.0]}, sorted([2.0, 1.0]), list(acc)]
    nested[0].append(x * 2)
    nested[1]["a"].append(x.sum())
    nested[2].append(3.0)
    nested[3].pop()
    return first, rest, stats, nested


@SETTINGS
@given(vectors)
def test_local_lists_and_dicts_holding_traced_values(x):
    check(local_containers, jnp.asarray(x))


# ----------------------------------------------------------------- kiln.lax under jit

def lax_fori(x):
    return lax.fori_loop(0, 7, lambda i, c: c * 1.5 + i, x)


def lax_fori_traced_bound(x, n):
    return lax.fori_loop(0, n, lambda i, c: c + i, x)


def lax_while(x):
    return lax.while_loop(lambda c: c[1] < 6, lambda c: (c[0] * 2, c[1] + 1), (x, 0))


def lax_scan(xs):
    return lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(xs.shape[1:]), xs)


def lax_cond(x):
    return lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)


def lax_switch(x):
    i = jnp.int32(jnp.sum(x > 0))
    return lax.switch(i, [lambda v: v, lambda v: v * 2, lambda v: -v], x)


def lax_map(xs):
    return lax.map(lambda row: row.sum() * 2, xs)


def lax_select(x):
    return lax.select(x > 0, x, jnp.zeros_like(x))


@SETTINGS
@given(matrices)
@pytest.mark.parametrize("fn,prim", [(lax_fori, "scan"), (lax_while, "while_loop"),
                                     (lax_scan, "scan"), (lax_cond, "cond"),
                                     (lax_switch, "cond"), (lax_map, "scan"),
                                     (lax_select, "select_n")])
def test_lax_control_flow_under_jit(fn, prim, xs):
    x = jnp.asarray(xs)
    check(fn, x)
    assert f"{prim}(" in str(kiln.make_ir(fn)(x))


@SETTINGS
@given(vectors, st.integers(-2, 6))
def test_lax_fori_loop_with_traced_bound(x, n):
    check(lax_fori_traced_bound, jnp.asarray(x), jnp.int32(n))
    assert "while_loop(" in str(kiln.make_ir(lax_fori_traced_bound)(jnp.asarray(x),
                                                                      jnp.int32(n)))


# ------------------------------------------------- containers under traced control flow

def list_mutated_in_branches(x):
    acc = [x]
    stats = {"n": 0}
    if x.sum() > 0:
        acc.append(x * 2)
        stats["n"] = 1
    else:
        acc.append(x * 3)
    acc.append(x.max())
    return acc, stats


def dict_updated_in_one_branch(x):
    d = {"a": x, "b": 1.0}
    if x[0] > 0:
        d["a"] = x * 2
        d["b"] = x.sum()
    return d


@SETTINGS
@given(vectors)
def test_containers_mutated_in_traced_branches(x):
    check(list_mutated_in_branches, jnp.asarray(x))
    check(dict_updated_in_one_branch, jnp.asarray(x), weak=False)


def list_carried_through_loops(x):
    xs = [x, x]
    for _ in range(5):
        xs = [xs[0] + 1, xs[1] * 2]
    while xs[0].sum() < 20:
        xs = [xs[0] + 3, xs[1]]
    xs.append(x)  # the loops' results are new lists this function owns
    return xs


def list_grown_over_array(xs):
    out = []
    for row in xs:
        out.append(row * 2)
    return out


@SETTINGS
@given(matrices)
def test_lists_through_compiled_loops(xs):
    x = jnp.asarray(xs)
    check(list_carried_through_loops, x[0])
    check(list_grown_over_array, x)


# ----------------------------------------------------------- returns under static code

def return_under_static_if(x, flag):
    if flag:
        if x.sum() > 0:
            return x
        x = x + 1
    return x * 2


def return_in_both_branches_inside_a_loop(x):
    for i in range(3):
        if x[0] > 0:
            return x * i
        else:
            return x - i
    return x


@SETTINGS
@given(vectors, st.booleans())
def test_early_return_under_static_code(x, flag):
    check(return_under_static_if, jnp.asarray(x), flag, static_argnums=1)
    check(return_in_both_branches_inside_a_loop, jnp.asarray(x))


# --------------------------------------------- Python control flow in lax loop bodies

def _halve_or_double(i, c):
    if c.sum() > 10:
        c = c / 2
    else:
        c = c * 2 + i
    return c


def _abs_row(row):
    return row if row.sum() > 0 else -row


def lax_body_with_python_if(x):
    return lax.fori_loop(0, 6, _halve_or_double, x)


def map_with_python_if(xs):
    return lax.map(_abs_row, xs), list(map(_abs_row, xs))


@SETTINGS
@given(matrices)
def test_python_control_flow_inside_lax_bodies(xs):
    x = jnp.asarray(xs)
    check(lax_body_with_python_if, x[0])
    check(map_with_python_if, x)


def while_static_then_traced(x):
    i = 0
    while i < 3 or x.sum() < 10:  # static for three iterations, then traced
        x = x + 1
        i += 1
    return x, i


@SETTINGS
@given(vectors)
def test_while_test_that_becomes_traced(x):
    check(while_static_then_traced, jnp.asarray(x))


# ------------------------------------------------------------------------------ dtypes

def dtype_stable(x):
    y = x
    if x.sum() > 3:
        y = y * 3
    for row in x:
        y = y + row
    for i in range(4):
        y = y - i
    while y.sum() > 100:
        y = y // 2 if y.dtype.kind in "iu" else y / 2
    return y


@SETTINGS
@given(st.sampled_from(["int8", "uint8", "int32", "float16", "float32"]), st.data())
def test_compiled_control_flow_keeps_dtypes(dtype, data):
    elements = st.integers(0, 20) if dtype != "int8" else st.integers(-20, 20)
    x = data.draw(hnp.arrays(np.dtype(dtype), hnp.array_shapes(min_dims=1, max_dims=1,
                                                               min_side=0, max_side=4),
                             elements=elements))
    check(dtype_stable, jnp.asarray(x))
