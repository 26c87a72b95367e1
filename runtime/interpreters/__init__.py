"""`kiln.interpreters`, as far as kiln has JAX's `jax.interpreters`: the rule tables a
user-defined primitive (`kiln.extend.core.Primitive`) registers its derivative, batching and
lowering rules in (`ad`, `batching`, `mlir`), and `xla.apply_primitive`. kiln has no tracers
or jaxprs, so JAX's `partial_eval` and `pxla` have nothing to map to; see docs/extend.md."""
from . import ad, batching, mlir, xla  # noqa: F401

__all__ = ["ad", "batching", "mlir", "xla"]
