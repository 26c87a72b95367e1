"""The `debug_nans` and `debug_infs` options: when one is on, every eager operation and every
call of a jitted function checks its floating results and raises `FloatingPointError` naming
the operation (or the jitted function) that made a NaN (an infinity). After a jitted call
makes one, jit runs the function again operation by operation, as JAX runs its de-optimized
version, so that the error names the operation inside it (runtime/jit.py, `_deoptimized`).
Off (the default), the check costs one
attribute read per operation. Results on a device (a GPU, a PJRT device) are copied to the host
to be checked."""
import numpy as np

from .compiler.backends.cuda.device import DeviceBuffer
from .compiler.config import config


class _State:
    """`on`: debug_nans or debug_infs is on. A slot, which native code reads at its offset
    (jit's native call on PJRT devices: runtime/jit.py's `native_call_checks`)."""
    __slots__ = ("on",)

    def __init__(self):
        self.on = False


STATE = _State()


def _update(key=None, value=None):
    STATE.on = bool(config.read("debug_nans") or config.read("debug_infs"))


config.on_change(_update)
_update()


def check(values, what):
    """Raise FloatingPointError if a value of `values` (NumPy arrays) has a NaN (with
    `debug_nans`) or an infinity (with `debug_infs`); `what` names their maker."""
    nans, infs = config.read("debug_nans"), config.read("debug_infs")
    for v in values:
        v = np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else \
            v.to_host() if type(v) is DeviceBuffer else v
        if getattr(v, "dtype", None) is None or v.dtype.kind not in "fc":
            continue
        if nans and np.isnan(v).any():
            raise FloatingPointError(f"invalid value (nan) encountered in {what}")
        if infs and np.isinf(v).any():
            raise FloatingPointError(f"invalid value (inf) encountered in {what}")
