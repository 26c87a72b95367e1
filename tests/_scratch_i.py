import numpy as np, scipy.signal as ss, kiln
from kiln.scipy import signal as ks
rng=np.random.default_rng(0)
x=rng.normal(size=(2,300)).astype(np.float32)
def cmp(name, a, b):
    ok = all(np.shape(u)==np.shape(v) and np.allclose(np.asarray(u), v, rtol=1e-3, atol=1e-4) for u, v in zip(a, b))
    print(name, ok, [np.shape(u) for u in a], [np.shape(v) for v in b], [np.asarray(u).dtype for u in a])
_,_,Z=ss.stft(x, nperseg=64)
cmp("istft", ks.istft(Z.astype(np.complex64)), ss.istft(Z))
cmp("istft nb", ks.istft(Z.astype(np.complex64), boundary=False, noverlap=32), ss.istft(Z, boundary=False, noverlap=32))
_,_,Z1=ss.stft(x[0], nperseg=50, noverlap=30, nfft=64)
cmp("istft 1d", ks.istft(Z1.astype(np.complex64), nperseg=50, noverlap=30, nfft=64), ss.istft(Z1, nperseg=50, noverlap=30, nfft=64))
Zt=np.moveaxis(Z, 0, -1)  # (33, 11, 2): freq 0, time 1
cmp("istft axes", ks.istft(Zt.astype(np.complex64), time_axis=1, freq_axis=0), ss.istft(Zt, time_axis=1, freq_axis=0))
_,_,Z2=ss.stft(x, nperseg=64, return_onesided=False)
cmp("istft two", ks.istft(Z2.astype(np.complex64), input_onesided=False), ss.istft(Z2, input_onesided=False))
cmp("jit", kiln.jit(lambda z: ks.istft(z))(Z.astype(np.complex64)), ss.istft(Z))
