"""The fft primitive and kiln.numpy.fft: against numpy.fft (the reference backend's definition),
the LLVM lowering (the runtime library's kernel) against it over shapes and dtypes, derivatives
against finite differences and JAX's transposes, vmap, the emulated CUDA device and a
`kiln compile` library."""
import numpy as np
import pytest
import hypothesis
from hypothesis import given, settings, strategies as st

import jax
import kiln
import kiln.lax as lax
import kiln.numpy as jnp
from kiln.compiler.backends.cuda import device as D
from kiln.test_util import check_grads

pytestmark = pytest.mark.usefixtures("x64_module")

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 32, 64, 97, 128]
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.complex64): 2e-5,
       np.dtype(np.float64): 1e-12, np.dtype(np.complex128): 1e-12}


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[np.dtype(dtype)] * scale)


def lax_fft(x, fft_type, fft_lengths):
    return lax.fft(x, fft_type, fft_lengths)


_llvm = kiln.jit(lax_fft, static_argnums=(1, 2))
_reference = kiln.jit(lax_fft, static_argnums=(1, 2), backend="reference")


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]), st.sampled_from(DTYPES),
       st.lists(st.integers(0, 3), max_size=2), st.lists(st.sampled_from(LENGTHS), min_size=1,
                                                         max_size=3))
def test_llvm_kernel_matches_the_reference(fft_type, dtype, batch, lengths):
    real = fft_type == "RFFT"
    dtype = np.dtype(dtype)
    dtype = (np.dtype(dtype.char.lower()) if real else
             np.result_type(dtype, np.complex64))
    shape = list(batch) + list(lengths)
    if fft_type == "IRFFT":
        shape[-1] = lengths[-1] // 2 + 1
    x = sample(tuple(shape), dtype)
    want = _reference(x, fft_type, tuple(lengths))
    close(_llvm(x, fft_type, tuple(lengths)), want, dtype)
    numpy_fn = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn}
    axes = tuple(range(len(batch), len(shape)))
    if 0 not in batch:
        expected = (np.fft.irfftn(x, s=lengths, axes=axes) if fft_type == "IRFFT"
                    else numpy_fn[fft_type](x, axes=axes))
        close(want, expected.astype(np.asarray(want).dtype), dtype)


def test_large_powers_of_two_and_primes():
    text = _llvm.lower(sample((8,), np.complex128), "FFT", (8,)).compile().as_text()
    assert "load ptr, ptr @kiln.lax_fft" in text and ".kiln_fft_complex128" in text  # native
    # 2^16 and longer single lines: the four-step path (lower_fft.py), n1 = n2 and n1 = 2 n2
    for shape, dtype in [((1 << 14,), np.complex64), ((1 << 13,), np.complex128),
                         ((1009,), np.complex128), ((1 << 16,), np.complex64),
                         ((1, 1 << 17), np.complex128)]:
        x = sample(shape, dtype)
        n = shape[-1]
        close(_llvm(x, "FFT", (n,)), np.fft.fft(x).astype(dtype), dtype)
        close(_llvm(x, "IFFT", (n,)), np.fft.ifft(x).astype(dtype), dtype)
    # a long real line: its half-length complex transform in four steps, then real_split
    x = sample((1 << 17,), np.float32)
    close(_llvm(x, "RFFT", x.shape), np.fft.rfft(x).astype(np.complex64), np.float32)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["fft", "ifft", "rfft", "irfft", "fft2"]),
       st.sampled_from([np.float32, np.float64]),
       st.sampled_from([0, 1, 2, 15, 17, 40, 300]), st.sampled_from([1, 3, 5, 16, 97, 256, 1000]),
       st.sampled_from([1, 2, 17]), st.integers(0, 2), st.sampled_from([None, "ortho", "forward"]))
@hypothesis.example("fft", np.float32, 300, 256, 2, 2, None)       # rows, 2 tasks
@hypothesis.example("irfft", np.float64, 40, 97, 17, 1, "ortho")
@hypothesis.example("fft2", np.float32, 40, 97, 17, 1, None)       # columns, Bluestein, tasks
def test_grouped_and_threaded_lines_match_numpy(name, dtype, batch, n, other, axis, norm):
    """The kernel's groups of lines (adjacent rows along the last axis, adjacent columns along
    the others: fft2; fft_kernel.plan) and its tasks: batches around the group width of 16
    and large enough to be split into tasks."""
    shape = [batch, n, other]
    shape[axis], shape[1] = shape[1], shape[axis]
    hypothesis.assume(np.prod(shape) <= 200_000)
    x = sample(tuple(shape), dtype if name == "rfft" else np.result_type(dtype, np.complex64))
    kw = dict(axis=axis, norm=norm, **({"n": shape[axis]} if name == "irfft" else {}))
    if name == "fft2":   # the axis before the last as columns (inner = the last axis)
        hypothesis.assume(0 not in shape[1:])   # NumPy refuses empty transformed axes
        kw = dict(axes=(1, 2), norm=norm)
    got = kiln.jit(lambda x: getattr(jnp.fft, name)(x, **kw))(x)
    want = getattr(np.fft, name)(x, **kw)
    close(got, want.astype(np.asarray(got).dtype), dtype)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["fft", "ifft", "fft2", "ifft2", "rfft"]),
       st.sampled_from([np.complex64, np.complex128]), st.sampled_from([1, 8, 16, 32, 33, 48]),
       st.sampled_from([1, 16, 32, 48, 64, 256, 17, 97]), st.sampled_from([1, 16, 24]),
       st.sampled_from([None, "ortho", "forward"]))
@hypothesis.example("fft2", np.complex64, 32, 64, 16, None)       # rows and columns as blocks
@hypothesis.example("ifft", np.complex128, 48, 256, 1, "ortho")   # rows, c128's 8-wide vectors
@hypothesis.example("rfft", np.complex64, 32, 64, 1, None)        # half-line rows as blocks
def test_vector_blocks_match_numpy(name, dtype, batch, n, other, norm):
    """Whole groups of complex lines moved as blocks of vectors (fft_kernel's gather_blocks
    and scatter_blocks: rows transposed in registers, adjacent columns as vector loads), the
    partial groups and odd lengths beside them that take the element-by-element path."""
    x = sample((batch, n, other), np.float32 if dtype == np.complex64 else np.float64) \
        if name == "rfft" else sample((batch, n, other), dtype)
    kw = dict(axes=(1, 2), norm=norm) if name.endswith("2") else \
        dict(axis=1 if other == 1 else 2, norm=norm)
    if name == "rfft":
        x, kw = x[..., 0], dict(axis=1, norm=norm)
    got = kiln.jit(lambda x: getattr(jnp.fft, name)(x, **kw))(x)
    want = getattr(np.fft, name)(x, **kw)
    close(got, want.astype(np.asarray(got).dtype), dtype)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["fft", "ifft", "rfft"]), st.sampled_from([16, 17, 18]),
       st.sampled_from([np.float32, np.float64]), st.integers(0, 2),
       st.sampled_from([None, "ortho", "forward"]))
def test_four_step_lines_match_numpy(name, log2, dtype, ones, norm):
    """Single power-of-two lines of 2^16 and longer (lower_fft.py's four steps; RFFT's
    half-length line from 2^17), under leading axes of length 1."""
    shape = (1,) * ones + (1 << log2,)
    x = sample(shape, dtype if name == "rfft" else np.result_type(dtype, np.complex64))
    got = kiln.jit(lambda x: getattr(jnp.fft, name)(x, norm=norm))(x)
    want = getattr(np.fft, name)(x, norm=norm)
    close(got, want.astype(np.asarray(got).dtype), dtype)


def numpy_kw(kw):
    """NumPy 2 wants `axes` beside `s` (kiln and JAX take the trailing axes)."""
    if "s" in kw and "axes" not in kw:
        return dict(kw, axes=tuple(range(-len(kw["s"]), 0)))
    return kw


TRANSFORMS = [
    ("fft", {}), ("fft", dict(n=9, axis=0, norm="ortho")), ("ifft", dict(n=4, norm="forward")),
    ("fft2", {}), ("ifft2", dict(s=(3, 8), axes=(0, 2))), ("fftn", dict(norm="ortho")),
    ("ifftn", dict(axes=(1,))), ("rfft", {}), ("rfft", dict(n=11, axis=1)), ("irfft", {}),
    ("irfft", dict(n=7, axis=1, norm="ortho")), ("rfft2", dict(norm="forward")), ("irfft2", {}),
    ("rfftn", dict(s=(2, 3, 4))), ("irfftn", dict(axes=(0, 2))), ("hfft", {}),
    ("hfft", dict(n=6, axis=0)), ("ihfft", dict(norm="ortho")),
]


@pytest.mark.parametrize("name,kw", TRANSFORMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_fft_functions_match_numpy(name, kw, dtype):
    if name in ("rfft", "rfft2", "rfftn", "ihfft") and np.dtype(dtype).kind == "c":
        with pytest.raises(ValueError, match="only real valued inputs"):
            getattr(jnp.fft, name)(sample((4, 5, 6), dtype), **kw)
        return
    x = sample((4, 5, 6), dtype)
    got = getattr(jnp.fft, name)(x, **kw)
    want = getattr(np.fft, name)(x, **numpy_kw(kw))
    double = np.dtype(dtype) in (np.float64, np.complex128)
    out_dtype = ({"c": np.complex128, "f": np.float64} if double else
                 {"c": np.complex64, "f": np.float32})[want.dtype.kind]
    close(got, want.astype(out_dtype), dtype)


@pytest.mark.parametrize("name,kw", [("fftn", dict(axes=(0, 1, 2, 3))), ("irfftn", {}),
                                     ("rfftn", dict(s=(2, 3, 3, 4)))])
def test_more_than_three_axes(name, kw):
    x = sample((2, 3, 2, 3, 4), np.float64 if name == "rfftn" else np.complex128)
    close(getattr(jnp.fft, name)(x, **kw), getattr(np.fft, name)(x, **numpy_kw(kw)),
          np.complex128)


def test_compiled_numpy_fft_matches_jax():
    def f(x):
        return (jnp.fft.irfft2(jnp.fft.rfft2(x, norm="ortho"), s=x.shape[-2:], norm="ortho")
                + jnp.fft.ifft(jnp.fft.fft(x, n=16), axis=0).real[:, :7])
    x = sample((5, 7), np.float32)
    got = kiln.jit(f)(x)
    jf = jax.jit(lambda x: jax.numpy.fft.irfft2(jax.numpy.fft.rfft2(x, norm="ortho"),
                                                s=x.shape[-2:], norm="ortho")
                 + jax.numpy.fft.ifft(jax.numpy.fft.fft(x, n=16), axis=0).real[:, :7])
    close(got, np.asarray(jf(x)), np.float32)


@pytest.mark.parametrize("fn", ["fft", "ifft", "rfft", "irfft", "fft2", "rfftn", "irfftn",
                                "hfft", "ihfft"])
def test_derivatives_against_finite_differences(fn):
    real = fn in ("rfft", "rfftn", "ihfft")
    x = sample((3, 6), np.float64 if real else np.complex128)
    check_grads(lambda x: getattr(jnp.fft, fn)(x), (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("fft_type,lengths,shape", [
    ("FFT", (6,), (2, 6)), ("IFFT", (3, 4), (3, 4)), ("RFFT", (2, 6), (2, 6)),
    ("RFFT", (5,), (3, 5)), ("IRFFT", (3, 6), (3, 4)), ("IRFFT", (7,), (2, 4))])
def test_vjp_is_jax_transpose(fft_type, lengths, shape):
    dtype = np.float32 if fft_type == "RFFT" else np.complex64   # JAX runs without x64
    x = sample(shape, dtype)
    y, pullback = kiln.vjp(lambda x: lax.fft(x, fft_type, lengths), x)
    ct = sample(np.shape(y), np.asarray(y).dtype, seed=1)
    jy, jpull = jax.vjp(lambda x: jax.lax.fft(x, fft_type, lengths), x)
    close(y, np.asarray(jy), dtype)
    close(pullback(ct)[0], np.asarray(jpull(ct)[0]), dtype)


def test_compiled_grad_and_vmap_match_jax():
    def loss(x):
        return jnp.sum(jnp.abs(jnp.fft.rfft(x * x)) ** 2) + jnp.fft.irfft(jnp.fft.fft(x)).sum()

    def jloss(x):
        jn = jax.numpy
        return jn.sum(jn.abs(jn.fft.rfft(x * x)) ** 2) + jn.fft.irfft(jn.fft.fft(x)).sum()
    x = sample((4, 10), np.float32)
    close(kiln.jit(kiln.grad(loss))(x), np.asarray(jax.grad(jloss)(x)), np.float32)
    batched = kiln.vmap(lambda a: jnp.fft.fft2(a), in_axes=1)(sample((3, 4, 5), np.complex64))
    want = np.moveaxis(np.fft.fft2(np.moveaxis(sample((3, 4, 5), np.complex64), 1, 0)), 0, 0)
    close(batched, want.astype(np.complex64), np.complex64)


def test_empty_batches_and_eager():
    assert jnp.fft.fft(np.zeros((0, 4), np.complex64)).shape == (0, 4)
    assert _llvm(np.zeros((2, 0, 4), np.float32), "RFFT", (4,)).shape == (2, 0, 3)
    assert jnp.fft.rfft2(np.zeros((3, 0, 4))).shape == (3, 0, 3)
    for norm in ("ortho", "forward"):   # an empty transformed axis: nothing to scale (JAX's)
        assert jnp.fft.fft(np.zeros((3, 0), np.complex64), norm=norm).shape == (3, 0)
        assert jnp.fft.ifft2(np.zeros((0, 2), np.complex64), norm=norm).shape == (0, 2)
    with pytest.raises(ValueError, match="Invalid norm value bad"):
        jnp.fft.fft(np.zeros((3, 0), np.complex64), norm="bad")


def test_frequencies_and_shifts():
    for n in (1, 6, 7):
        close(jnp.fft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5), np.float64)
        close(jnp.fft.rfftfreq(n, 0.5), np.fft.rfftfreq(n, 0.5), np.float64)
    x = sample((4, 5), np.float32)
    close(jnp.fft.fftshift(x), np.fft.fftshift(x), np.float32)
    close(jnp.fft.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1), np.float32)
    close(jnp.fft.fftshift(x, axes=(0,)), np.fft.fftshift(x, axes=(0,)), np.float32)
    assert jnp.fft.fftfreq(4, dtype=np.float32).dtype == np.float32


def test_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
        lax.fft(np.ones(4, np.complex64), "RFFT", (4,))
    with pytest.raises(ValueError, match=r"minor dimensions must be equal to fft_lengths"):
        lax.fft(np.ones(4, np.complex64), "FFT", (5,))
    with pytest.raises(ValueError, match="must have at least as many input dimensions"):
        lax.fft(np.ones(4, np.complex64), "FFT", (1, 4))
    with pytest.raises(ValueError, match="Unknown FFT type 'fourier'"):
        lax.fft(np.ones(4, np.complex64), "fourier", (4,))
    with pytest.raises(ValueError, match="Invalid norm value sideways"):
        jnp.fft.fft(np.ones(4), norm="sideways")
    with pytest.raises(ValueError, match="does not support repeated axes"):
        jnp.fft.fftn(np.ones((2, 2)), axes=(0, 0))
    with pytest.raises(ValueError, match="does not support multiple axes"):
        jnp.fft.fft(np.ones((2, 2)), axis=(0, 1))
    with pytest.raises(ValueError, match="only supports 2 axes"):
        jnp.fft.fft2(np.ones((2, 2, 2)), axes=(0, 1, 2))
    with pytest.raises(ValueError, match="Shape should be positive"):
        jnp.fft.fft(np.ones(4), n=0)


def test_emulated_cuda_device(monkeypatch):
    monkeypatch.setenv(D.EMULATE, "1")

    def f(x):
        return jnp.fft.irfft2(jnp.fft.rfft2(x) * 2.0, s=x.shape[-2:]) + jnp.fft.ifft(x).imag
    x = sample((3, 6, 5), np.float32)
    g = kiln.jit(f, backend="cuda")
    close(g(x), (2 * x + np.fft.ifft(x).imag).astype(np.float32), np.float32)
    steps = g._cache.values()[0].executable.steps()
    assert steps.count("fft") == 3, steps   # (complex elementwise steps run per primitive)
    assert "the device layer's FFT (cuFFT)" in g.lower(x).compile().as_text("cuda")


def spectrum(x):
    return jnp.abs(jnp.fft.rfft(x)) + jnp.fft.ifft2(jnp.fft.fft2(x)).real.sum()


def test_compiled_library_binds_the_kernels(tmp_path):
    import kiln.aot
    from kiln.cli.aot import compile_library
    from kiln.compiler.aot import Target
    x = sample((4, 12), np.float32)
    compile_library([Target(spectrum, (np.zeros((4, 12), np.float32),))], tmp_path / "lib",
                    name="spec")
    lib = kiln.aot.load(tmp_path / "lib")
    close(lib.spectrum(x), np.asarray(kiln.jit(spectrum)(x)), np.float32)
