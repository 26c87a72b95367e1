"""Cost figures of a function in SSA form, counted as XLA's HloCostAnalysis counts an HLO
module: what `Lowered.cost_analysis()` / `Compiled.cost_analysis()` return.

`cost_analysis(fn)` walks `fn`'s equations once (regions as the control-flow rules below say)
and returns a dict of floats with XLA's keys, each present only when not zero, as XLA's:

- "flops": one per element of the result for elementwise operations (comparisons, converts
  and bit operations too); `fma` two; `integer_pow` the multiplies of square-and-multiply
  (and a divide for a negative power); `dot_general` 2 * (result elements) * (contracted
  size); `conv_general_dilated` 2 * (result elements) * (kernel window) * (input features
  per group); reductions (input elements - result elements), as XLA counts a reduce whose
  computation is one operation; cumulative reductions (result elements) * (axis size - 1),
  as XLA counts the reduce-window JAX lowers them to; reduce-windows (result elements) *
  (window elements - 1); `sort` n * ceil(log2 n) over the n elements of the first operand;
  `fft` 8 * (product of floor(log2 length)) * (complex elements); scatters one per update
  element that combines (add, mul, max, min); `triangular_solve` (elements of b) * (order
  of a);
- "transcendentals": one per element of the result for `TRANSCENDENTAL`'s operations
  (instead of a flop), as XLA does for exp, log, logistic, pow, sqrt, rsqrt, cbrt, tanh,
  sin, cos, tan, expm1, log1p, atan2 and erf; kiln's other transcendental primitives
  (asin, sinh, lgamma, erf_inv, ...) count the same way, where JAX's lowering expands them
  into several HLO operations and counts more;
- "bytes accessed": the bytes of every operand read and every result written, per
  equation; with "bytes accessed{i}{}" (operand i's bytes over all equations),
  "bytes accessedout{}" (the results') and "utilization{i}{}" (how many equations read an
  operand i, each weighted by the fraction of it read). Slices, dynamic slices and gathers
  read of their operand only what they return; `dynamic_update_slice` reads and writes only
  the update (XLA's in-place count). A `fusion` (after kiln's passes) reads its operands and
  writes its results once, as XLA's fused computations: the figures of its body count only
  for flops and transcendentals;
- "optimal_seconds": -1.0 when the function has an operation that JAX's CPU lowering makes
  a library call (the LAPACK decompositions: cholesky, qr, svd, eig, eigh, lu, schur,
  hessenberg), as XLA reports for custom calls; those count only their bytes.

Control flow, as XLA's HloCostAnalysis: a `while_loop` counts its condition and body once
(XLA cannot know the trip count), and so does `scan` (a while loop in HLO); a `cond` counts,
per key, the largest figure of its branches; calls (`remat`, `custom_jvp_call`,
`custom_vjp_call`, `linear_solve`, `root`) count the region they run once. Operations with
no rule in the table (collectives, callbacks, the autodiff tape) count only bytes.
"""
import math

import numpy as np

# XLA's transcendental opcodes, and kiln's primitives that JAX lowers to expansions of them.
TRANSCENDENTAL = frozenset(
    "exp exp2 log log1p expm1 logistic pow sqrt rsqrt cbrt tanh sin cos tan atan2 erf erfc "
    "erf_inv asin acos atan sinh cosh asinh acosh atanh lgamma digamma".split())

ELEMENTWISE = frozenset(
    "add sub mul div rem max min neg abs sign floor ceil round is_finite eq ne lt le gt ge "
    "and or xor not shift_left shift_right_logical shift_right_arithmetic population_count "
    "clz convert_element_type bitcast_convert_type real imag conj complex square nextafter "
    "clamp select_n".split())

LIBRARY_CALLS = frozenset("cholesky qr svd eig eigh lu schur hessenberg".split())
REDUCTIONS = frozenset("reduce_sum reduce_prod reduce_max reduce_min reduce_and reduce_or "
                       "reduce_xor argmax argmin".split())
CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())
COMBINING_SCATTERS = frozenset("scatter_add scatter_mul scatter_max scatter_min".split())
# Calls and scans: the region each counts once.
CALLS = {"remat": "body", "custom_jvp_call": "call", "custom_vjp_call": "call",
         "custom_vmap_call": "call", "user_primitive": "call", "linear_solve": "solve", "root": "solve", "scan": "body"}


def _size(aval):
    return math.prod(aval.shape)


def _bytes(aval):
    return _size(aval) * np.dtype(aval.dtype).itemsize


def _elements_out(eqn):
    return sum(_size(v.aval) for v in eqn.outvars)


def _integer_pow_flops(eqn):
    y = eqn.params["y"]
    n = abs(y)
    steps = 0 if n == 0 else (n.bit_length() - 1) + (bin(n).count("1") - 1)
    return _elements_out(eqn) * (steps + (y < 0))


def _dot_flops(eqn):
    (lc, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval
    return 2 * _elements_out(eqn) * math.prod(lhs.shape[d] for d in lc)


def _conv_flops(eqn):
    _, rhs_spec, _ = eqn.params["dimension_numbers"]
    rhs = eqn.invars[1].aval
    window = math.prod(rhs.shape[d] for d in rhs_spec[2:])
    return 2 * _elements_out(eqn) * window * rhs.shape[rhs_spec[1]]


def _reduce_flops(eqn):
    return _size(eqn.invars[0].aval) - _size(eqn.outvars[0].aval)


def _cumulative_flops(eqn):
    x = eqn.invars[0].aval
    return _size(x) * (x.shape[eqn.params["axis"]] - 1) if x.shape else 0


def _window_flops(eqn):
    return _elements_out(eqn) * (math.prod(eqn.params["window_dimensions"]) - 1)


def _sort_flops(eqn):
    n = _size(eqn.invars[0].aval)
    return n * math.ceil(math.log2(n)) if n > 1 else 0


def _fft_flops(eqn):
    x, out = eqn.invars[0].aval, eqn.outvars[0].aval
    complex_side = x if np.dtype(x.dtype).kind == "c" else out   # (rfft: its result)
    logs = math.prod(int(math.log2(n)) if n > 0 else 0 for n in eqn.params["fft_lengths"])
    return 8 * logs * _size(complex_side)


def _scatter_flops(eqn):
    return _size(eqn.invars[2].aval)


def _triangular_solve_flops(eqn):
    a, b = eqn.invars[0].aval, eqn.invars[1].aval
    return _size(b) * a.shape[-1]


# name -> flops(eqn)
FLOPS = {"fma": lambda e: 2 * _elements_out(e), "integer_pow": _integer_pow_flops,
         "dot_general": _dot_flops, "conv_general_dilated": _conv_flops,
         "sort": _sort_flops, "fft": _fft_flops, "triangular_solve": _triangular_solve_flops,
         "reduce_window_sum": _window_flops, "reduce_window_max": _window_flops,
         "reduce_window_min": _window_flops}
FLOPS.update({name: _elements_out for name in ELEMENTWISE})
FLOPS.update({name: _reduce_flops for name in REDUCTIONS})
FLOPS.update({name: _cumulative_flops for name in CUMULATIVE})
FLOPS.update({name: _scatter_flops for name in COMBINING_SCATTERS})


class Cost:
    """Figures being summed: flops, transcendentals, per-operand bytes and utilization,
    result bytes, and whether a library call was seen."""
    __slots__ = ("flops", "transcendentals", "operand_bytes", "utilization", "out_bytes",
                 "library")

    def __init__(self):
        self.flops = self.transcendentals = self.out_bytes = 0.0
        self.operand_bytes, self.utilization = {}, {}
        self.library = False

    def add(self, other):
        self.flops += other.flops
        self.transcendentals += other.transcendentals
        self.out_bytes += other.out_bytes
        for i, b in other.operand_bytes.items():
            self.operand_bytes[i] = self.operand_bytes.get(i, 0.0) + b
        for i, u in other.utilization.items():
            self.utilization[i] = self.utilization.get(i, 0.0) + u
        self.library |= other.library

    def largest(self, other):
        """Per key the larger of the two (a cond's branches)."""
        self.flops = max(self.flops, other.flops)
        self.transcendentals = max(self.transcendentals, other.transcendentals)
        self.out_bytes = max(self.out_bytes, other.out_bytes)
        for mine, theirs in ((self.operand_bytes, other.operand_bytes),
                             (self.utilization, other.utilization)):
            for i, v in theirs.items():
                mine[i] = max(mine.get(i, 0.0), v)
        self.library |= other.library

    def read(self, i, nbytes, fraction=1.0):
        self.operand_bytes[i] = self.operand_bytes.get(i, 0.0) + nbytes
        self.utilization[i] = self.utilization.get(i, 0.0) + fraction

    def as_dict(self):
        out = {}
        for key, value in (("flops", self.flops), ("transcendentals", self.transcendentals),
                           ("bytes accessed", self.out_bytes + sum(self.operand_bytes.values())),
                           ("optimal_seconds", -1.0 if self.library else 0.0)):
            if value:
                out[key] = float(value)
        for i in sorted(self.operand_bytes):
            out[f"utilization{i}{{}}"] = float(self.utilization[i])
            out[f"bytes accessed{i}{{}}"] = float(self.operand_bytes[i])
        if self.out_bytes:
            out["bytes accessedout{}"] = float(self.out_bytes)
        return out


def cost_analysis(fn):
    """XLA's cost properties of `fn` (a Function in SSA form): see the module docstring."""
    return _function_cost(fn).as_dict()


def _function_cost(fn):
    total = Cost()
    for eqn in fn.eqns:
        total.add(_eqn_cost(eqn))
    return total


def _eqn_cost(eqn):
    name = eqn.prim.name
    if name == "cond":
        cost = Cost()
        for branch in eqn.params["branches"]:
            cost.largest(_function_cost(branch))
        return cost
    if name == "while_loop":
        cost = _function_cost(eqn.params["cond_fn"])
        cost.add(_function_cost(eqn.params["body_fn"]))
        return cost
    if name in CALLS:
        return _function_cost(eqn.params[CALLS[name]])
    cost = Cost()
    if name == "fusion":
        body = _function_cost(eqn.params["body"])
        cost.flops, cost.transcendentals = body.flops, body.transcendentals
        cost.library = body.library
    elif name in TRANSCENDENTAL:
        cost.transcendentals = _elements_out(eqn)
    elif name in FLOPS:
        cost.flops = FLOPS[name](eqn)
    cost.library |= name in LIBRARY_CALLS
    _count_bytes(eqn, cost)
    return cost


def _count_bytes(eqn, cost):
    name, out_bytes = eqn.prim.name, sum(_bytes(v.aval) for v in eqn.outvars)
    for i, v in enumerate(eqn.invars):   # (Vars and rank-0 Literals)
        nbytes = _bytes(v.aval)
        if i == 0 and name in ("slice", "dynamic_slice", "gather"):
            # only what is returned is read
            cost.read(i, out_bytes, out_bytes / nbytes if nbytes else 0.0)
        elif i == 0 and name == "dynamic_update_slice":
            cost.read(i, 0.0, 0.0)
        else:
            cost.read(i, nbytes)
    if name == "dynamic_update_slice":
        out_bytes = _bytes(eqn.invars[1].aval)
    cost.out_bytes += out_bytes
