"""`partial_eval.split`: the known part then the unknown part compute what the whole does."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.ir.parser import from_source
from kiln.compiler.ir.verify import verify
from kiln.compiler.backends.reference import compile_function
from kiln.compiler.transforms.partial_eval import split

FN = """def f(x: 'f32[3]', ct: 'f32[3]') -> '(f32[3], f32[3], f32[3])':
    s = sin(x)
    y = mul(s, x)
    c = cos(x)
    g = mul(ct, c)
    z = add(g, s)
    return y, z, c
"""


def test_split_runs_like_the_whole():
    fn = from_source(FN)
    known, later, n_res = split(fn, [False, True], 1)
    verify(known)
    verify(later)
    assert [v.name for v in known.invars] == ["x"]
    assert [v.name for v in later.invars][-1] == "ct"
    assert {e.prim.name for e in later.eqns} == {"mul", "add"}
    x, ct = np.linspace(0, 1, 3, dtype=np.float32), np.ones(3, np.float32)
    whole = compile_function(fn)(x, ct)
    first = compile_function(known)(x)
    second = compile_function(later)(*first[1:], ct)
    assert n_res == len(first) - 1
    np.testing.assert_allclose(first[0], whole[0])
    for got, want in zip(second, whole[1:]):
        np.testing.assert_allclose(got, want)


def test_a_known_output_may_not_depend_on_unknown_inputs():
    with pytest.raises(ValueError, match="depends on unknown inputs"):
        split(from_source(FN), [False, True], 2)


def test_vjp_and_linearize_run_the_forward_section_once(capsys):
    def f(x):
        kiln.debug.print("x={}", x)
        return jnp.sin(x) * x
    y, f_vjp = kiln.vjp(f, 0.5)
    assert f_vjp(1.0)[0] == pytest.approx(np.sin(0.5) + 0.5 * np.cos(0.5), rel=1e-6)
    f_vjp(2.0)
    y2, f_jvp = kiln.linearize(f, 0.5)
    assert float(f_jvp(2.0)) == pytest.approx(2 * (np.sin(0.5) + 0.5 * np.cos(0.5)), rel=1e-6)
    f_jvp(1.0)
    assert capsys.readouterr().out == "x=0.5\nx=0.5\n"
    assert float(y) == float(y2)
