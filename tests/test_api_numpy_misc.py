"""kiln.numpy's index tricks (r_, c_, mgrid, ogrid, s_), functional helpers (vectorize,
apply_along_axis, apply_over_axes, piecewise), windows and i0, polynomials, bit packing and
predicates, and host I/O names, against NumPy and JAX (eager, jit, grad)."""
import os
import tempfile

import jax
import jax.numpy as J
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def test_index_tricks_and_functional():
    def eq(x, y, msg=""):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, err_msg=str(msg))
    for k in [np.s_[1:5, np.array([9, 9]), 0], np.s_[0:1:5j], np.s_["0,2", np.array([1, 2]), np.array([3, 4])], np.s_["1,2,0", np.array([1, 2]), np.array([3, 4])]]:
        eq(jnp.r_[k], np.r_[k], k)
    eq(jnp.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], np.c_[np.array([1, 2, 3]), np.array([4, 5, 6])])
    eq(jnp.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])], np.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])])
    eq(jnp.mgrid[0:3, 0:4:2], np.mgrid[0:3, 0:4:2]); eq(jnp.mgrid[-1:1:5j], np.mgrid[-1:1:5j])
    for g, w in zip(jnp.ogrid[0:3, 0:2], np.ogrid[0:3, 0:2]): eq(g, w)
    assert jnp.s_ is np.s_
    x = np.arange(12.).reshape(3, 4)
    eq(jnp.apply_along_axis(lambda v: v.sum() * v[0], 1, x), np.apply_along_axis(lambda v: v.sum() * v[0], 1, x))
    eq(jnp.apply_along_axis(lambda v: v[::-1], 0, x), np.apply_along_axis(lambda v: v[::-1], 0, x))
    eq(jnp.apply_over_axes(jnp.sum, x, [0, 1]), np.apply_over_axes(np.sum, x, [0, 1]))
    vf = jnp.vectorize(lambda a, b: a * 2 + b); eq(vf(x, np.arange(4.)), x * 2 + np.arange(4.))
    vd = jnp.vectorize(lambda a, b: jnp.dot(a, b), signature="(n),(n)->()"); eq(vd(x, np.ones(4)), x.sum(1))
    ve = jnp.vectorize(lambda a, p: a ** p, excluded={1}); eq(ve(x, 2), x ** 2)
    pw = lambda x: jnp.piecewise(x, [x < 2, x > 8], [lambda v: -v, lambda v: v * 10, 7.])
    eq(pw(x), np.piecewise(x, [x < 2, x > 8], [lambda v: -v, lambda v: v * 10, 7.]))
    eq(kiln.jit(pw)(x), np.piecewise(x, [x < 2, x > 8], [lambda v: -v, lambda v: v * 10, 7.]))
    eq(kiln.jit(vd)(x, np.ones(4)), x.sum(1)); eq(kiln.grad(lambda x: jnp.apply_along_axis(lambda v: (v**2).sum(), 1, x).sum())(x), 2*x)


def test_windows_polynomials_bits():
    def close(x, y, msg="", **kw):
        kw.setdefault("rtol", 1e-5)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), err_msg=str(msg), **kw)
    x = np.array([0., 0.5, 1., 3., 8., 14.9, 15.1, 30., 80., -2.], np.float32)
    close(jnp.i0(x), np.i0(x.astype(np.float64)), rtol=2e-6)
    close(kiln.grad(lambda x: jnp.i0(x).sum())(x[:8]), jax.grad(lambda x: J.i0(x).sum())(x[:8]), rtol=1e-5)
    for M in (0, 1, 2, 5, 12):
        for f in ("bartlett", "blackman", "hamming", "hanning"):
            close(getattr(jnp, f)(M), getattr(np, f)(M), (f, M), atol=1e-6)
        close(jnp.kaiser(M, 3.0), np.kaiser(M, 3.0), ("kaiser", M), atol=1e-6)
    r = np.array([1., -2., 0.5]); close(jnp.poly(r), np.poly(r))
    A = np.array([[1., 2.], [3., 4.]]); close(jnp.poly(A), np.poly(A))
    assert jnp.poly(A).dtype == np.complex64   # JAX's, from eigenvalues
    close(jnp.poly(2.5), [1., -2.5])           # a scalar is one root, as JAX reads it
    close(jnp.trapezoid(np.array([True, False, True])), 1.0)   # booleans add as numbers
    # y and x promoted together, then made inexact, as JAX's promote_dtypes_inexact
    assert jnp.trapezoid(np.arange(4, dtype=np.int32), np.arange(4, dtype=np.float16)).dtype == \
        np.float16
    assert jnp.bitwise_count(np.array([True, False])).dtype == np.uint8
    assert jnp.histogram(np.arange(4, dtype=np.float16))[0].dtype == np.float16
    a, b = np.array([1., 2., 3.]), np.array([4., 5.])
    close(jnp.polyadd(a, b), np.polyadd(a, b)); close(jnp.polysub(a, b), np.polysub(a, b)); close(jnp.polymul(a, b), np.polymul(a, b))
    for g, w in zip(jnp.polydiv(np.array([1., 3., 5., 2.]), np.array([2., 1.])), np.polydiv([1., 3., 5., 2.], [2., 1.])): close(g[-len(w):], w)
    close(jnp.polyder(a, 2), np.polyder(a, 2)); close(jnp.polyint(a, 2, k=np.array([1., 2.])), np.polyint(a, 2, k=[1., 2.])); close(jnp.polyint(a), np.polyint(a))
    close(jnp.polyval(a, x[:4]), np.polyval(a, x[:4])); close(kiln.jit(jnp.polyval)(a, x[:4]), np.polyval(a, x[:4]))
    bits = np.array([[1, 0, 1], [0, 1, 1]], np.uint8)
    for ax in (None, 0, 1):
        for bo in ("big", "little"):
            p = jnp.packbits(bits, ax, bo); np.testing.assert_array_equal(p, np.packbits(bits, ax, bitorder=bo))
            np.testing.assert_array_equal(jnp.unpackbits(np.asarray(p), ax, bitorder=bo), np.unpackbits(np.asarray(p), ax, bitorder=bo))
    np.testing.assert_array_equal(jnp.unpackbits(np.array([7, 200], np.uint8), count=11), np.unpackbits(np.array([7, 200], np.uint8), count=11))
    np.testing.assert_array_equal(jnp.bitwise_count(np.array([7, -3, 0], np.int32)), np.bitwise_count(np.array([7, -3, 0], np.int32)))
    close(jnp.spacing(np.array([1., -1., 1000.], np.float32)), np.spacing(np.array([1., -1., 1000.], np.float32)))
    c = np.array([1, 2j, 3 + 0j]); np.testing.assert_array_equal(jnp.iscomplex(c), np.iscomplex(c)); np.testing.assert_array_equal(jnp.isreal(c), np.isreal(c))
    assert jnp.iscomplexobj(c) and jnp.isrealobj(a) and jnp.isscalar(jnp.ones(())) and jnp.isscalar(1) and not jnp.isscalar([1]) and jnp.iterable([1])


def test_host_io_names():
    a = jnp.arange(4.0)
    assert jnp.array_repr(a) == np.array_repr(np.arange(4.0, dtype=np.float32)), jnp.array_repr(a)
    assert jnp.array_str(a) == np.array_str(np.arange(4.0, dtype=np.float32))
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
    np.testing.assert_array_equal(jnp.frombuffer(b"\x01\x02", dtype=np.uint8), [1, 2])
    np.testing.assert_array_equal(jnp.fromstring("1 2 3", dtype=np.int32, sep=" "), [1, 2, 3])
    np.testing.assert_array_equal(jnp.fromiter(iter(range(3)), np.int32), [0, 1, 2])
    d = tempfile.mkdtemp(); p = os.path.join(d, "a.npy"); jnp.save(p, a); b = jnp.load(p); assert type(b) is type(a); np.testing.assert_array_equal(b, a)
    jnp.savez(os.path.join(d, "b.npz"), x=a); assert "x" in jnp.load(os.path.join(d, "b.npz"))
    assert jnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))[0][0] == "einsum_path"
    assert jnp.bool(1) == True and jnp.object_ is np.object_ and issubclass(jnp.ComplexWarning, Warning)


@pytest.mark.parametrize("coeffs", [[1, -3, 2], [0, 1, 2], [0, 0, 1, 0, -1], [2.0], [], [0, 0],
                                    [1, 0, 0], [1, 2, 3, 4, 5], [3 + 1j, 2, 1]])
@pytest.mark.parametrize("strip_zeros", [True, False])
def test_roots_as_jax(coeffs, strip_zeros):
    p = np.asarray(coeffs, np.complex64 if any(isinstance(c, complex) for c in coeffs)
                   else np.float32)
    got = jnp.roots(p, strip_zeros=strip_zeros)
    want = J.roots(p, strip_zeros=strip_zeros)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.sort_complex(np.asarray(got)), np.sort_complex(np.asarray(want)),
                               rtol=1e-4, atol=1e-5)


def test_roots_under_jit_needs_strip_zeros_false():
    f = kiln.jit(lambda p: jnp.roots(p, strip_zeros=False))
    got = np.asarray(f(jnp.asarray([0.0, 1, -3, 2])))
    np.testing.assert_allclose(np.sort_complex(got[:2]), [1, 2], atol=1e-5)
    assert np.isnan(got[2])
    with pytest.raises(TypeError, match="concrete value") as e:
        kiln.jit(jnp.roots)(jnp.asarray([0.0, 1, -3, 2]))
    assert "strip_zeros=False" in "".join(e.value.__notes__)
