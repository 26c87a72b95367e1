"""FFTs, kiln beside NumPy (pocketfft) and JAX (XLA's CPU FFT, DUCC): one long complex64
transform (the issue's 2^20 figure), a real one, a 2-D one, many short ones, and a prime
length (Bluestein's algorithm in kiln's kernel, docs/fft.md). kiln's rows are one or two calls
of the runtime library's kernel per transformed axis, on kiln's thread pool."""
import numpy as np

from harness import Case

N = 1 << 20


def cases(jax=None):
    import kiln
    import kiln.numpy as knp

    rng = np.random.default_rng(0)

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    inputs = {"fft": cplx(N), "rfft": rng.standard_normal(N).astype(np.float32),
              "fft2": cplx(1024, 1024), "batch": cplx(4096, 256), "prime": cplx(100003)}
    k = {"fft": kiln.jit(lambda v: knp.fft.fft(v)), "rfft": kiln.jit(lambda v: knp.fft.rfft(v)),
         "fft2": kiln.jit(lambda v: knp.fft.fft2(v)), "batch": kiln.jit(lambda v: knp.fft.fft(v)),
         "prime": kiln.jit(lambda v: knp.fft.fft(v))}
    n = {"fft": np.fft.fft, "rfft": np.fft.rfft, "fft2": np.fft.fft2, "batch": np.fft.fft,
         "prime": np.fft.fft}
    j = {}
    if jax:
        jnp = jax.numpy
        fns = {"fft": jnp.fft.fft, "rfft": jnp.fft.rfft, "fft2": jnp.fft.fft2,
               "batch": jnp.fft.fft, "prime": jnp.fft.fft}
        j = {name: (lambda f=jax.jit(fn), a=jnp.asarray(inputs[name]): f(a))
             for name, fn in fns.items()}
    names = {"fft": "fft c64[2^20]", "rfft": "rfft f32[2^20]", "fft2": "fft2 c64[1024,1024]",
             "batch": "fft c64[4096,256] (last axis)", "prime": "fft c64[100003] (prime)"}
    return [Case("fft", names[key], lambda key=key: k[key](inputs[key]),
                 lambda key=key: n[key](inputs[key]), j.get(key)) for key in names]
