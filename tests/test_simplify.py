"""The simplification passes and the named pass pipeline.

Every pass is checked three ways: its output verifies, its input is left untouched, and the
input and output run on the reference backend give the same results on hypothesis-drawn data
(NaN, inf and signed zeros included). Equation counts check that each rewrite fires where it
should and only there (no float x*0, no rewrite that loses a broadcast, a weak type or a
permutation), that effects survive CSE and DCE, and that the seed's `stupid_fn` (a copy, then
1000 dead multiplies) simplifies to a single copy.
"""
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from kiln.compiler import passes
from kiln.compiler.backends.reference import compile_function
from kiln.compiler.ir.parser import from_source
from kiln.compiler.ir.ssa import Eqn, Function, Literal
from kiln.compiler.ir.verify import SSAVerificationError, verify
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.transforms.simplify import (apply_identities, cse, dce, fold_constants,
                                               simplify)

PASSES = {"fold": fold_constants, "identities": apply_identities, "cse": cse, "dce": dce,
          "simplify": simplify}

FOLD = """
def fold(x: 'f32[3]', n: 'i8[2]') -> '(f32[3], i8[2], f32[], f16[], i8[])':
    a = add(2.0, 3.0)
    b = mul(x, a)
    c = convert_element_type(int32(7), new_dtype=float32, weak_type=False)
    d = add(b, c)
    e = add(int8(100), int8(100))
    f = mul(n, e)
    g = sqrt(-1.0)
    h = convert_element_type(2.5, new_dtype=float16, weak_type=False)
    k = max(h, float16(-inf))
    o = broadcast_in_dim(1.0, shape=(3,), broadcast_dimensions=())
    return d, f, g, k, e
"""

IDENTITIES = """
def identities(x: 'f32[3]', n: 'i32[3]', m: 'f32[2,3]', p: 'bool[3]', k: 'i32[]') -> '(f32[3], i32[3], i32[3], f32[3], f32[2,3], i32[], f32[2,3])':
    a = add(x, 0.0)
    b = add(0.0, a)
    c = sub(b, -0.0)
    d = mul(c, 1.0)
    e = mul(1.0, d)
    f = div(e, 1.0)
    g = integer_pow(f, y=1)
    h = neg(g)
    i = neg(h)
    j = select_n(p, i, i)
    l = reshape(j, new_sizes=(3,), dimensions=None)
    o = broadcast_in_dim(l, shape=(3,), broadcast_dimensions=(0,))
    q = convert_element_type(o, new_dtype=float32, weak_type=False)
    r = mul(n, 0)
    t = mul(int32(0), n)
    u = exp(q)
    v = copy(u)
    w = transpose(m, permutation=(0, 1))
    w2 = rev(w, dimensions=())
    w3 = slice(w2, start_indices=(0, 0), limit_indices=(2, 3), strides=None)
    z = mul(k, 0)
    nn = div(n, 1)
    return q, r, t, v, w3, z, m
"""

NO_IDENTITIES = """
def no_identities(x: 'f32[3]', w: 'f32[3,3]', s: 'f32[]', n: 'i32[3]', p: 'bool[3]') -> '(f32[3], f32[3], f32[2,3], f32[3,3], f32[3,3], f32[3,3], f32[3], f32[3], f32[3], f32[3], f32[3], i32[3], f32[3], f32[3], f32[3], f32[3])':
    a = mul(x, 0.0)
    b = mul(0.0, x)
    z = broadcast_in_dim(0.0, shape=(2, 3), broadcast_dimensions=())
    c = add(s, z)
    d = transpose(w, permutation=(1, 0))
    e = broadcast_in_dim(w, shape=(3, 3), broadcast_dimensions=(1, 0))
    f = reshape(w, new_sizes=(3, 3), dimensions=(1, 0))
    g = add(x, 1.0)
    h = div(1.0, x)
    i = sub(0.0, x)
    j = integer_pow(x, y=2)
    l = convert_element_type(x, new_dtype=float32, weak_type=True)
    l2 = add(l, float32(0.0))
    m = copy(n)
    nn = neg(x)
    o = copy(nn)
    q = add(nn, x)
    r = select_n(p, x, h)
    t = pow(x, 1.0)
    return a, b, c, d, e, f, g, h, i, j, l2, m, o, q, r, t
"""

CSE = """
def common(x: 'f32[3]', y: 'f32[3]') -> '(f32[3], f32[3], f32[], f32[], f32[], f32[3], f32[3], f32[3], i32[3], i16[3])':
    a = exp(x)
    b = exp(x)
    c = add(a, b)
    d = add(a, b)
    e = reduce_sum(x, axes=(0,))
    f = reduce_sum(x, axes=(0,))
    g = reduce_max(x, axes=(0,))
    h = mul(x, 0.0)
    i = mul(x, -0.0)
    j = mul(x, 0.0)
    k = convert_element_type(x, new_dtype=int32, weak_type=False)
    l = convert_element_type(x, new_dtype=int16, weak_type=False)
    return c, d, e, f, g, h, i, j, k, l
"""

DCE = """
def dead(x: 'f32[3]', y: 'f32[3]') -> '(f32[3], f32[3])':
    a = exp(x)
    b = log(a)
    c = add(x, y)
    d = mul(c, c)
    s1, s2 = sort(x, y, dimension=0, is_stable=True, num_keys=1)
    e = add(s1, 1.0)
    return d, x
"""

CHAIN = """
def chain(x: 'f32[3]', k: 'i32[]') -> '(f32[3], i32[], f32[3])':
    a = mul(2.0, 0.5)
    b = mul(x, a)
    c = neg(b)
    d = neg(c)
    e = exp(d)
    f = exp(x)
    g = sub(e, f)
    h = mul(k, 0)
    i = add(h, 5)
    j = mul(k, i)
    u = tanh(x)
    v = copy(u)
    w = neg(u)
    return g, j, v
"""

CONTROL_FLOW = """
def control(p: 'bool[]', x: 'f32[3]', n: 'i32[]') -> '(f32[3], f32[3], f32[3])':
    def neg_branch(a: 'f32[3]') -> 'f32[3]':
        b = neg(a)
        b_1 = mul(b, 1.0)
        dead = exp(a)
        return b_1
    def id_branch(a_1: 'f32[3]') -> 'f32[3]':
        return a_1
    r, = cond(p, x, branches=(neg_branch, id_branch))
    r2, = cond(p, x, branches=(neg_branch, id_branch))
    def same_as_neg(a_2: 'f32[3]') -> 'f32[3]':
        b_2 = neg(a_2)
        return b_2
    r3, = cond(p, x, branches=(same_as_neg, id_branch))
    def loop_cond(lim: 'i32[]', i: 'i32[]', acc: 'f32[3]') -> 'bool[]':
        c = lt(i, lim)
        return c
    def loop_body(lim_1: 'i32[]', i_1: 'i32[]', acc_1: 'f32[3]') -> '(i32[], f32[3])':
        i_2 = add(i_1, 1)
        unused = exp(acc_1)
        acc_2 = mul(acc_1, 0.5)
        acc_3 = add(acc_2, 0.0)
        return i_2, acc_3
    i_out, acc_out = while_loop(n, 0, r, cond_fn=loop_cond, body_fn=loop_body, num_consts=1)
    return r2, r3, acc_out
"""

SELECT = """
def select(x: 'f32[3]', y: 'f32[3]', p: 'bool[3]') -> '(f32[3], f32[3], f32[3], f32[3], f32[3])':
    a = select_n(True, x, y)
    b = select_n(False, x, y)
    c = select_n(int32(5), x, y, x)
    d = select_n(int32(-1), y, x)
    e = select_n(p, x, y)
    return a, b, c, d, e
"""

DOTS = """
def dots(a: 'f32[3,4]', b: 'f32[5,4]', c: 'f32[2,4,3]', d: 'f32[2,3,5]', f: 'f32[2,5]') -> '(f32[3,5], f32[2,4,5], f32[3,4,5], f32[4,5])':
    bt = transpose(b, permutation=(1, 0))
    p = dot_general(a, bt, dimension_numbers=(((1,), (0,)), ((), ())), precision=None, preferred_element_type=None)
    ct = transpose(c, permutation=(0, 2, 1))
    q = dot_general(ct, d, dimension_numbers=(((1,), (1,)), ((0,), (0,))), precision=None, preferred_element_type=None)
    e = transpose(c, permutation=(2, 1, 0))
    r = dot_general(e, f, dimension_numbers=(((2,), (0,)), ((), ())), precision=None, preferred_element_type=None)
    return p, q, r, bt
"""

PROGRAMS = {"fold": FOLD, "identities": IDENTITIES, "no_identities": NO_IDENTITIES,
            "cse": CSE, "dce": DCE, "chain": CHAIN, "control_flow": CONTROL_FLOW,
            "select": SELECT, "dots": DOTS}


# ------------------------------------------------------------------------------- helpers

def _apply(pass_fn, fn):
    """Run a pass; check that it verifies and leaves its input untouched."""
    before = str(fn)
    out = pass_fn(fn)
    assert str(fn) == before, "the pass mutated its input"
    assert out is not fn
    verify(out)
    return out


def _ops(fn):
    return Counter(e.prim.name for e in fn.eqns)


def _elements(dtype):
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(max(info.min, -1000), min(info.max, 1000))
    return st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)


def _inputs(fn):
    return st.tuples(*[hnp.arrays(v.aval.dtype, v.aval.shape, elements=_elements(v.aval.dtype))
                       for v in fn.invars])


def _same_results(a, b, args):
    outs_a, outs_b = a(*args), b(*args)
    assert len(outs_a) == len(outs_b)
    for x, y in zip(outs_a, outs_b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


_COMPILED = {}


def _before_after(program, pass_name):
    """(input, executable of input, executable of the pass's output), built once per pair."""
    key = (program, pass_name)
    if key not in _COMPILED:
        fn = from_source(PROGRAMS[program])
        out = _apply(PASSES[pass_name], fn)
        _COMPILED[key] = fn, compile_function(fn), compile_function(out)
    return _COMPILED[key]


@pytest.mark.parametrize("pass_name", sorted(PASSES))
@pytest.mark.parametrize("program", sorted(PROGRAMS))
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_pass_preserves_results(program, pass_name, data):
    fn, before, after = _before_after(program, pass_name)
    _same_results(before, after, data.draw(_inputs(fn)))


_LITERALS = {"f32": ["0.0", "-0.0", "1.0", "2.0", "float32(0.0)", "float32(1.0)", "nan"],
             "i32": ["0", "1", "-1", "2", "int32(0)", "int32(1)"]}


@st.composite
def _random_programs(draw):
    """Straight-line programs over one dtype, rich in literals 0 and 1, copies, duplicates,
    no-op conversions and dead values: every rewrite gets chances to fire (or to misfire)."""
    dt = draw(st.sampled_from(["f32", "i32"]))
    pool = [("x", (3,)), ("s", ())]   # (name, shape)
    lines = []

    def operand():
        if draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(_LITERALS[dt])), ()
        return draw(st.sampled_from(pool))

    for i in range(draw(st.integers(1, 20))):
        op = draw(st.sampled_from(["add", "sub", "mul", "div", "max", "neg", "copy",
                                   "integer_pow", "convert", "broadcast"]))
        a, sa = operand()
        if op in ("add", "sub", "mul", "div", "max"):
            b, sb = operand()
            call, shape = f"{op}({a}, {b})", max(sa, sb, key=len)
        elif op == "integer_pow":
            call, shape = f"integer_pow({a}, y={draw(st.integers(0, 3))})", sa
        elif op == "convert":
            dtype = "float32" if dt == "f32" else "int32"
            call, shape = f"convert_element_type({a}, new_dtype={dtype}, weak_type=False)", sa
        elif op == "broadcast":
            dims = tuple(range(len(sa)))
            call, shape = f"broadcast_in_dim({a}, shape={sa}, broadcast_dimensions={dims})", sa
        else:
            call, shape = f"{op}({a})", sa
        lines.append(f"    v{i} = {call}")
        pool.append((f"v{i}", shape))
    outs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    head = f"def random_program(x: '{dt}[3]', s: '{dt}[]') -> 'None':"
    return "\n".join([head] + lines + ["    return " + ", ".join(n for n, _ in outs)]) + "\n"


@settings(max_examples=40, deadline=None)
@given(text=_random_programs(), data=st.data())
def test_simplify_preserves_random_programs(text, data):
    fn = from_source(text)
    out = _apply(simplify, fn)
    assert len(out.eqns) <= len(fn.eqns)
    _same_results(compile_function(fn), compile_function(out), data.draw(_inputs(fn)))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_passes_are_deterministic_and_simplify_is_a_fixed_point(program):
    fn = from_source(PROGRAMS[program])
    once = simplify(fn)
    assert str(simplify(from_source(PROGRAMS[program]))) == str(once)
    assert str(simplify(once)) == str(once)
    for p in (fold_constants, apply_identities, cse, dce):
        assert str(p(once)) == str(once)


# ------------------------------------------------------------------------ constant folding

def test_constant_folding():
    fn = from_source(FOLD)
    out = _apply(fold_constants, fn)
    assert _ops(out) == Counter(mul=2, add=1, broadcast_in_dim=1)
    d, f, g, k, e = out.outvars
    assert type(g) is Literal and np.isnan(g.value) and g.aval.weak_type
    assert type(k) is Literal and k.aval.dtype == np.float16 and k.value == 2.5
    assert type(e) is Literal and e.aval.dtype == np.int8 and e.value == -56  # wraps
    mul_b = next(e for e in out.eqns if e.outvars[0].name == "b")
    five = mul_b.invars[1]
    assert type(five) is Literal and five.value == 5.0 and five.aval.weak_type
    add_d = next(e for e in out.eqns if e.outvars[0].name == "d")
    seven = add_d.invars[1]
    assert seven.aval.dtype == np.float32 and not seven.aval.weak_type and seven.value == 7
    assert "d = add(b, float32(7.0))" in str(out)
    assert str(from_source(str(out))) == str(out)


def test_folding_a_division_by_zero_gives_inf_and_nan_without_numpy_warnings():
    # the mean of an empty axis folds 0/0 (its gradient 1/0); JAX says nothing about either
    import warnings
    fn = from_source("""
def f() -> '(f32[], f32[], i32[])':
    a = div(float32(1.0), float32(0.0))  # f32[]
    b = div(float32(0.0), float32(0.0))  # f32[]
    c = div(int32(7), int32(0))  # i32[]
    return a, b, c
""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fold_constants(fn)
    a, b, c = (x.value for x in out.outvars)
    assert not out.eqns and a == np.inf and np.isnan(b) and c == -1


# -------------------------------------------------------------------- algebraic identities

def test_identities_fire():
    fn = from_source(IDENTITIES)
    out = _apply(apply_identities, fn)
    # left: neg(x) (dead until DCE), two integer x*0 -> broadcast zeros, exp
    assert _ops(out) == Counter(neg=1, broadcast_in_dim=2, exp=1)
    q, r, t, v, w3, z, m = out.outvars
    assert q is fn.invars[0]
    assert w3 is fn.invars[2] and m is fn.invars[2]
    assert v.name == "u"  # copy of an intermediate used nowhere else
    assert type(z) is Literal and z.value == 0 and z.aval.dtype == np.int32
    zeros = [e for e in out.eqns if e.prim.name == "broadcast_in_dim"]
    assert [e.outvars[0].name for e in zeros] == ["r", "t"]
    assert all(e.params == {"shape": (3,), "broadcast_dimensions": ()} for e in zeros)
    assert _ops(simplify(fn)) == Counter(broadcast_in_dim=1, exp=1)


def test_dot_general_reads_transposed_operands_in_place():
    """A transposed operand folds into the dimension numbers unless its free axes would
    change order (`r`: the result's layout would change); a transpose used elsewhere stays."""
    fn = from_source(DOTS)
    out = _apply(apply_identities, fn)
    p, q, r, bt = out.outvars
    producer = {v: e for e in out.eqns for v in e.outvars}
    a, b, c, d, f = fn.invars
    assert producer[p].invars == [a, b]
    assert producer[p].params["dimension_numbers"] == (((1,), (1,)), ((), ()))
    assert producer[q].invars == [c, d]
    assert producer[q].params["dimension_numbers"] == (((2,), (1,)), ((0,), (0,)))
    assert producer[r].invars[0] is not c and producer[producer[r].invars[0]].prim.name \
        == "transpose"
    assert _ops(simplify(fn)) == Counter(dot_general=3, transpose=2)   # bt (a result) and e


def test_identities_that_must_not_fire():
    fn = from_source(NO_IDENTITIES)
    out = _apply(apply_identities, fn)
    assert str(out) == str(fn)


def test_float_times_zero_keeps_nan_and_inf():
    fn = from_source(NO_IDENTITIES)
    out = simplify(fn)
    args = [np.array([np.nan, np.inf, -1.0], np.float32), np.eye(3, dtype=np.float32),
            np.float32(1), np.arange(3, dtype=np.int32), np.array([True, False, True])]
    a = compile_function(out)(*args)[0]
    assert np.isnan(a[0]) and np.isnan(a[1]) and a[2] == 0


def test_copy_of_an_input_is_kept_copy_of_a_shared_value_too():
    out = simplify(from_source(NO_IDENTITIES))
    assert _ops(out)["copy"] == 2


def test_select_n_with_a_literal_predicate_picks_its_case():
    fn = from_source(SELECT)
    out = _apply(apply_identities, fn)
    x, y, _ = fn.invars
    assert out.outvars[:4] == [y, x, x, y]
    assert _ops(out) == Counter(select_n=1)


# ----------------------------------------------------------------------------------- CSE

def test_cse_merges_identical_equations():
    fn = from_source(CSE)
    out = _apply(cse, fn)
    assert _ops(out) == Counter(exp=1, add=1, reduce_sum=1, reduce_max=1, mul=2,
                                convert_element_type=2)
    c, d, e, f, g, h, i, j, k, l = out.outvars
    assert c is d and e is f and h is j
    assert i is not h  # -0.0 and 0.0 are different literals
    assert k.aval.dtype == np.int32 and l.aval.dtype == np.int16


def test_cse_compares_regions_by_identity():
    fn = from_source(CONTROL_FLOW)
    out = _apply(cse, fn)
    conds = [e for e in out.eqns if e.prim.name == "cond"]
    assert len(conds) == 2  # r2 merged with r; r3's branch is a different object
    assert out.outvars[0] is conds[0].outvars[0]


def test_regions_are_simplified_inside_and_keep_their_signatures():
    fn = from_source(CONTROL_FLOW)
    out = _apply(simplify, fn)
    conds = [e for e in out.eqns if e.prim.name == "cond"]
    neg_branch = conds[0].params["branches"][0]
    assert [e.prim.name for e in neg_branch.eqns] == ["neg"]
    loop = next(e for e in out.eqns if e.prim.name == "while_loop")
    body = loop.params["body_fn"]
    assert [e.prim.name for e in body.eqns] == ["add", "mul"]
    assert len(body.invars) == 3 and len(body.outvars) == 2  # the unused i_out is kept
    assert len(loop.outvars) == 2


def test_a_region_shared_by_two_equations_stays_shared():
    text = CONTROL_FLOW.replace("    return r2, r3, acc_out",
                                "    r4, = cond(p, acc_out, branches=(neg_branch, id_branch))\n"
                                "    return r2, r3, r4")
    out = simplify(from_source(text))
    conds = [e for e in out.eqns if e.prim.name == "cond"]
    assert conds[0].params["branches"][0] is conds[-1].params["branches"][0]
    assert str(from_source(str(out))) == str(out)


# ----------------------------------------------------------------------------------- DCE

def test_dce_drops_unused_equations():
    fn = from_source(DCE)
    out = _apply(dce, fn)
    assert [e.outvars[0].name for e in out.eqns] == ["c", "d"]


def test_dce_keeps_multi_result_equations_whole():
    text = DCE.replace("return d, x", "return d, s2")
    out = _apply(dce, from_source(text))
    sort_eqn = next(e for e in out.eqns if e.prim.name == "sort")
    assert len(sort_eqn.outvars) == 2


@pytest.fixture
def effectful_sin(monkeypatch):
    """`sin` marked as having an effect (like a host `print`) for one test."""
    monkeypatch.setattr(PRIMITIVES["sin"], "effect", True)


EFFECTS = """
def effects(p: 'bool[]', x: 'f32[3]') -> 'f32[3]':
    a = sin(x)
    b = sin(x)
    c = cos(x)
    d = sin(2.0)
    def loud(a_1: 'f32[3]') -> 'f32[3]':
        e = sin(a_1)
        return a_1
    def quiet(a_2: 'f32[3]') -> 'f32[3]':
        f = cos(a_2)
        return a_2
    r, = cond(p, x, branches=(loud, quiet))
    r2, = cond(p, x, branches=(loud, quiet))
    r3, = cond(p, x, branches=(quiet, quiet))
    return x
"""


def test_effects_are_never_folded_merged_or_dropped(effectful_sin):
    fn = from_source(EFFECTS)
    for p in PASSES.values():
        _apply(p, fn)
    out = simplify(fn)
    assert [e.outvars[0].name for e in out.eqns] == ["a", "b", "d", "r", "r2"]
    loud, quiet = out.eqns[3].params["branches"]
    assert [e.prim.name for e in loud.eqns] == ["sin"]
    assert quiet.eqns == []


def test_host_print_survives_simplification():
    fn = from_source(r"""
def printing(x: 'f32[3]') -> 'f32[3]':
    a = exp(x)
    () = debug_print(a, 2.0, fmt=None, template=(('s', 'a is'), ('v', 0), ('v', 1)), sep=' ', end='\n')
    () = debug_print(a, 2.0, fmt=None, template=(('s', 'a is'), ('v', 0), ('v', 1)), sep=' ', end='\n')
    return x
""")
    out = _apply(simplify, fn)
    assert [e.prim.name for e in out.eqns] == ["exp", "debug_print", "debug_print"]


def test_without_the_effect_everything_is_dead():
    out = simplify(from_source(EFFECTS))
    assert out.eqns == []


# ------------------------------------------------------------------------------ simplify

def test_simplify_reaches_the_fixed_point_of_chained_rewrites():
    fn = from_source(CHAIN)
    out = _apply(simplify, fn)
    assert _ops(out) == Counter(exp=1, sub=1, mul=1, tanh=1)
    j = next(e for e in out.eqns if e.prim.name == "mul")
    assert j.invars[0] is fn.invars[1] and j.invars[1].value == 5
    assert out.outvars[2].name == "u"  # the copy went once its other use died


def _stupid_fn_text(n=1000):
    lines = ["def stupid_fn(x: 'f32[4]') -> 'f32[4]':", "    y = copy(x)"]
    prev = "x"
    for i in range(n):
        lines.append(f"    m{i} = mul({prev}, {prev})")
        prev = f"m{i}"
    lines.append("    return y")
    return "\n".join(lines) + "\n"


def test_stupid_fn_simplifies_to_a_single_copy():
    fn = from_source(_stupid_fn_text())
    assert len(fn.eqns) == 1001
    out = _apply(simplify, fn)
    assert str(out) == ("def stupid_fn(x: 'f32[4]') -> 'f32[4]':\n"
                        "    y = copy(x)  # f32[4]\n"
                        "    return y\n")


def _big_function_text(n_blocks=500):
    """6 equations per block: live arithmetic, an identity, a duplicate and dead code."""
    lines = ["def big(x: 'f32[8]', y: 'f32[8]') -> 'f32[8]':"]
    prev = "x"
    for i in range(n_blocks):
        lines += [f"    a{i} = add({prev}, y)",
                  f"    b{i} = mul(a{i}, 1.0)",
                  f"    c{i} = tanh(b{i})",
                  f"    d{i} = tanh(a{i})",
                  f"    e{i} = exp(c{i})",
                  f"    f{i} = sub(d{i}, c{i})"]
        prev = f"f{i}"
    lines.append(f"    return {prev}")
    return "\n".join(lines) + "\n"


def test_simplifying_3000_equations():
    # (Its speed is measured by `make bench`, not asserted here.)
    fn = from_source(_big_function_text())
    assert len(fn.eqns) == 3000
    out = simplify(fn)
    assert len(out.eqns) == 1500  # add, tanh, sub per block


# ------------------------------------------------------------------------------ pipeline

def test_pipeline_is_named_and_runs_simplify():
    names = [p.name for p in passes.PIPELINE]
    assert names[0] == "simplify" and len(set(names)) == len(names)
    out = passes.run_pipeline(from_source(_stupid_fn_text(10)), verify_each=True)
    assert len(out.eqns) == 1


def test_pipeline_dumps_every_stage(tmp_path):
    fn = from_source(CHAIN)
    passes.run_pipeline(fn, dump_dir=str(tmp_path / "dumps"), dump_name="chain_v1")
    files = sorted(os.listdir(tmp_path / "dumps"))
    assert files == ["chain_v1.00-input.ssa.py", "chain_v1.01-simplify.ssa.py"]
    first = (tmp_path / "dumps" / files[0]).read_text()
    assert first == str(fn)
    last = (tmp_path / "dumps" / files[1]).read_text()
    assert str(from_source(last)) == last


def test_pipeline_dump_dir_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_DUMP_DIR", str(tmp_path))
    passes.run_pipeline(from_source(CHAIN))
    assert sorted(os.listdir(tmp_path)) == ["chain.00-input.ssa.py", "chain.01-simplify.ssa.py"]


def _broken_pass(fn):
    """Drops the first equation but keeps its uses: malformed SSA."""
    return Function(fn.name, fn.invars, fn.eqns[1:], fn.outvars)


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_pipeline_verifies_after_each_pass(how, monkeypatch):
    fn = from_source(DCE)
    pipeline = [("simplify", simplify), ("broken", _broken_pass)]
    passes.run_pipeline(fn, verify_each=False, pipeline=pipeline)  # not checked: no error
    if how == "environment":
        monkeypatch.setenv("KILN_VERIFY", "1")
        kwargs = {}
    else:
        kwargs = {"verify_each": True}
    with pytest.raises(SSAVerificationError, match="after stage 'broken': in function dead"):
        passes.run_pipeline(fn, pipeline=pipeline, **kwargs)


def test_eqn_info_survives_rewrites():
    fn = from_source(CSE)
    tagged = Function(fn.name, fn.invars,
                      [Eqn(e.outvars, e.prim, e.invars, e.params, info=f"line {i}")
                       for i, e in enumerate(fn.eqns)], fn.outvars)
    out = simplify(tagged)
    assert [e.info for e in out.eqns if e.prim.name == "exp"] == ["line 0"]
