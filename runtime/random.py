"""`kiln.random`: JAX's counter-based PRNG, with the same bits as JAX 0.10.2.

Keys are threefry2x32 keys, as under JAX's default configuration (`jax_threefry_partitionable`
on, x64 off). `PRNGKey(seed)` returns raw `uint32[2]` key data; `key(seed)` returns a typed key
(`PRNGKeyArray`, dtype `key<fry>`) that wraps the same data; every function takes either and
returns keys of the kind it was given.

Everything is plain Python over `kiln.lax`, so that the compiler specialises kiln's own PRNG
under `jit`, `vmap` and `grad` (no Python `if` or `while` on traced values: the gamma family's
rejection loops are `lax.while_loop`s):

* the threefry2x32 hash (20 rounds, rotations 13 15 26 6 / 17 29 16 24, key schedule with
  0x1BD11BDA) runs on uint32 arrays; random bits and `split` hash the 64-bit counters 0..n-1
  (high and low words) of the flattened output shape, 32-bit draws xor the two output words,
  and `fold_in(key, d)` hashes the counter (0, d), as JAX's partitionable threefry does;
* floating samplers follow JAX's algorithms step by step, and also what XLA's CPU compiler
  makes of them, since that is what fixes JAX's bits: it contracts a multiply feeding an add
  into one fused multiply-add, computes `log`, `log1p`, `exp`, `erf` and `erf_inv` with its own
  polynomials (float16 through float32), `rsqrt` by two Newton steps from the CPU's 12-bit
  estimate (`vrsqrtps`), adds short rows in order, rewrites `x / c` as `x * (1 / c)` for a
  constant or broadcast `c` and `a / sqrt(b)` as `a * rsqrt(b)`, folds constant shifts, and
  flushes denormals to zero. The private `_fma`, `_log`, `_log1p`, `_exp`, `_erf`, `_erf_inv`,
  `_rsqrt` (with the estimate table of an Intel CPU), `_row_sum` and `_ftz` reproduce those,
  so every sampler is bit-exact, except where XLA leaves its own code: its float32 `pow` is
  glibc's `powf` (not always correctly rounded, unlike kiln's), so `gamma` with a < 1 moves by
  an ulp or two in about one draw in a thousand; other CPUs may have other `rsqrt` estimates
  (AMD's are not Intel's), and JAX's gamma-family draws change with them; `dirichlet` rows
  longer than 16 are summed in XLA's vectorised order, and `dirichlet` calls beyond a few
  thousand rows go to YNNPACK's fusion, with its own `log` and `exp`; kiln reproduces neither.
  `_fma` binds the `fma` primitive (one rounding; a native fused multiply-add under `jit`),
  which `kiln.lax` does not expose because JAX's `lax` has no fused multiply-add.
  Under x64, float64 samplers use the `kiln.lax` primitives for those functions instead;
* derivatives are JAX's: the kernels' bit manipulation has no derivative, so values that may
  be differentiated (truncated_normal's bounds, the gamma family's outputs) go through
  `_smooth` versions carrying the functions' own derivatives; the gamma family is
  differentiable in its shape parameters by implicit reparameterisation (`_with_gamma_grad`),
  not through the rejection sampler, to second order.

Distributions that transform these samplers (cauchy, lognormal, pareto, t, chisquare, f, ...)
are in `_random_more`; some of them give JAX's bits exactly, the others agree to an ulp or
two (that module's docstring lists which). Those that need linear algebra or several samplers
(multivariate_normal, orthogonal, ball, generalized_normal, wald) are in `_random_linalg`.
The counting distributions (poisson, binomial, multinomial) are in `_random_discrete`.

Called outside `jit`, the functions of a key compile themselves once a call's signature
repeats, with the eager calls' bits (eager_tiers.py; `_STATIC` below names the parameters
fixed in the compiled code).

(The names are defined in `_random`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
import inspect as _inspect

from ._random import *  # noqa: F401,F403
from ._random_more import *  # noqa: F401,F403
from ._random_linalg import *  # noqa: F401,F403
from ._random_discrete import *  # noqa: F401,F403
from ._random import __all__ as _basic
from ._random_more import __all__ as _more
from ._random_linalg import __all__ as _linalg
from ._random_discrete import __all__ as _discrete

__all__ = list(_basic) + list(_more) + list(_linalg) + list(_discrete)
from .wrappers import user_facing_names  # noqa: E402
from .eager_tiers import tier_names  # noqa: E402

user_facing_names(globals())

# Eager calls of the functions of a key compile once their signature repeats (eager_tiers.py),
# with these parameters' Python values fixed in the compiled code, as JAX's samplers take
# them as static arguments; every other Python number is passed to it.
_STATIC = frozenset({"shape", "dtype", "axis", "replace", "independent", "mode", "method",
                     "unroll", "out_sharding", "num"})
_STATIC_ALSO = {"permutation": {"x"}, "choice": {"a"}, "orthogonal": {"n", "m"},
                "ball": {"d", "p"}}
# Not compiled: `clone` is no computation; the others compile with other roundings than the
# eager operations' (tan, pow, contracted multiply-adds, LAPACK's sums), and a key's draws
# must not change by an ulp between its second and third call.
_UNTIERED = {"clone", "cauchy", "ball", "wald", "multivariate_normal", "orthogonal"}
tier_names(globals(), {
    _name: _STATIC | _STATIC_ALSO.get(_name, set()) for _name, _fn in
    ((n, globals()[n]) for n in __all__)
    if callable(_fn) and not isinstance(_fn, type) and _name not in _UNTIERED and
    next(iter(_inspect.signature(_fn).parameters), None) == "key"})
del user_facing_names, tier_names
