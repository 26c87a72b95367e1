"""`kiln.scipy.integrate`: `trapezoid`, as `jax.scipy.integrate` has it (the trapezoidal
rule along an axis, with sample points `x` or spacing `dx`): `kiln.numpy.trapezoid`."""
from ..numpy import trapezoid

__all__ = ["trapezoid"]
