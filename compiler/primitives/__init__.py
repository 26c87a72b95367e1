"""The primitive set: one module per family; importing this package registers all of them in
`PRIMITIVES` (name -> Primitive) and their rules in the rule tables (`core`).

Beside the families: `core` (the Primitive, the registry and the rule tables), the
vocabulary rules are written in (`emit`, `batching`, `rule_forms`), the Taylor-mode rules of
`kiln.experimental.jet` (`taylor`), how rules reach the transforms of the layer above for
their regions (`regions`), the NumPy interpreter of SSA functions (`interpret`), which control
flow's implementations and the reference backend run, and NumPy's floating-point error state
while implementations run for a user (`quiet`)."""
import warnings

# Primitive implementations follow XLA, where overflow, division by zero and NaN results are
# values, not errors. Where kiln runs them for a user (eager dispatch, the reference backend),
# NumPy's error state is set to ignore (quiet.py), whatever the user's warning filters are. This
# filter catches the rest under the default filters: warnings attributed to kiln's own modules
# that compute with NumPy on the host (constant folding, host callbacks, helpers).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"kiln(\.|$)")

from .core import PRIMITIVES, Primitive  # noqa: F401
from . import elementwise, structural, indexing, reductions, linalg, decompositions, lu, qr, eigh, eig, schur, svd, fft, sorting, control, callbacks, autodiff, solves, collectives, processes, partitioning, partition_indexing, partition_rows, fusion, convolution, windows, checks, ffi, user, manual, taylor  # noqa: F401
