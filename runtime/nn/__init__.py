"""`kiln.nn`: JAX's neural-network functions (activations, softmax, one_hot, ...).

Every function is plain Python over `kiln.numpy` and `kiln.lax`, written the way JAX writes it
(`jax._src.nn.functions`), so values, dtypes and weak types match JAX's: `softmax` subtracts the
maximum before exponentiating, `log_sigmoid(x)` is `-softplus(-x)`, `softplus` is
`logaddexp(x, 0)`. `logsumexp` lives here too; `kiln.scipy.special.logsumexp` is the same function.
Weight initializers are in `kiln.nn.initializers`.
`dot_product_attention` is JAX's "xla" implementation (`_attention`). JAX's microscaling
helpers (`scaled_matmul`, `scaled_dot_general`, `get_scaled_dot_general_config`) compute in
float32 the values JAX's float8/float4 blocks hold (`_scaled`).

(The names are defined in `_functions`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._functions import *  # noqa: F401,F403
from ._functions import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names

from ..eager_tiers import tier_names  # noqa: E402

# Eager calls of these compile once a signature repeats (eager_tiers.py), with JAX's static
# parameters; the compiled code gives the eager bits (comparisons, selections, + - * / and
# sqrt). The activations that run exp, log, tanh or erf (sigmoid, softplus, gelu, elu, ...),
# and the softmax family (exp, sums), round otherwise when compiled and stay eager
# (docs/performance.md).
tier_names(globals(), {"one_hot": ("num_classes", "dtype", "axis"), "squareplus": (),
                       "sparse_plus": (), "sparse_sigmoid": (), "hard_sigmoid": (),
                       "hard_silu": (), "hard_tanh": ()})
del tier_names

from ..eager_tiers import tier_composites  # noqa: E402

# The others run as one unit from the second eager call of a signature, with the eager bits
# (eager_tiers.composite).
tier_composites(globals())
del tier_composites
