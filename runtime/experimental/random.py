"""`kiln.experimental.random`: JAX's stateful generator, `stateful_rng(seed=None, *,
impl=None)` and `StatefulPRNG`.

A `StatefulPRNG` holds a typed base key and a counter in a `kiln.Ref`. Each draw takes the
key `fold_in(base_key, counter)` and adds one to the counter, so the n-th draw of a generator
seeded with s uses the same key, and gives the same values, as in JAX; the methods (`key`,
`random`, `uniform`, `normal`, `integers`, `split`, `spawn`) are JAX's, with NumPy-style
`size` arguments. A generator made outside `jit` and used inside it advances as the Ref
rules say (runtime/refs.py): each call of the jitted function reads the counter and writes it
back. Without a seed, one is drawn from NumPy's entropy source, which only eager code may do,
as in JAX.
"""
import dataclasses
import operator

import numpy as np

from .. import numpy as jnp
from .. import random as _random
from ..dispatch import is_traced
from ..dtypes import prng_key
from ..ref import addupdate, get
from ..refs import Ref, new_ref
from ..tree_util import register_dataclass

__all__ = ["StatefulPRNG", "stateful_rng"]


def _size(size, *args):
    if size is None:
        return np.broadcast_shapes(*(np.shape(arg) for arg in args))
    if isinstance(size, (int, np.integer)):
        return (operator.index(size),)
    return tuple(operator.index(n) for n in size)


@register_dataclass
@dataclasses.dataclass(frozen=True)
class StatefulPRNG:
    """A random generator that advances by itself (make one with `stateful_rng`)."""
    _base_key: object
    _counter: object

    def __post_init__(self):
        key = self._base_key
        if not (hasattr(key, "dtype") and jnp.issubdtype(key.dtype, prng_key)):
            raise ValueError(f"Expected base_key to be a typed PRNG key; got {key}")
        if not isinstance(self._counter, Ref):
            raise ValueError(f"Expected counter to be a scalar integer ref; got {self._counter}")

    def key(self, shape=()):
        """A new key (or an array of `shape` keys), advancing the generator."""
        if self._base_key.shape:
            raise ValueError("cannot operate on split stateful generator: draw from it under "
                             "kiln.vmap, which gives each lane one of its generators")
        key = _random.fold_in(self._base_key, get(self._counter))
        addupdate(self._counter, ..., 1)
        shape = _size(shape)
        return _random.split(key, shape) if shape else key

    def random(self, size=None, dtype=float):
        """Floats uniform in [0, 1)."""
        return _random.uniform(self.key(), shape=_size(size), dtype=dtype)

    def uniform(self, low=0, high=1, size=None, *, dtype=float):
        """Floats uniform in [low, high)."""
        return _random.uniform(self.key(), _size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def normal(self, loc=0, scale=1, size=None, *, dtype=float):
        """Normally distributed floats of mean `loc` and standard deviation `scale`."""
        draws = _random.normal(self.key(), _size(size, loc, scale), dtype)
        return (jnp.asarray(loc) + jnp.asarray(scale) * draws).astype(dtype)

    def integers(self, low, high=None, size=None, *, dtype=int):
        """Integers uniform in [low, high) ([0, low) with one bound)."""
        if high is None:
            low, high = 0, low
        return _random.randint(self.key(), _size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def split(self, num):
        """One generator holding `num` (an int or a shape) independent ones, for `vmap`."""
        return StatefulPRNG(self.key(num), new_ref(jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int):
        """A list of `n_children` independent generators."""
        return [StatefulPRNG(key, new_ref(0)) for key in self.key(n_children)]


def stateful_rng(seed=None, *, impl=None):
    """A new `StatefulPRNG` seeded with `seed` (from NumPy's entropy source if None)."""
    if seed is None:
        from ..compiler.ir.builder import current
        if current() is not None or is_traced(seed):
            raise TypeError("When used within transformed code, "
                            "kiln.experimental.random.stateful_rng() requires an explicit seed "
                            "to be set.")
        seed = np.int64(np.random.SeedSequence().entropy & np.iinfo(np.int64).max)
    return StatefulPRNG(_random.key(seed, impl=impl), new_ref(0))
