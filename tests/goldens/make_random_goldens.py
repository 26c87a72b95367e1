"""Record JAX 0.10.2's `jax.random` outputs as golden values for `tests/test_random.py`.

Run with an interpreter that has jax==0.10.2 (kiln itself never imports jax):

    /tmp/jaxenv/bin/python tests/goldens/make_random_goldens.py

It writes `tests/goldens/random_jax_0_10_2.json` next to this file, under JAX's default
configuration (x64 off, `jax_threefry_partitionable=True`, threefry2x32 keys), on the CPU.
The file holds a table of raw keys (`keys`), invalid keys for error cases (`bad_keys`), the
outputs of XLA's float32 `log`, `log1p`, `exp`, `erf`, `erf_inv` and `rsqrt` kernels (and
float16 `log`) on fixed inputs (`kernels`), a list of cases, and gradients of the gamma family
and `truncated_normal` (`grads`). Each case names a `jax.random` function, its key (a name in
one of the key tables), its positional and keyword arguments, and either its result or the
exception it raised; each gradient case the gradient (or second derivative) of
`sum(weights * fn(key, *args))` in `args[argnum]`. Arguments that are arrays or NumPy scalars
are encoded as
`{"array": nested list, "dtype": name}`; results are `{"dtype", "shape", "bits"}` where `bits`
holds integers: the values themselves for integer and bool results, the IEEE bit patterns for
floating and complex results, so that a bit-for-bit comparison is possible.
"""
import json
import os
import re

import numpy as np
import jax
import jax.numpy as jnp
from jax import random as R

assert jax.__version__ == "0.10.2", jax.__version__

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4)]
FLOATS = ["float32", "float16"]


def arr(values, dtype):
    return {"array": np.asarray(values, dtype).tolist(), "dtype": dtype}


def decode(v):
    if isinstance(v, dict) and "array" in v:
        return np.asarray(v["array"], v["dtype"])
    if isinstance(v, list):
        return tuple(decode(x) for x in v)
    return v


def keys():
    chain = R.fold_in(R.split(R.PRNGKey(1234), 3)[2], 77)
    table = {"s0": R.PRNGKey(0), "s42": R.PRNGKey(42), "smax": R.PRNGKey(2**31 - 1),
             "chain": chain}
    return {k: np.asarray(v).tolist() for k, v in table.items()}


def encode_result(x):
    x = np.asarray(x)
    if x.dtype.kind in "fc":
        bits = x.view(f"uint{x.dtype.itemsize * 8}")
    else:
        bits = x.astype(np.int64)
    return {"dtype": str(x.dtype), "shape": list(x.shape), "bits": bits.ravel().tolist()}


def cases():
    out = []

    def add(fn, key, *args, **kwargs):
        out.append({"fn": fn, "key": key, "args": list(args), "kwargs": kwargs})

    seeds = [0, 1, 42, -1, 2**31 - 1, 2**32 - 1, 2**32 + 5, -2**40, 2**63 - 1,
             arr(4294967295, "uint32"), arr(-3, "int8"), arr(200, "uint8"), True,
             arr(7, "int32"), 1.5, arr([1, 2], "int32")]
    for s in seeds:
        add("PRNGKey", None, s)
        add("key_data_of_key", None, s)
    for k in ("s0", "s42", "smax", "chain"):
        for num in (2, 3, 1, 0, [2, 3]):
            add("split", k, num)
        for d in (0, 1, 12345, 2**31 - 1, arr(4294967295, "uint32"), arr(-5, "int32"), 1.7,
                  -5, arr([1, 2], "int32")):
            add("fold_in", k, d)
        for shape in SHAPES:
            for dt in ("uint32", "uint8", "uint16"):
                add("bits", k, list(shape), dt)
            for dt in FLOATS:
                add("uniform", k, list(shape), dt)
                add("normal", k, list(shape), dt)
            add("randint", k, list(shape), -5, 17)
            add("bernoulli", k, 0.3, list(shape))
            add("exponential", k, list(shape))
            add("gumbel", k, list(shape))
            add("laplace", k, list(shape))
            add("logistic", k, list(shape))
            add("rademacher", k, list(shape))
            add("truncated_normal", k, -1.5, 2.0, list(shape))
    k = "s42"
    for lo, hi in ((0.3, 1.7), (-2.5, 3.1), (1e-3, 7.77), (5.0, 2.0)):
        for dt in FLOATS:
            add("uniform", k, [64], dt, lo, hi)
    add("uniform", k, [3, 5], "float32", arr(np.linspace(-2, 2, 5), "float32"), 3.0)
    add("uniform", k, [4], "float32", arr([0, 1, 2, 3], "int32"), arr([1, 5, 2, 10], "int32"))
    add("uniform", k, [2], "int32")
    add("uniform", k, [2], "float32", arr([0, 0, 0], "float32"), 1.0)
    for dt, lo, hi in (("int32", 0, 10), ("int32", -2**31, 2**31 - 1), ("int32", 7, 7),
                       ("int32", 10, 2), ("uint8", 0, 256), ("uint8", -10, 300),
                       ("int8", -1000, 1000), ("int8", -128, 128), ("int16", -3, 40000),
                       ("uint16", 0, 65535), ("uint32", 0, 2**31 - 1), ("int32", 0.5, 10.7),
                       ("float32", 0, 10)):
        add("randint", k, [50], lo, hi, dt)
    add("randint", k, [3, 5], arr([0, 10, 20, 30, 40], "int32"), 100)
    add("randint", k, [3, 5], 0, arr([[1], [2], [3]], "int32"))
    add("randint", k, [3, 5], arr([0, 0, 0, 0], "int32"), 100)
    add("randint", k, [2], arr([0, 1], "int64"), arr([5, 9], "uint32"))
    for p in (0.0, 1.0, 0.5, arr(0.25, "float16"), arr([0.1, 0.5, 0.9, 0.0, 1.0], "float32")):
        add("bernoulli", k, p, None)
    add("bernoulli", k, arr([0.1, 0.5, 0.9, 0.0, 1.0], "float32"), [3, 5])
    add("bernoulli", k, 0.5, [100], mode="high")
    add("bernoulli", k, 0.5, [2], mode="x")
    add("bernoulli", k, 1, [2])
    add("bernoulli", k, arr([0.5, 0.5], "float32"), [3])
    for x in (10, 1, 0, 2000, arr(np.arange(7), "int32"), arr(np.arange(7) * 1.5, "float32"),
              arr(np.arange(15).reshape(3, 5), "int32"), arr(5, "int32")):
        add("permutation", k, x)
    add("permutation", k, arr(np.arange(15).reshape(3, 5), "int32"), axis=1)
    add("permutation", k, arr(np.arange(15).reshape(3, 5), "int32"), axis=1, independent=True)
    add("permutation", k, arr(np.arange(24).reshape(2, 3, 4), "float32"), axis=-1,
        independent=True)
    add("permutation", k, arr(np.arange(24).reshape(2, 3, 4), "int32"), axis=1)
    add("permutation", k, 1.5)
    add("permutation", k, arr(np.arange(6).reshape(2, 3), "int32"), axis=2)
    p5 = arr([0.1, 0.2, 0.3, 0.15, 0.25], "float32")
    for a, shape, kw in ((10, [3], {}), (10, [], {}), (10, [2, 2], {}),
                         (5, [5], {"replace": False}), (10, [3], {"replace": False}),
                         (5, [6], {"p": p5}),
                         (5, [3], {"p": p5, "replace": False}), (5, [0], {}),
                         (arr(np.arange(15).reshape(3, 5), "int32"), [2], {}),
                         (arr(np.arange(15).reshape(3, 5), "int32"), [4], {"axis": 1}),
                         (arr(np.arange(15).reshape(3, 5), "float32"), [2, 2],
                          {"axis": 1, "replace": False}),
                         (arr(np.arange(5) * 2.0, "float32"), [3], {"p": p5}),
                         (5, [6], {"replace": False}), (0, [2], {}), (5, 3, {}),
                         (5, [2], {"p": arr([0.25] * 4, "float32")})):
        add("choice", k, a, shape, **kw)
    lg = arr(np.linspace(-1, 1, 15).reshape(3, 5), "float32")
    for logits, kw in ((arr([0.1, 2.0, -1.0, 0.5, 0.0], "float32"), {}),
                       (arr([0.1, 2.0, -1.0, 0.5, 0.0], "float32"), {"shape": [6]}),
                       (lg, {}), (lg, {"axis": 0}), (lg, {"shape": [4, 3]}),
                       (lg, {"axis": 0, "shape": [2, 5]}),
                       (lg, {"shape": [2, 3], "replace": False}),
                       (arr(np.zeros((3, 4)), "float16"), {}), (lg, {"shape": [5]}),
                       (lg, {"shape": [6, 3], "replace": False})):
        add("categorical", k, logits, **kw)
    for lo, hi, shape in ((0.0, 1.0, [20]), (-3.0, -1.0, [20]), (2.0, 6.0, [20]),
                          (arr([-1, 0, 1], "float32"), arr([0, 2, 5], "float32"), None),
                          (arr([-1, 0, 1], "float32"), 3.0, [4, 3]), (0.0, 1.0, [4]),
                          (arr([-1, 0, 1], "float32"), 3.0, [4])):
        add("truncated_normal", k, lo, hi, shape)
    add("truncated_normal", k, -1.0, 1.0, [10], "float16")
    for kk in ("s0", "chain"):
        for a in (0.5, 1.0, 2.5, 0.01):
            add("gamma", kk, a, [8])
        for a in (0.3, 4.0):
            add("loggamma", kk, a, [6])
        add("beta", kk, 2.0, 3.0, [6])
        add("dirichlet", kk, arr([1.0, 2.0, 3.0], "float32"))
    for kk in ("s0", "smax", "chain"):  # enough draws for many rejections, small and large a
        for a in (0.05, 0.9, 1.0, 3.7, 60.0):
            add("gamma", kk, a, [300])
        for a in (0.02, 5.0):
            add("loggamma", kk, a, [300])
        add("beta", kk, 0.4, 2.5, [300])
        add("dirichlet", kk, arr([0.3, 1.0, 4.0], "float32"), [100])
    add("gamma", k, arr(np.geomspace(0.01, 100, 400), "float32"))
    add("gamma", "chain", 2.0, [300], "float16")
    add("gamma", k, arr(np.linspace(0.2, 5, 15).reshape(3, 5), "float32"))
    add("gamma", k, arr([0.5, 3.0], "float32"), [4, 2])
    add("gamma", k, 2.0, [6], "float16")
    add("beta", k, arr([0.5, 1.0, 4.0], "float32"), 0.7)
    add("beta", k, 0.3, 0.3, [2, 3])
    add("dirichlet", k, arr([0.5, 0.5, 0.5, 0.5], "float32"), [3])
    add("dirichlet", k, arr([[1.0, 2.0], [0.1, 5.0]], "float32"))
    add("gamma", k, arr(np.ones(3), "float32"), [4])
    add("gamma", k, 1.0, [2], "int32")
    add("beta", k, arr(np.ones(3), "float32"), arr(np.ones(2), "float32"))
    add("dirichlet", k, 1.0)
    add("dirichlet", k, arr(np.ones((2, 3)), "float32"), [4])
    for shape in ([64], [3, 5]):
        add("gumbel", k, shape, mode="high")
        add("exponential", k, shape, "float16")
        add("gumbel", k, shape, "float16")
        add("laplace", k, shape, "float16")
        add("logistic", k, shape, "float16")
    add("gumbel", k, [2], mode="bad")
    add("rademacher", k, [5], "float32")
    add("rademacher", k, [5], "int8")
    for fn in ("normal", "exponential", "gumbel", "laplace", "logistic", "uniform"):
        add(fn, k, [2], "int32")
    add("bits", k, [2], "int32")
    add("bits", k, [2], "float32")
    add("split", k, 2.0)
    add("uniform", k, [2.5])
    add("normal", k, [1000])
    add("normal", k, [3, 2], "complex64")
    for shape in ([64], [3, 5]):
        add("gumbel", k, shape, mode="highest")
    add("categorical", k, lg, mode="high")
    add("choice", k, 5, [3], p=p5, replace=False, mode="high")
    for bad in BAD_KEYS:
        for fn, args in (("uniform", []), ("split", []), ("fold_in", [1]), ("normal", [[2]]),
                         ("bits", [])):
            add(fn, bad, *args)
    add("uniform", k, [3], "float32", 0.0, arr([1, 2], "float32"))
    return out


BAD_KEYS = {"key_len3": arr([0, 0, 0], "uint32"), "key_int32": arr([0, 0], "int32"),
            "key_batch": arr(np.zeros((3, 2)), "uint32"), "key_list": [0, 0], "key_int": 5,
            "key_scalar": arr(7, "uint32")}


def call(case, table):
    fn = case["fn"]
    if case["key"] in BAD_KEYS:
        key = decode(BAD_KEYS[case["key"]])
        key = list(key) if isinstance(key, tuple) else key
    else:
        key = None if case["key"] is None else jnp.asarray(table[case["key"]], jnp.uint32)
    args = [decode(a) for a in case["args"]]
    kwargs = {k: decode(v) for k, v in case["kwargs"].items()}
    if fn == "PRNGKey":
        return R.PRNGKey(*args)
    if fn == "key_data_of_key":
        return R.key_data(R.key(*args))
    return getattr(R, fn)(key, *args, **kwargs)


def kernel_inputs():
    """Inputs for XLA's float32 log, log1p, exp, erf, erf_inv and rsqrt kernels, and float16
    log."""
    rs = np.random.RandomState(0)
    f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
    near_one = 1 - np.logspace(-7.3, -0.01, 300)
    return {
        "log": f32(np.concatenate([np.logspace(-37.5, 38, 600), rs.uniform(0, 2, 900),
                                   [0, np.inf, -1, 1, 2]])),
        "log1p": f32(np.concatenate([rs.uniform(-1, 1, 900), -near_one, np.logspace(-20, 3, 300),
                                     [-1, 0, 0.41421356, -0.41421356, np.inf]])),
        "exp": f32(np.concatenate([rs.uniform(-10, 10, 900), np.linspace(-100, 100, 601)])),
        "erf": f32(np.concatenate([rs.uniform(-5, 5, 900), np.linspace(-4, 4, 601)])),
        "erf_inv": f32(np.concatenate([rs.uniform(-1, 1, 900), near_one, -near_one,
                                       [-1, 1, 0]])),
        "log_f16": np.asarray(rs.uniform(1e-4, 60000, 600), np.float16),
        "rsqrt": np.concatenate([rs.randint(0, 2**32, 3000, dtype=np.uint64).astype(
            np.uint32).view(np.float32), f32(rs.uniform(0.5, 200, 3000)),
            f32([0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan, 1, 2, 4, -1])]),
    }


def kernels():
    from jax import lax
    fns = {"log": lax.log, "log1p": lax.log1p, "exp": lax.exp, "erf": lax.erf,
           "erf_inv": lax.erf_inv, "log_f16": lax.log, "rsqrt": lax.rsqrt}
    out = {}
    for name, x in kernel_inputs().items():
        y = np.asarray(jax.jit(fns[name])(x))
        out[name] = {"x": encode_result(x), "y": encode_result(y)}
    return out


def grad_cases():
    """Gradients (second derivatives where `order` is 2) of `sum(weights * fn(key, *args))` in
    args[argnum]: JAX differentiates the gamma family's draws by implicit reparameterisation,
    truncated normal draws through erf and erf_inv."""
    spread = arr(np.geomspace(0.01, 100, 200), "float32")
    weights = arr(np.random.RandomState(1).standard_normal((50, 4)), "float32")
    out = []
    for kk in ("s0", "chain"):
        out += [{"fn": "gamma", "key": kk, "args": [spread], "argnum": 0},
                {"fn": "loggamma", "key": kk, "args": [spread], "argnum": 0},
                {"fn": "beta", "key": kk, "args": [spread, arr(np.geomspace(30, 0.02, 200),
                                                              "float32")], "argnum": 1},
                {"fn": "gamma", "key": kk, "args": [arr([0.3, 2.0, 7.5], "float32"), [40, 3]],
                 "argnum": 0},
                {"fn": "gamma", "key": kk, "args": [spread, None, "float16"], "argnum": 0},
                {"fn": "dirichlet", "key": kk, "args": [arr([0.2, 1.0, 3.0, 40.0], "float32"),
                                                       [50]], "argnum": 0, "weights": weights}]
        out += [{"fn": fn, "key": kk, "args": [arr(a, "float32"), [20]], "argnum": 0,
                 "order": 2} for fn in ("gamma", "loggamma") for a in (0.4, 2.0, 9.0)]
        out += [{"fn": "truncated_normal", "key": kk, "args": [arr(np.linspace(-3, 1, 30),
                                                                   "float32"), 2.0, [30]],
                 "argnum": 0},
                {"fn": "truncated_normal", "key": kk, "args": [-1.0, arr(np.linspace(
                    -0.5, 4, 30), "float32"), [30]], "argnum": 1}]
    return out


def grad_of(case, table):
    key = jnp.asarray(table[case["key"]], jnp.uint32)
    args = [decode(a) for a in case["args"]]
    weights = decode(case.get("weights", 1.0))

    def loss(x):
        args[case["argnum"]] = x
        return (getattr(R, case["fn"])(key, *args).astype(jnp.float32) * weights).sum()
    if case.get("order") == 2:  # JAX differentiates its gamma gradient in forward mode only
        return jax.jacfwd(jax.grad(loss))(args[case["argnum"]])
    return jax.grad(loss)(args[case["argnum"]])


def main():
    table = keys()
    records = []
    for case in cases():
        try:
            case["result"] = encode_result(call(case, table))
        except Exception as e:  # noqa: BLE001 - recording JAX's error is the point
            message = re.sub(r" at 0x[0-9a-f]+", "", str(e).split("\n")[0])  # deterministic
            case["error"] = {"type": type(e).__name__, "message": message}
        records.append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "random_jax_0_10_2.json")
    with open(path, "w") as f:
        json.dump({"jax_version": jax.__version__, "keys": table, "bad_keys": BAD_KEYS,
                   "kernels": kernels(), "cases": records,
                   "grads": [dict(c, result=encode_result(grad_of(c, table)))
                             for c in grad_cases()]}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(records)} cases to {path}")


if __name__ == "__main__":
    main()
