"""The primitive set: one module per family; importing this package registers all of them in
`PRIMITIVES` (name -> Primitive) and their rules in the rule tables (`core`).

Beside the families: `core` (the Primitive, the registry and the rule tables), the
vocabulary rules are written in (`emit`, `batching`, `rule_forms`), how rules reach the
transforms of the layer above for their regions (`regions`), and the NumPy interpreter of SSA
functions (`interpret`), which control flow's implementations and the reference backend run."""
import warnings

# Primitive implementations follow XLA, where overflow, division by zero and NaN results are
# values, not errors: NumPy's floating-point warnings raised where kiln calls an implementation
# (here, in dispatch, in eager fast paths) are silenced. The filter matches only warnings
# attributed to kiln's own modules, and is cheaper than entering np.errstate on every call.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"kiln(\.|$)")

from .core import PRIMITIVES, Primitive  # noqa: F401
from . import elementwise, structural, indexing, reductions, linalg, decompositions, lu, qr, eigh, eig, schur, svd, fft, sorting, control, callbacks, autodiff, solves, collectives, processes, partitioning, partition_indexing, partition_rows, fusion, convolution, windows  # noqa: F401
