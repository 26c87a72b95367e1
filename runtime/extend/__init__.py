"""`kiln.extend`, as far as kiln has JAX's `jax.extend`: `core`, for primitives defined by
users (docs/extend.md), with `core.primitives` (kiln's primitives under JAX's names);
`linear_util`, JAX's wrapped functions (`wrap_init`, `WrappedFun` and its transformations),
which `kiln.api_util.flatten_fun` transforms; and `source_info_util.register_exclusion`.
JAX's other `jax.extend` modules reach its MLIR and XLA backends, which kiln does not have."""
from . import core, linear_util, source_info_util  # noqa: F401

__all__ = ["core", "linear_util", "source_info_util"]
