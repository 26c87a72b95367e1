"""Eager-mode workloads: per-operation overhead of kiln.numpy against NumPy and JAX.

Each operation runs at once on NumPy buffers; what kiln adds is Python dispatch (argument
checks, promotion, the cached shape rule, wrapping). The aim is a few microseconds, with
`jnp.add` on small arrays within 3x of NumPy's own call. The last rows are functions of many
operations: `kiln.random`'s samplers and the library functions that compile their eager
calls from the 17th of a signature (runtime/eager_tiers.py), warmed past it, and the others,
which run as one unit on the exact backend from the second call of a signature (`composite`).
"""
import numpy as np

from harness import Case


def cases(jax=None):
    import kiln
    import kiln.numpy as knp
    jnp = jax.numpy if jax else None

    small = np.arange(16, dtype=np.float32)
    mat = np.ones((64, 64), np.float32)
    big = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
    ks, km, kb = knp.asarray(small), knp.asarray(mat), knp.asarray(big)
    js = jm = jb = None
    if jax:
        js, jm, jb = jnp.asarray(small), jnp.asarray(mat), jnp.asarray(big)

    def j(fn):
        return fn if jax else None

    out = [
        Case("eager", "add f32[16] + f32[16]", lambda: knp.add(ks, ks),
             lambda: np.add(small, small), j(lambda: jnp.add(js, js))),
        Case("eager", "x + 1.0 (weak scalar), f32[16]", lambda: ks + 1.0,
             lambda: small + np.float32(1.0), j(lambda: js + 1.0)),
        Case("eager", "exp f32[16]", lambda: knp.exp(ks), lambda: np.exp(small),
             j(lambda: jnp.exp(js))),
        Case("eager", "sum f32[64,64] axis=0", lambda: knp.sum(km, axis=0),
             lambda: np.sum(mat, axis=0), j(lambda: jnp.sum(jm, axis=0))),
        Case("eager", "matmul f32[64,64] @ f32[64,64]", lambda: km @ km, lambda: mat @ mat,
             j(lambda: jm @ jm)),
        Case("eager", "x[3] on f32[16]", lambda: ks[3], lambda: small[3], j(lambda: js[3])),
        Case("eager", "x.at[3].set(0.) on f32[16]", lambda: ks.at[3].set(0.0),
             lambda: _np_set(small), j(lambda: js.at[3].set(0.0))),
        Case("eager", "x*x + x*2 on f32[1e6]", lambda: kb * kb + kb * 2.0,
             lambda: big * big + big * np.float32(2.0), j(lambda: jb * jb + jb * 2.0)),
    ]
    key = kiln.random.PRNGKey(0)
    jkey = jax.random.PRNGKey(0) if jax else None
    split_fold = _split_fold(kiln.random, key)
    for _ in range(kiln.eager_tiers.EAGER_CALLS):   # past the eager calls, as JAX's warm-up
        kiln.random.normal(key, (1000,))             # call is past its compile
        split_fold()
    out.append(Case("eager", "random.normal(key, (1000,))",
                    lambda: kiln.random.normal(key, (1000,)),
                    lambda: np.random.default_rng(0).standard_normal(1000, np.float32),
                    j(lambda: jax.random.normal(jkey, (1000,))),
                    note="NumPy: a different generator; kiln: compiled (from the 17th call)"))
    out.append(Case("eager", "random.split(key) then fold_in(key, i)",
                    split_fold, None,
                    _split_fold(jax.random, jkey) if jax else None,
                    note="a training loop's key handling; i changes every call"))
    return out + _composites(kiln, jax)


def _composites(kiln, jax):
    """Composite library functions (many primitives each). Those kiln tiers compile from
    their 17th eager call (warmed past it here, as JAX's jitted functions are past their
    compile); the others (other roundings when compiled) run as one unit on the exact
    backend from their second call, or op by op when they are one or two primitives
    (`cumsum`). JAX jits most of them; `softmax`, `logsumexp` and `interp` run op by op
    there."""
    import kiln.nn
    knp = kiln.numpy
    rng = np.random.default_rng(1)
    m8, v100, v1000, m64, m16, b8 = (rng.standard_normal(shape).astype(np.float32)
                                     for shape in ((8, 8), 100, 1000, (64, 64), (16, 64), 8))
    sym8 = m8 + m8.T
    xp = np.sort(rng.standard_normal(20)).astype(np.float32)
    labels = rng.integers(0, 10, 128).astype(np.int32)
    arrays = dict(m8=m8, sym8=sym8, v100=v100, v1000=v1000, xp=xp, m64=m64, m16=m16,
                  labels=labels, b8=b8)
    k = {name: knp.asarray(v) for name, v in arrays.items()}
    a = {name: jax.numpy.asarray(v) for name, v in arrays.items()} if jax else {}
    rows = [  # name, how kiln runs it, kiln and JAX call on the namespace, NumPy call
        ("linalg.inv f32[8,8]", UNIT, lambda n, a: n.linalg.inv(a["m8"]),
         lambda: np.linalg.inv(m8)),
        ("linalg.solve f32[8,8], f32[8]", UNIT, lambda n, a: n.linalg.solve(a["m8"], a["b8"]),
         lambda: np.linalg.solve(m8, b8)),
        ("linalg.det f32[8,8]", UNIT, lambda n, a: n.linalg.det(a["m8"]),
         lambda: np.linalg.det(m8)),
        ("linalg.eigh f32[8,8]", TIERED, lambda n, a: n.linalg.eigh(a["sym8"]),
         lambda: np.linalg.eigh(sym8)),
        ("linspace(0., 1., 50)", TIERED, lambda n, a: n.linspace(0.0, 1.0, 50),
         lambda: np.linspace(0.0, 1.0, 50, dtype=np.float32)),
        ("interp f32[100] on 20 points", UNIT,
         lambda n, a: n.interp(a["v100"], a["xp"], a["xp"]), lambda: np.interp(v100, xp, xp)),
        ("percentile(f32[1000], 30.)", TIERED, lambda n, a: n.percentile(a["v1000"], 30.0),
         lambda: np.percentile(v1000, 30.0)),
        ("median f32[64,64] axis=0", TIERED, lambda n, a: n.median(a["m64"], axis=0),
         lambda: np.median(m64, axis=0)),
        ("var f32[64,64] axis=0", UNIT, lambda n, a: n.var(a["m64"], axis=0),
         lambda: np.var(m64, axis=0)),
        ("std f32[64,64]", UNIT, lambda n, a: n.std(a["m64"]), lambda: np.std(m64)),
        ("cumsum f32[64,64] axis=0", EAGER, lambda n, a: n.cumsum(a["m64"], axis=0),
         lambda: np.cumsum(m64, axis=0)),
    ]
    nn_rows = [
        ("nn.softmax f32[16,64]", UNIT, lambda nn, a: nn.softmax(a["m16"]), None),
        ("nn.logsumexp f32[16,64] axis=1", UNIT, lambda nn, a: nn.logsumexp(a["m16"], axis=1),
         None),
        ("nn.one_hot(int32[128], 10)", TIERED, lambda nn, a: nn.one_hot(a["labels"], 10),
         None),
    ]
    out = []
    for namespaces, table in (((knp, jax.numpy if jax else None), rows),
                              ((kiln.nn, jax.nn if jax else None), nn_rows)):
        for name, how, call, numpy_call in table:
            kiln_call = _bound(call, namespaces[0], k)
            for _ in range(kiln.eager_tiers.EAGER_CALLS):
                kiln_call()
            out.append(Case("eager", name, kiln_call, numpy_call,
                            _bound(call, namespaces[1], a) if jax else None, note=how))
    return out


TIERED = "kiln: compiled (from the 17th call)"
UNIT = "kiln: one unit, exact backend (from the 2nd call)"
EAGER = "kiln: op by op (one or two primitives)"


def _bound(call, namespace, arrays):
    return lambda: call(namespace, arrays)


def _split_fold(random, key):
    step = [0]

    def run():
        step[0] += 1
        return random.fold_in(random.split(key)[0], step[0])
    return run


def _np_set(x):
    y = x.copy()
    y[3] = 0.0
    return y
