"""`kiln.lax.rng_uniform(a, b, shape)`: JAX's stateful generator of values uniform in [a, b).

XLA keeps the generator's state inside the executable; kiln keeps it on the host: one NumPy
`Generator` per process (PCG64, seed 0, so a program's draws repeat from run to run), read
through a host callback (the `pure_callback` primitive), so a compiled function draws new
values at every call. Each call site gets its own callback, so that simplification never merges
two draws. For a floating `a` the host draws u in [0, 1) and kiln computes `a + (b - a) * u`,
kept below `b`, so the result is differentiable in `a` and `b` (JAX's has no derivative); for
an integer `a` the host draws the integers. Under `vmap` each example draws its own values.
"""
import itertools

import numpy as np

from ..array import Array, to_array
from ..compiler.ir.builder import current
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.callbacks import call_host, register_host_function
from ..dispatch import bind, is_traced
from . import _ops

__all__ = ["rng_uniform"]

_GENERATOR = np.random.Generator(np.random.PCG64(0))
_CALL_SITES = itertools.count()


class _Draw:
    """Host function: integers in [a, b) for integer operands, else u in [0, 1)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype

    def __call__(self, a, b):
        if self.dtype.kind in "iu":
            if b <= a:   # JAX leaves the result undefined; kiln returns a
                return [np.full(self.shape, a, self.dtype)]
            return [_GENERATOR.integers(a, b, self.shape, dtype=self.dtype, endpoint=False)]
        u = _GENERATOR.random(self.shape).astype(self.dtype)
        return [np.minimum(u, np.nextafter(self.dtype.type(1), self.dtype.type(0)))]


def _draw(a, b, shape):
    host = _Draw(shape, a.dtype)
    results = ((a.dtype.name, shape),)
    a, b = _ops.stop_gradient(a), _ops.stop_gradient(b)
    builder = current()
    if builder is None and not (is_traced(a) or is_traced(b)):
        return Array(call_host(host, [a, b], results)[0])
    token = register_host_function(("rng_uniform", next(_CALL_SITES)), host)
    params = dict(callback=token, results=results, vmap_method="sequential")
    if builder is not None:
        return builder.bind(P["pure_callback"], (a, b), params)[0]
    return bind(P["pure_callback"], a, b, **params)[0]


def rng_uniform(a, b, shape):
    """Values uniform in [a, b) of `a`'s dtype and the given shape, from kiln's host
    generator (each call draws new ones)."""
    a, b = to_array(a, "lax.rng_uniform"), to_array(b, "lax.rng_uniform")
    shape = tuple(int(n) for n in shape)
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got {a.dtype} "
                         f"and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} and "
                         f"{b.shape}.")
    if a.dtype.kind not in "iuf":
        raise TypeError(f"lax.rng_uniform takes integer or floating bounds, got {a.dtype} "
                        f"(use kiln.random for other draws)")
    out = _draw(a, b, shape)
    if a.dtype.kind == "f":
        value = _ops.add(a, _ops.mul(_ops.sub(b, a), out))
        top = _ops.nextafter(b, a)
        out = _ops.select(_ops.gt(b, a) & _ops.ge(value, b), _ops.broadcast_in_dim(
            top, shape, ()), value)
    weak = a.weak_type and b.weak_type
    if weak:
        out = bind(P["convert_element_type"], out, new_dtype=out.dtype, weak_type=True)
    return out
