"""The primitive set: one module per family; importing this package registers all of them in
`PRIMITIVES` (name -> Primitive)."""
import warnings

# Primitive implementations follow XLA, where overflow, division by zero and NaN results are
# values, not errors: NumPy's floating-point warnings raised where kiln calls an implementation
# (here, in dispatch, in eager fast paths) are silenced. The filter matches only warnings
# attributed to kiln's own modules, and is cheaper than entering np.errstate on every call.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"kiln(\.|$)")

from .core import PRIMITIVES, Primitive  # noqa: F401
from . import elementwise, structural, indexing, reductions, linalg, sorting, control, callbacks, autodiff, collectives, fusion  # noqa: F401
