"""Tests for `kiln.scipy.signal` against `scipy.signal` (float64 references), eagerly, under
`jit` and with gradients."""
import numpy as np
import pytest
import scipy.signal as ss

import kiln
import kiln.numpy as jnp
from kiln.scipy import signal

RNG = np.random.default_rng(1)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((5,), (5,)), ((1,), (4,)), ((6, 5), (3, 2)),
          ((2, 3), (4, 5)), ((4, 3, 3), (2, 1, 3))]
MODES = ["full", "same", "valid"]


def _pair(s1, s2, dtype=np.float32):
    return RNG.normal(size=s1).astype(dtype), RNG.normal(size=s2).astype(dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_nd_against_scipy(name, shapes, mode):
    a, b = _pair(*shapes)
    expected = getattr(ss, name)(a.astype(np.float64), b.astype(np.float64), mode, "direct")
    got = getattr(signal, name)(a, b, mode)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(signal.fftconvolve(a, b, mode) if name == "convolve" else got,
                               expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((6, 5), (3, 2)), ((2, 3), (4, 5)), ((3, 3), (3, 3))])
def test_2d_against_scipy(shapes, mode):
    a, b = _pair(*shapes)
    np.testing.assert_allclose(signal.convolve2d(a, b, mode), ss.convolve2d(a, b, mode),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(signal.correlate2d(a, b, mode), ss.correlate2d(a, b, mode),
                               rtol=1e-5, atol=1e-5)


def test_complex_and_ints():
    a = RNG.normal(size=6) + 1j * RNG.normal(size=6)
    b = RNG.normal(size=3) + 1j * RNG.normal(size=3)
    with kiln.enable_x64(True):
        np.testing.assert_allclose(signal.correlate(a, b), ss.correlate(a, b), rtol=1e-12)
        np.testing.assert_allclose(signal.fftconvolve(a, b, "same"),
                                   ss.fftconvolve(a, b, "same"), rtol=1e-12)
    got = signal.convolve(np.arange(4), np.array([1, 2]))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.convolve(np.arange(4), [1, 2]))


def test_fftconvolve_axes():
    a, b = _pair((3, 8), (3, 4))
    np.testing.assert_allclose(signal.fftconvolve(a, b, "valid", axes=1),
                               ss.fftconvolve(a, b, "valid", axes=1), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="mapped axes"):
        signal.fftconvolve(a, b[:2], axes=1)


@pytest.mark.parametrize("type_", ["linear", "constant"])
@pytest.mark.parametrize("bp", [0, [3, 7]])
def test_detrend(type_, bp):
    x = RNG.normal(size=(4, 10)).astype(np.float32) + np.arange(10, dtype=np.float32)
    np.testing.assert_allclose(signal.detrend(x, axis=1, type=type_, bp=bp),
                               ss.detrend(x.astype(np.float64), axis=1, type=type_, bp=bp),
                               atol=2e-5)
    np.testing.assert_allclose(signal.detrend(x.T, axis=0, type=type_, bp=bp),
                               ss.detrend(x.T.astype(np.float64), axis=0, type=type_, bp=bp),
                               atol=2e-5)


def test_errors():
    with pytest.raises(ValueError, match="smaller than the other"):
        signal.convolve(np.ones((2, 5)), np.ones((3, 1)))
    with pytest.raises(ValueError, match="mode must be one of"):
        signal.convolve(np.ones(3), np.ones(2), "middle")
    with pytest.raises(NotImplementedError, match="boundary='fill'"):
        signal.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")
    with pytest.raises(ValueError, match="Trend type"):
        signal.detrend(np.ones(3), type="cubic")


def test_jit_and_grad():
    a, b = _pair((9,), (4,))
    f = kiln.jit(lambda a, b: signal.convolve(a, b, "same"))
    np.testing.assert_allclose(f(a, b), ss.convolve(a, b, "same"), rtol=1e-5, atol=1e-6)
    g = kiln.jit(lambda a, b: signal.fftconvolve(a, b))
    np.testing.assert_allclose(g(a, b), ss.convolve(a, b), rtol=1e-4, atol=1e-5)
    # d/da sum(convolve(a, b) * w) = correlate(w, b, "valid")
    w = RNG.normal(size=12).astype(np.float32)
    grad = kiln.grad(lambda a: jnp.sum(signal.convolve(a, b) * w))(a)
    np.testing.assert_allclose(grad, ss.correlate(w, b, "valid"), rtol=1e-5, atol=1e-5)
    d = kiln.jit(lambda x: signal.detrend(x, bp=[4]))(w)
    np.testing.assert_allclose(d, ss.detrend(w, bp=[4]), atol=2e-5)


SIG = RNG.normal(size=(2, 300)).astype(np.float32)
SIG2 = RNG.normal(size=(2, 300)).astype(np.float32)
# (function name, keyword arguments); each is compared with scipy.signal's
SPECTRAL = [
    ("welch", dict(nperseg=64)),
    ("welch", dict()),
    ("welch", dict(fs=10., nperseg=50, noverlap=10, scaling="spectrum")),
    ("welch", dict(nperseg=64, average="median")),
    ("welch", dict(nperseg=64, axis=0)),
    ("csd", dict(nperseg=64, nfft=100)),
    ("csd", dict(nperseg=64, return_onesided=False, detrend="linear")),
    ("stft", dict(nperseg=64)),
    ("stft", dict(nperseg=60, noverlap=20, nfft=70, boundary=None, padded=False)),
    ("stft", dict(nperseg=64, axis=0)),
]


@pytest.mark.parametrize("name,kw", SPECTRAL, ids=[f"{n}-{i}" for i, (n, _) in
                                                   enumerate(SPECTRAL)])
def test_spectral_against_scipy(name, kw):
    x = SIG.T if kw.get("axis") == 0 else SIG
    args = (x, SIG2.T if kw.get("axis") == 0 else SIG2) if name == "csd" else (x,)
    got, expected = getattr(signal, name)(*args, **kw), getattr(ss, name)(*args, **kw)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        assert a.dtype == (np.complex64 if np.iscomplexobj(b) else np.float32)
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_spectral_jit_and_errors():
    f = kiln.jit(lambda x: signal.welch(x, nperseg=64)[1])
    np.testing.assert_allclose(f(SIG), ss.welch(SIG, nperseg=64)[1], rtol=1e-3, atol=1e-6)
    with pytest.raises(ValueError, match="noverlap must be less than nperseg"):
        signal.welch(SIG, nperseg=16, noverlap=16)
    with pytest.raises(ValueError, match="average must be"):
        signal.welch(SIG, average="mode")


@pytest.mark.filterwarnings("ignore:NOLA condition failed")   # SciPy's, on the reference
@pytest.mark.parametrize("kw,stft_kw", [
    (dict(), dict(nperseg=64)),
    (dict(boundary=False, noverlap=32), dict(nperseg=64)),
    (dict(nperseg=50, noverlap=30, nfft=64), dict(nperseg=50, noverlap=30, nfft=64)),
    (dict(input_onesided=False), dict(nperseg=64, return_onesided=False)),
    (dict(time_axis=1, freq_axis=0), dict(nperseg=64, axis=0)),
])
def test_istft_against_scipy(kw, stft_kw):
    x = SIG.T if stft_kw.get("axis") == 0 else SIG
    z = ss.stft(x, **stft_kw)[2]
    if "time_axis" in kw:
        z = np.moveaxis(z, 1, -1)      # (freq, time, batch)
    got, expected = signal.istft(z.astype(np.complex64), **kw), ss.istft(z, **kw)
    for a, b in zip(got, expected):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    round_trip = kiln.jit(lambda z: signal.istft(z, **kw)[1])(z.astype(np.complex64))
    np.testing.assert_allclose(round_trip, expected[1], rtol=1e-3, atol=1e-4)
