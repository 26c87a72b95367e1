"""`jax.errors`' names for the errors kiln raises, so that a handler written for JAX
(`except jax.errors.ConcretizationTypeError:` in a compiled function's `try`, see
docs/control_flow.md) catches kiln's. kiln raises one error, `ConcretizationError` (a
TypeError), wherever JAX raises one of its tracer-conversion errors, so those names all stand
for it. `JaxRuntimeError` is what a failure while a program runs raises (an FFI handler's
error, kiln.ffi); `KeyReuseError` is what kiln.random's key-reuse checker raises
(runtime/_key_reuse.py)."""
from .compiler import errors as _errors
from .compiler.errors import NonConcreteBooleanIndexError
from ._key_reuse import KeyReuseError

ConcretizationTypeError = _errors.ConcretizationError
TracerBoolConversionError = _errors.ConcretizationError
TracerIntegerConversionError = _errors.ConcretizationError
TracerArrayConversionError = _errors.ConcretizationError
JaxRuntimeError = _errors.RuntimeFailure

__all__ = ["ConcretizationTypeError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "TracerArrayConversionError",
           "NonConcreteBooleanIndexError", "JaxRuntimeError", "KeyReuseError"]
