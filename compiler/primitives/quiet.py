"""NumPy's floating-point error state while kiln runs primitive implementations eagerly.

Primitives follow XLA, where overflow, division by zero and invalid operations give IEEE
values (inf, nan) without a word; NumPy reports them as RuntimeWarnings, which a user's
warning filters (pytest's per-test filters, `warnings.simplefilter("error")`) would show or
raise. Where kiln runs implementations for a user (eager dispatch, the reference backend),
`token = ignore()` turns NumPy's reports off for the current thread and context, and
`restore(token)` turns the caller's state back on, so the user's own NumPy code keeps its
warnings.

With NumPy 2 the state is a context variable, set here to a value made once: a pair costs
about 0.1 us, where entering and leaving `np.errstate` costs several. NumPy 1.26 keeps the
state in a per-thread object that `np.seterr` changes; the pair then goes through it.
"""
import functools

import numpy as np

try:
    from numpy._core.umath import _extobj_contextvar as _STATE
except ImportError:   # NumPy 1.26
    _STATE = None

if _STATE is not None:
    with np.errstate(all="ignore"):
        _IGNORE = _STATE.get()
    ignore = functools.partial(_STATE.set, _IGNORE)
    restore = _STATE.reset
else:
    ignore = functools.partial(np.seterr, all="ignore")

    def restore(token):
        np.seterr(**token)
