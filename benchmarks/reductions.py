"""Long float32 reductions, kiln beside NumPy and JAX: sums, means, variances and cumulative
sums over 10^7 values, and a sum over the leading axis of (10^6, 16).

kiln's sums along the innermost loop run in blocks whose totals add pairwise, sums over leading
axes accumulate in a float64 workspace, and float32 cumulative sums carry float64 running sums
(docs/llvm.md, "Accuracy of sums"): these rows show what that accuracy costs. Each reads 40 to
64 MB (its floor is that over the machine's memory bandwidth: BENCHMARKS.md names it); a
cumulative sum also writes its 40 MB result and is one serial dependency chain (an add's
latency, about 4 cycles, per element).
"""
import numpy as np

from harness import Case

N = 10_000_000


def cases(jax=None):
    import kiln
    import kiln.numpy as knp

    rng = np.random.default_rng(0)
    x = rng.normal(1000.0, 1.0, N).astype(np.float32)
    tall = rng.normal(1000.0, 1.0, (1_000_000, 16)).astype(np.float32)
    k = {name: kiln.jit(f, backend="llvm") for name, f in (
        ("sum", lambda v: knp.sum(v)), ("mean", lambda v: knp.mean(v)),
        ("var", lambda v: knp.var(v)), ("cumsum", lambda v: knp.cumsum(v)),
        ("columns", lambda v: knp.sum(v, axis=0)))}
    j = {}
    if jax:
        jnp = jax.numpy
        jx, jtall = jnp.asarray(x), jnp.asarray(tall)
        f = {name: jax.jit(fn) for name, fn in (
            ("sum", jnp.sum), ("mean", jnp.mean), ("var", jnp.var), ("cumsum", jnp.cumsum),
            ("columns", lambda v: jnp.sum(v, axis=0)))}
        j = {name: (lambda fn=fn, a=(jtall if name == "columns" else jx): fn(a))
             for name, fn in f.items()}
    return [
        Case("reductions", "sum f32[10^7]", lambda: k["sum"](x), lambda: x.sum(), j.get("sum"),
             note="40 MB read"),
        Case("reductions", "mean f32[10^7]", lambda: k["mean"](x), lambda: x.mean(),
             j.get("mean")),
        Case("reductions", "var f32[10^7]", lambda: k["var"](x), lambda: x.var(), j.get("var"),
             note="two passes over 40 MB"),
        Case("reductions", "cumsum f32[10^7]", lambda: k["cumsum"](x), lambda: np.cumsum(x),
             j.get("cumsum"), note="NumPy's float32 running sum drifts by 2%"),
        Case("reductions", "sum over axis 0 of f32[10^6,16]", lambda: k["columns"](tall),
             lambda: tall.sum(axis=0), j.get("columns"),
             note="64 MB read; NumPy errs by 1e-2"),
    ]
