import numpy as np, scipy.signal as ss, kiln
from kiln.scipy import signal as ks
rng=np.random.default_rng(0)
x=rng.normal(size=(2,300)).astype(np.float32); y=rng.normal(size=(2,300)).astype(np.float32)
def cmp(name, a, b):
    ok = all(np.shape(u)==np.shape(v) and np.allclose(np.asarray(u), v, rtol=1e-3, atol=1e-5) for u, v in zip(a, b))
    print(name, ok, [np.shape(u) for u in a], [np.shape(v) for v in b])
cmp("welch", ks.welch(x, nperseg=64), ss.welch(x, nperseg=64))
cmp("welch fs spec", ks.welch(x, fs=10., nperseg=50, noverlap=10, scaling="spectrum"), ss.welch(x, fs=10., nperseg=50, noverlap=10, scaling="spectrum"))
cmp("welch median", ks.welch(x, nperseg=64, average="median"), ss.welch(x, nperseg=64, average="median"))
cmp("welch default", ks.welch(x), ss.welch(x))
cmp("csd", ks.csd(x, y, nperseg=64, nfft=100), ss.csd(x, y, nperseg=64, nfft=100))
cmp("csd two", ks.csd(x, y, nperseg=64, return_onesided=False, detrend="linear"), ss.csd(x, y, nperseg=64, return_onesided=False, detrend="linear"))
cmp("stft", ks.stft(x, nperseg=64), ss.stft(x, nperseg=64))
cmp("stft2", ks.stft(x, nperseg=60, noverlap=20, nfft=70, boundary=None, padded=False), ss.stft(x, nperseg=60, noverlap=20, nfft=70, boundary=None, padded=False))
cmp("stft axis0", ks.stft(x.T, nperseg=64, axis=0), ss.stft(x.T, nperseg=64, axis=0))
cmp("welch axis0", ks.welch(x.T, nperseg=64, axis=0), ss.welch(x.T, nperseg=64, axis=0))
cmp("jit welch", kiln.jit(lambda x: ks.welch(x, nperseg=64))(x), ss.welch(x, nperseg=64))
