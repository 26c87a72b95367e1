"""The primitive set: one module per family; importing this package registers all of them in
`PRIMITIVES` (name -> Primitive)."""
import warnings

# Primitive implementations follow XLA, where overflow, division by zero and NaN results are
# values, not errors: NumPy's floating-point warnings raised inside them are silenced (only for
# these modules; cheaper than entering np.errstate on every eager call).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"kiln\.compiler\.primitives\.")

from .core import PRIMITIVES, Primitive  # noqa: F401
from . import elementwise, structural, indexing, reductions, linalg, sorting  # noqa: F401
