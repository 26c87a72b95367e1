"""Tests for `kiln.image` against `jax.image` (JAX 0.10.2): every method, up- and downsampling,
sizes 0 and 1, integer and half-precision images, `scale_and_translate` with traced scales,
and the function under `jit`, `grad` and `vmap`; JAX's error messages."""
import numpy as np
import pytest

import kiln
import kiln.image as kimage

jax = pytest.importorskip("jax")
import jax.image as jimage  # noqa: E402

RNG = np.random.default_rng(0)
X3 = RNG.normal(size=(5, 7, 3)).astype(np.float32)
METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]
# up in one dimension and down in the other; sizes 1 and 0
SHAPES = [(9, 4, 3), (1, 0, 3)]


def _close(got, want, tol=1e-5):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("method", METHODS)
def test_resize_against_jax(method):
    for shape in SHAPES:
        _close(kimage.resize(X3, shape, method), jimage.resize(X3, shape, method))
    _close(kimage.resize(X3, (2, 11, 3), method, antialias=False),
           jimage.resize(X3, (2, 11, 3), method, antialias=False))
    np.testing.assert_array_equal(kimage.resize(X3, X3.shape, method), X3)


def test_resize_edge_cases_and_dtypes():
    row = RNG.normal(size=(1, 6)).astype(np.float32)
    for antialias in (True, False):      # one input row: edges fold onto the same sample
        _close(kimage.resize(row, (4, 3), "cubic-pytorch", antialias),
               jimage.resize(row, (4, 3), "cubic-pytorch", antialias))
    pixels = RNG.integers(0, 255, (4, 4)).astype(np.uint8)
    for method in ("nearest", "linear"):  # nearest keeps uint8, the others compute in float32
        _close(kimage.resize(pixels, (7, 3), method), jimage.resize(pixels, (7, 3), method))
    half = row.astype(np.float16)
    _close(kimage.resize(half, (3, 9), "lanczos3"), jimage.resize(half, (3, 9), "lanczos3"),
           tol=1e-2)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area", "cubic-pytorch"])
def test_scale_and_translate_against_jax(method):
    x = RNG.normal(size=(2, 5, 6)).astype(np.float32)
    scale, shift = np.array([1.7, 0.6], np.float32), np.array([0.3, -1.2], np.float32)
    for dims, antialias in (((1, 2), True), ((-2, -1), False)):
        # JAX runs scale_and_translate op by op; one jit compiles it once.
        want = jax.jit(jimage.scale_and_translate, static_argnums=(1, 2, 5, 6))(
            x, (2, 8, 4), dims, scale, shift, method, antialias)
        _close(kimage.scale_and_translate(x, (2, 8, 4), dims, scale, shift, method, antialias),
               want)
    np.testing.assert_array_equal(kimage.scale_and_translate(x, x.shape, (), [], [], method), x)


def test_transforms_against_jax():
    x = RNG.normal(size=(2, 5, 6)).astype(np.float32)
    scale, shift = np.array([1.7, 0.6], np.float32), np.array([0.3, -1.2], np.float32)

    def pair(fn):   # kiln's function and JAX's, compiled whole (JAX's op-by-op is slow)
        return (lambda *a: fn(kimage, *a)), jax.jit(lambda *a: fn(jimage, *a))

    resize, jresize = pair(lambda m, im: m.resize(im, (2, 3, 9), "cubic"))
    _close(kiln.jit(resize)(x), jresize(x))
    shifted, jshifted = pair(
        lambda m, s: m.scale_and_translate(x, (2, 8, 4), (1, 2), s, shift, "linear"))
    _close(kiln.jit(shifted)(scale), jshifted(scale))
    loss, jloss = pair(lambda m, im: (m.resize(im, (2, 3, 9), "lanczos3") ** 2).sum())
    want = jax.jit(jax.grad(jloss))(x)
    _close(kiln.grad(loss)(x), want, tol=1e-4)
    _close(kiln.jit(kiln.grad(loss))(x), want, tol=1e-4)
    scale_loss, jscale_loss = pair(lambda m, s: (m.scale_and_translate(
        x, (2, 8, 4), (1, 2), s, shift, "linear") ** 2).sum())
    _close(kiln.grad(scale_loss)(scale), jax.jit(jax.grad(jscale_loss))(scale), tol=1e-4)
    each, jeach = pair(lambda m, im: m.resize(im, (7, 2), "linear"))
    want = jax.vmap(jeach)(x)
    _close(kiln.vmap(each)(x), want)
    _close(kiln.jit(kiln.vmap(each))(x), want)
    scales = np.stack([scale, scale * 1.3])
    cubic, jcubic = pair(
        lambda m, s: m.scale_and_translate(x, (2, 8, 4), (1, 2), s, shift, "cubic"))
    _close(kiln.vmap(cubic)(scales), jax.vmap(jcubic)(scales))


@pytest.mark.parametrize("call", [
    lambda m: m.resize(X3, (2, 3), "linear"),
    lambda m: m.resize(X3, (2, 3, 4), "foo"),
    lambda m: m.scale_and_translate(X3, (2, 8, 3), (0, 1), [1.0, 1.0], [0.0, 0.0], "nearest"),
])
def test_errors_as_jax(call):
    with pytest.raises(ValueError) as want:
        call(jimage)
    with pytest.raises(ValueError) as got:
        call(kimage)
    assert str(got.value) == str(want.value)


def test_resize_method_from_string():
    assert kimage.ResizeMethod.from_string("tricubic") is kimage.ResizeMethod.CUBIC
    np.testing.assert_array_equal(kimage.resize(X3, (9, 4, 3), kimage.ResizeMethod.LINEAR),
                                  kimage.resize(X3, (9, 4, 3), "bilinear"))
    assert [m.name for m in kimage.ResizeMethod] == [m.name for m in jimage.ResizeMethod]
