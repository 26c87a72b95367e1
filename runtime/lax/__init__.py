"""`kiln.lax`: JAX's lax API — primitives under JAX's names, plus structured control flow."""
from ._ops import *  # noqa: F401,F403
from ._ops import (RoundingMethod, Precision, GatherScatterMode, abs, pow, max, min,  # noqa: F401
                   complex, round, slice, reduce, bitwise_not)
from ._gather_scatter import *  # noqa: F401,F403
from ._shaping import *  # noqa: F401,F403
from ._special import *  # noqa: F401,F403
from ._precision import *  # noqa: F401,F403
from ._ragged import *  # noqa: F401,F403
from ._approx_topk import *  # noqa: F401,F403
from ._bits import *  # noqa: F401,F403
from ._staging import *  # noqa: F401,F403
from ._solvers import *  # noqa: F401,F403
from ._fft import FftType, fft  # noqa: F401
from ._conv import *  # noqa: F401,F403
from ._windows import *  # noqa: F401,F403
from ._control_flow import (while_loop, fori_loop, scan, cond, switch, map,  # noqa: F401
                            associative_scan)
from ._parallel import (psum, pmean, pmax, pmin, all_gather, psum_scatter,  # noqa: F401
                        axis_index, axis_size, ppermute, pshuffle, all_to_all, pswapaxes)
from ._rng import rng_uniform  # noqa: F401
from ._scaled_dot import scaled_dot  # noqa: F401
from ._parallel_more import pcast, psend, precv, ragged_all_to_all  # noqa: F401
from . import linalg  # noqa: F401,E402
from ..wrappers import user_facing_names  # noqa: E402

__all__ = [name for name in dir() if not name.startswith("_") and name not in ("user_facing_names", "linalg")]
user_facing_names(globals())
del user_facing_names


def __getattr__(name):
    """`<name>_p`: kiln's primitive `<name>` (`stop_gradient_p`, `add_p`, ...), the object its
    equations in kiln's SSA hold (`eqn.prim`), where JAX's lax has its primitive of that
    name. Libraries use them as keys of their own tables (equinox)."""
    from ..compiler.primitives import PRIMITIVES
    if name.endswith("_p") and name[:-2] in PRIMITIVES:
        return PRIMITIVES[name[:-2]]
    raise AttributeError(f"module 'kiln.lax' has no attribute {name!r}")
