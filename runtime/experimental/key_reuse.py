"""`kiln.experimental.key_reuse`: the module JAX documents its key-reuse checker in. Like
JAX 0.10.2's, it exports no names: JAX's checker is switched on by the `jax_debug_key_reuse`
option (`jax.debug_key_reuse(True)` or `jax.config.update`) and raises `KeyReuseError` when a
key is consumed twice. kiln has no such checker: `kiln.debug_key_reuse` accepts only False and
refuses True with a `ValueError` that says so (docs/differences.md)."""

__all__ = []
