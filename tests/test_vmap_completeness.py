"""Every primitive has a batching rule, and every rule agrees with a loop over examples.

The generic check reuses `tests/test_primitives.py`'s `CASES` (a hypothesis strategy of valid
operands and params per primitive): it stacks a few variants of each operand (the values
rolled, so every example stays valid for the primitive) along a drawn axis, or leaves the
operand unbatched, batches the primitive with `kiln.vmap` under drawn `in_axes`/`out_axes`,
and compares with the primitive applied to each example eagerly and stacked. Regions
(cond/while/scan), tapes and collectives have their own tests against loops
(`test_vmap_control.py`, `test_vmap_autodiff.py`, `test_vmap_collectives.py`); the generic
check runs them too where `CASES` has them.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
from kiln.array import Array
from kiln.dispatch import apply_eager, bind
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.core import BATCH, BATCH_COLLECTIVE

from test_primitives import CASES, TAPE_PRIMITIVES

NO_OPERANDS = {"iota", "tape_new", "axis_index"}   # nothing to batch: never reach a rule


def test_every_primitive_has_a_batching_rule():
    missing = [name for name, prim in PRIMITIVES.items()
               if name not in NO_OPERANDS and prim not in BATCH]
    assert not missing, "primitives without a batching rule: " + ", ".join(missing)
    collectives = [prim for prim in PRIMITIVES.values() if prim.collective]
    assert collectives and all(p in BATCH_COLLECTIVE for p in collectives)
    assert all(p.collective for p in BATCH_COLLECTIVE)


def _variant(x, j):
    """Example j of a batch built from operand `x`: its values rolled by j (same type)."""
    x = np.asarray(x)
    if x.size == 0 or j == 0:
        return x
    return np.roll(x.reshape(-1), j).reshape(x.shape)


def _batched(x, size, axis):
    if axis is None:
        return x
    return np.stack([_variant(x, j) for j in range(size)], axis=axis)


def _example(x, j, axis):
    return x if axis is None else np.take(x, j, axis=axis)


GENERIC = sorted(set(CASES) - set(TAPE_PRIMITIVES))


@pytest.mark.parametrize("name", GENERIC)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_rule_agrees_with_a_loop(name, data):
    prim = PRIMITIVES[name]
    case = data.draw(CASES[name], label=name)
    args = [np.asarray(a) for a in case.args]
    if not args:
        return
    size = data.draw(st.integers(1, 3), label="batch size")
    axes = [data.draw(st.sampled_from([None] + list(range(a.ndim + 1))), label=f"axis {i}")
            for i, a in enumerate(args)]
    if all(a is None for a in axes):
        axes[0] = 0
    out_axis = data.draw(st.sampled_from([0, -1]), label="out_axes")
    batched = [_batched(a, size, d) for a, d in zip(args, axes)]

    def f(*xs):
        return bind(prim, *xs, **case.params)

    with np.errstate(all="ignore"):
        got = kiln.vmap(f, in_axes=tuple(axes), out_axes=out_axis)(*batched)
        examples = [apply_eager(prim, [Array(_example(x, j, d)) for x, d in zip(batched, axes)],
                                case.params) for j in range(size)]
    got = list(got) if prim.multiple_results else [got]
    examples = [list(e) if prim.multiple_results else [e] for e in examples]
    for k, out in enumerate(got):
        want = np.stack([np.asarray(e[k]) for e in examples], axis=out_axis)
        out = np.asarray(out)
        assert out.dtype == want.dtype and out.shape == want.shape, (name, k)
        np.testing.assert_allclose(out.astype(np.complex128) if out.dtype.kind == "c" else
                                   out.astype(np.float64) if out.dtype.kind in "biuf" else out,
                                   want.astype(out.dtype).astype(np.complex128)
                                   if out.dtype.kind == "c" else want.astype(np.float64),
                                   rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)
