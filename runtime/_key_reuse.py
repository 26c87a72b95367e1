"""kiln.random's key-reuse checker, on while the `debug_key_reuse` option is (JAX's
`jax_debug_key_reuse`: `kiln.debug_key_reuse(True)`, `kiln.config.update("debug_key_reuse",
True)` or `JAX_DEBUG_KEY_REUSE=1`).

Every kiln.random function that draws from a typed key (`kiln.random.key`), `split`
included, consumes it; `fold_in`, `key_data`, `key_impl` and `clone` do not, and raw uint32
keys are not checked, as in JAX. Consuming a key twice raises `KeyReuseError` (a
`TypeError`, `kiln.errors.KeyReuseError`):
- eagerly, a consumed key Array is remembered (weakly) until it is freed;
- while kiln specialises a function (`jit`, and `grad`, `vmap` and the other transforms,
  which specialise too), a traced key consumed twice in the same function body (or the same
  loop body or branch) is refused when the function is compiled.
Not checked yet: a key consumed in the function's body and again in a branch or loop body
inside it, an element of a key array taken out twice (each `keys[0]` is a new value), and keys
passed to a jitted function (JAX marks a key argument consumed after a
call of a function that consumes it, and refuses it at the next call).
"""
import weakref

from .compiler.ir.builder import current
from .dispatch import is_traced

_CONSUMED = weakref.WeakValueDictionary()       # id -> eager key data already drawn from
_TRACED = weakref.WeakKeyDictionary()           # builder -> {id(traced key data): data}


class KeyReuseError(TypeError):
    """A PRNG key was consumed twice while `debug_key_reuse` is on (JAX's
    `jax.errors.KeyReuseError`)."""


def consume(data, name):
    """Record that `name` draws from the typed key whose data is `data`, refusing a second
    draw."""
    if is_traced(data):
        seen = _TRACED.setdefault(current(), {})
        if id(data) in seen:
            raise KeyReuseError(
                f"In {name}, argument 0 is already consumed: the function draws twice from "
                "one PRNG key. Split it (kiln.random.split) to get one key per draw")
        seen[id(data)] = data
        return
    if _CONSUMED.get(id(data)) is data:
        raise KeyReuseError(
            f"Previously-consumed key passed to {name} at index 0: a kiln.random function "
            "already drew from this key. Split it (kiln.random.split) to get one key per draw")
    _CONSUMED[id(data)] = data
