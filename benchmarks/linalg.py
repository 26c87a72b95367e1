"""Linear algebra, kiln beside NumPy/SciPy and JAX: single 512x512 float32 factorisations
(cholesky, inv, svd, eigh: all three call LAPACK, kiln and NumPy/SciPy through OpenBLAS on one
thread per call, docs/linalg.md) and 10,000 batched 8x8 solve, cholesky and inv (kiln loops
over the batch in native code, one LAPACK call per matrix). Each row's note gives its
conventional flop count, from which docs/linalg.md derives GFLOP/s."""
import numpy as np
import scipy.linalg

from harness import Case

N, BATCH, SMALL = 512, 10_000, 8


def _flops(name, n, count=1):
    per = {"cholesky": n ** 3 / 3, "inv": 2 * n ** 3, "svd": 22 * n ** 3, "eigh": 9 * n ** 3,
           "solve": 2 * n ** 3 / 3 + 2 * n ** 2}[name]
    return per * count / 1e9


def cases(jax=None):
    import kiln
    import kiln.numpy as knp

    rng = np.random.default_rng(0)
    m = rng.standard_normal((N, N)).astype(np.float32)
    spd = (m @ m.T / N + np.eye(N)).astype(np.float32)
    s = rng.standard_normal((BATCH, SMALL, SMALL)).astype(np.float32)
    spds = (s @ np.swapaxes(s, 1, 2) + SMALL * np.eye(SMALL)).astype(np.float32)
    rhs = rng.standard_normal((BATCH, SMALL, 1)).astype(np.float32)
    rows = [  # (name, kiln function, NumPy/SciPy function, JAX function name, inputs, flops)
        ("cholesky f32[512,512]", knp.linalg.cholesky, np.linalg.cholesky, "cholesky", (spd,),
         _flops("cholesky", N)),
        ("inv f32[512,512]", knp.linalg.inv, np.linalg.inv, "inv", (spd,), _flops("inv", N)),
        ("svd f32[512,512]", lambda a: knp.linalg.svd(a, compute_uv=True),
         lambda a: scipy.linalg.svd(a, lapack_driver="gesdd"), "svd", (m,), _flops("svd", N)),
        ("eigh f32[512,512]", knp.linalg.eigh, np.linalg.eigh, "eigh", (spd,),
         _flops("eigh", N)),
        ("solve 10000 x f32[8,8]", knp.linalg.solve, np.linalg.solve, "solve", (spds, rhs),
         _flops("solve", SMALL, BATCH)),
        ("cholesky 10000 x f32[8,8]", knp.linalg.cholesky, np.linalg.cholesky, "cholesky",
         (spds,), _flops("cholesky", SMALL, BATCH)),
        ("inv 10000 x f32[8,8]", knp.linalg.inv, np.linalg.inv, "inv", (spds,),
         _flops("inv", SMALL, BATCH)),
    ]
    cases = []
    for name, kf, nf, jname, args, gflop in rows:
        compiled = kiln.jit(kf)
        jf = None
        if jax:
            jitted = jax.jit(getattr(jax.numpy.linalg, jname))
            jargs = [jax.numpy.asarray(a) for a in args]
            jf = lambda f=jitted, a=jargs: f(*a)  # noqa: E731
        cases.append(Case("linalg", name, lambda f=compiled, a=args: f(*a),
                          lambda f=nf, a=args: f(*a), jf, note=f"{gflop:.3g} GFLOP"))
    return cases
