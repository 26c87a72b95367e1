"""`kiln.experimental.key_reuse`: the module JAX documents its key-reuse checker in. Like
JAX 0.10.2's, it exports no names: the checker is switched on by the `debug_key_reuse` option
(`kiln.debug_key_reuse(True)`, JAX's `jax_debug_key_reuse`) and raises
`kiln.errors.KeyReuseError` when a key is consumed twice (runtime/_key_reuse.py)."""

__all__ = []
