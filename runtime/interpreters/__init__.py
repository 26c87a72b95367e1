"""`kiln.interpreters`, as far as kiln has JAX's `jax.interpreters`: the rule tables a
user-defined primitive (`kiln.extend.core.Primitive`) registers its derivative, batching and
lowering rules in (`ad`, `batching`, `mlir`), `xla.apply_primitive`, and `partial_eval`'s
`trace_to_jaxpr_nounits` (partial evaluation of a function, with kiln's SSA for the part that
waits). kiln has no jaxprs, so JAX's `pxla` has nothing to map to; see docs/extend.md."""
from . import ad, batching, mlir, partial_eval, xla  # noqa: F401

__all__ = ["ad", "batching", "mlir", "partial_eval", "xla"]
