"""kiln.new_ref / Ref / empty_ref / freeze / free_ref and kiln.ds (runtime/refs.py), eagerly
and inside kiln.jit (closed over, passed in, made inside; in loops and branches; local Refs
under grad and vmap) against JAX; what kiln refuses is a located error."""
import jax
import jax.numpy as J
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.errors import CompileError


def test_ref_reads_and_writes_as_jax():
    refs = [kiln.new_ref(jnp.arange(4.0)), jax.new_ref(J.arange(4.0))]
    for r, ds in zip(refs, (kiln.ds, jax.ds)):
        r[...] = r[...] + 1
        r[1] = 10.0
        r[ds(2, 2)] = np.zeros(2, np.float32)
        with pytest.raises(ValueError, match="Invalid dtype"):
            r[0] = np.int32(7)
    k, j = refs
    np.testing.assert_array_equal(k[...], j[...])
    np.testing.assert_array_equal(k[1:3], j[1:3])
    assert (k.shape, k.dtype, k.ndim, k.size) == (j.shape, j.dtype, j.ndim, j.size)
    assert isinstance(k, kiln.Ref) and repr(k) == repr(j)
    k[...] = 3.0   # broadcast
    np.testing.assert_array_equal(k[...], [3, 3, 3, 3])
    k.addupdate(1.0)
    k.addupdate(2.0, 0)
    np.testing.assert_array_equal(k[...], [6, 4, 4, 4])


def test_new_ref_copies_and_freeze_invalidates():
    x = jnp.ones(3)
    r = kiln.new_ref(x)
    r[0] = 5.0
    np.testing.assert_array_equal(x, [1, 1, 1])
    np.testing.assert_array_equal(kiln.freeze(r), [5, 1, 1])
    with pytest.raises(ValueError, match="invalidated by kiln.freeze"):
        r[...]
    e = kiln.empty_ref(kiln.ShapeDtypeStruct((2,), jnp.int32))
    assert e.dtype == np.int32 and e.shape == (2,)
    kiln.free_ref(e)
    with pytest.raises(ValueError, match="invalidated"):
        e[0] = 1
    assert kiln.new_ref(1.0, memory_space=kiln.memory.Space.Device).memory_space is \
        kiln.memory.Space.Device


def _run_both(program):
    """`program(module, numpy)` under kiln and under JAX: their results, which must agree."""
    k, j = program(kiln, jnp), program(jax, J)
    for a, b in zip(jax.tree_util.tree_leaves(k), jax.tree_util.tree_leaves(j)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return k


def _reads_writes_in_order(m, np_):
    r = m.new_ref(np_.arange(3.0))

    @m.jit
    def f(x):
        a = r[...]
        r[...] = a + x
        r[1] += 10.0
        r.addupdate(np_.float32(1.0), 2)
        return a, r[...]

    @m.jit
    def g(ref, x):   # a Ref argument
        ref[m.ds(0, 2)] = np_.stack([x, x])
        return ref[...] * 2

    @m.jit
    def local(x):
        q = m.new_ref(x)
        q[...] += 1
        return m.freeze(q)
    return f(1.0), f(2.0), r[...], g(r, 5.0), r[...], local(np_.ones(2))


def _in_control_flow(m, np_):
    r = m.new_ref(np_.arange(3.0))
    lax = m.lax

    @m.jit
    def loops(x, n):
        def body(i, c):
            r[...] += x
            return c + 1

        def w_body(s):
            r[0] = r[0] * x
            return s + 1
        lax.while_loop(lambda s: s < 2, w_body, 0)
        return lax.fori_loop(0, 3, body, 0) + lax.fori_loop(0, n, body, 0)

    @m.jit
    def branches(p):
        def t():
            r[0] = 100.0

        def e():
            r[1] = -1.0
        lax.cond(p, t, e)
        return r[...]

    @m.jit
    def nested(x, n):
        q = m.new_ref(x)

        def body(i, c):
            q[...] += 1.0

            def inner(j, d):
                q[0] = q[0] * 2
                return d
            lax.fori_loop(0, 2, inner, 0)
            return c
        lax.fori_loop(0, n, body, 0)
        return m.freeze(q)
    return loops(2.0, 2), r[...], branches(True), branches(False), nested(np_.zeros(2), 3)


def _under_transforms(m, np_):
    def local(x):
        q = m.new_ref(x)
        q[...] = q[...] * 3
        return q[...].sum()
    return m.grad(local)(1.0), m.vmap(local)(np_.arange(3.0)), m.jit(m.grad(local))(2.0)


def _vmap_over_ref_arguments(m, np_):
    def scale_into(x, out_ref):   # each batch member writes its own entry
        out_ref[...] = 2.0 * x

    out = m.new_ref(np_.zeros(3))
    m.vmap(scale_into)(np_.arange(3.0), out)

    def accumulate(x, acc, c):   # reads and writes a mapped Ref, and returns
        acc[...] += x * c
        return acc[...] * 2

    acc = m.new_ref(np_.ones((2, 3)))
    got = m.vmap(accumulate, in_axes=(1, 1, None))(np_.arange(6.0).reshape(2, 3), acc, 3.0)
    shared = m.new_ref(5.0)   # unmapped: read by every member
    read = m.vmap(lambda x, r: x + r[...], in_axes=(0, None))(np_.arange(3.0), shared)
    return out[...], got, acc[...], read, shared[...]


@pytest.mark.parametrize("program", [_reads_writes_in_order, _in_control_flow,
                                     _under_transforms, _vmap_over_ref_arguments])
def test_refs_in_compiled_functions_as_jax(program):
    _run_both(program)


def test_refs_in_python_control_flow():
    r = kiln.new_ref(jnp.zeros(3))

    @kiln.jit
    def f(x):
        if x > 0:
            r[0] = x
        else:
            r[1] = x
        i = 0
        while i < x:
            r[2] += 1.0
            i += 1
        return r[...]
    np.testing.assert_array_equal(f(2.0), [2, 0, 2])
    np.testing.assert_array_equal(f(-1.0), [2, -1, 2])
    np.testing.assert_array_equal(r[...], [2, -1, 2])


def test_refs_where_kiln_refuses_them():
    r = kiln.new_ref(jnp.zeros(()))

    def closes_over(x):
        return r[...] + x
    with pytest.raises(TypeError, match="outside kiln.jit.*ref\\[...\\] = new") as e:
        kiln.grad(closes_over)(1.0)
    assert "r[...] + x" in str(e.value)
    with pytest.raises(ValueError, match="Ref passed unmapped .in_axes None. is written"):
        kiln.vmap(lambda x, ref: ref.__setitem__(..., x), in_axes=(0, None))(jnp.ones(3), r)
    np.testing.assert_array_equal(kiln.jit(kiln.grad(closes_over))(1.0), 1.0)  # reads

    def writes(x):
        r[...] = x
        return x
    with pytest.raises(CompileError, match="writing a Ref here") as e:
        kiln.jit(kiln.grad(writes))(1.0)
    assert "r[...] = x" in str(e.value)
    with pytest.raises(ValueError, match="Refs cannot be returned"):
        kiln.jit(lambda x: kiln.new_ref(x))(1.0)
    with pytest.raises(ValueError, match="only one reference"):
        kiln.jit(lambda a, b: a[...] + b[...])(r, r)
    with pytest.raises(TypeError, match="freeze of a Ref made outside"):
        kiln.jit(lambda: kiln.freeze(r))()
    kiln.free_ref(r)
    with pytest.raises(ValueError, match="invalidated"):
        kiln.jit(closes_over)(1.0)


@pytest.mark.parametrize("start,size,stride", [(1, 3, 1), (8, 4, 1), (1, 3, 2), (6, 3, 2),
                                               (0, 0, 1), (3, None, None)])
def test_ds_indexes_as_jax(start, size, stride):
    x = np.arange(10, dtype=np.int32)
    want = J.asarray(x)[jax.ds(start, size, stride)]
    np.testing.assert_array_equal(jnp.asarray(x)[kiln.ds(start, size, stride)], want)
    if size:   # a traced start (JAX's dynamic_slice / gather clamping)
        f = kiln.jit(lambda x, i: x[kiln.ds(i, size, stride)])
        g = jax.jit(lambda x, i: x[jax.ds(i, size, stride)])
        np.testing.assert_array_equal(f(x, start), g(x, start))
    assert kiln.ds(None) == slice(None)
    y = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(jnp.asarray(y)[kiln.ds(1, 2), 1:3],
                                  J.asarray(y)[jax.ds(1, 2), 1:3])
