"""Random kiln programs for the LLVM backend's fuzzer (tests/test_llvm_fuzz.py).

`programs()` is a hypothesis strategy drawing a small program: input arrays (float32, float64,
int32, uint32, bool; at most 64 elements, or matrices up to 16 x 16; 0- and 1-sized axes;
NaN, infinities, signed zeros and extreme integers among the values) and a sequence of steps
over the pool of live arrays. A step is one operation whose shape constraints hold
(elementwise with broadcasting, `where`, conversions, reductions, reshapes and transposes,
slices, concatenation, `broadcast_to`, matmul/einsum, cumulative ops, sort, dynamic slices,
gathers and scatters, lax.pad, roll, tile, repeat, clip, top_k) or a control-flow
construct whose regions are shorter step sequences (`lax.cond`/`switch`/`fori_loop`/`scan`/
`while_loop`, Python `if`/`while`/`for` on traced values). A program is Python source text; the
test writes it to a file and imports it, so kiln's source front end parses it like a user's.

Each step runs eagerly on zeros as it is drawn, which gives its result's shape and dtype (the
generator never models dtype promotion itself). Every value carries an `inexact` flag: False
when both backends must agree on it bit for bit (it comes from exact values through correctly
rounded or discrete operations), True when only to rounding (transcendentals, float sums,
products, dots and powers, and everything computed from such values). Discontinuous operations
(comparisons, floor/round, float -> int conversions, argmax, predicates, indices, divisors)
only take exact values, so rounding never changes control flow, integers or NaN positions;
operands of float sums, products and dots are bounded so that the order of summation, which
the backends choose differently, neither overflows nor cancels (see BOUNDS).
Each step reads its choices from a recipe of its own (see Choices) and options are listed
simplest first, so that hypothesis shrinks towards short, plain programs; steps the outputs do
not need are left out of the source.
"""
import itertools
import math
import re
from dataclasses import dataclass

import numpy as np
import hypothesis.extra.numpy as hnp
from hypothesis import strategies as st

import kiln.numpy as jnp
from kiln import lax

DTYPES = [np.dtype(t) for t in (np.float32, np.float64, np.int32, np.uint32, np.bool_)]
MAX_SIZE = 64          # elements of an input (but for matrices up to 16 x 16)
MAX_RESULT = 256       # elements of any value a step makes
_I32 = np.iinfo(np.int32)
_ELEMENTS = {
    "f": st.sampled_from([0.0, 1.0, -1.0, 0.5, -2.5, 3.0, -0.0, 7.25, -100.0, 1e-3,
                          np.nan, np.inf, -np.inf]) | st.floats(-8, 8, width=32),
    "i": st.sampled_from([0, 1, -1, 2, -3, 7, 100, _I32.min, _I32.max]) | st.integers(-9, 9),
    "u": st.sampled_from([0, 1, 2, 7, 31, 32, 2**31, 2**32 - 1]) | st.integers(0, 9),
    "b": st.booleans(),
}


@dataclass(frozen=True)
class Value:
    """A named array of the generated program: static shape, dtype and the inexact flag."""
    name: str
    shape: tuple
    dtype: np.dtype
    inexact: bool = False

    @property
    def kind(self):
        return self.dtype.kind

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def ndim(self):
        return len(self.shape)


@dataclass
class Program:
    """A generated program: its source (a module defining `prog`), inputs and outputs."""
    source: str
    inputs: list
    outputs: list          # the Values `prog` returns, in order
    precision: np.dtype    # the least precise float dtype it computes in (its inexact
                           # values' tolerance: a float32 result may become float64)

    def __repr__(self):
        arrays = "\n".join(f"  a{k} = np.{np.array_repr(a, precision=9)}"
                           for k, a in enumerate(self.inputs))
        return f"Program(\n{self.source}\ninputs:\n{arrays}\n)"

    def _repr_pretty_(self, printer, cycle):   # hypothesis prints falsifying examples so
        printer.text(repr(self))


# ------------------------------------------------------------------------- operation tables
# (template, operand kinds, flags): "x" operands must be exact, "n" a float result is inexact.

UNARY = [
    ("-{}", "fiu", ""), ("jnp.abs({})", "fiu", ""), ("jnp.square({})", "fiu", ""),
    ("jnp.exp({})", "fi", "n"), ("jnp.tanh({})", "f", "n"), ("jnp.sin({})", "f", "n"),
    ("jnp.cos({})", "f", "n"), ("lax.logistic({})", "f", "n"), ("jnp.log({})", "f", "xn"),
    ("jnp.sqrt({})", "f", "x"), ("jnp.floor({})", "f", "x"), ("jnp.round({})", "f", "x"),
    ("jnp.sign({})", "fi", "x"), ("jnp.isnan({})", "f", "x"), ("jnp.isfinite({})", "f", "x"),
    ("jnp.logical_not({})", "fiub", "x"), ("~{}", "iub", ""), ("{} ** 3", "fi", "n"),
    ("lax.population_count({})", "iu", ""), ("lax.clz({})", "iu", ""),
]
BINARY = [
    ("{} + {}", "fiub", ""), ("{} - {}", "fiu", ""), ("{} * {}", "fiub", ""),
    ("{} / {}", "fiu", "x"), ("{} // {}", "fiu", "x"), ("{} % {}", "fiu", "x"),
    ("jnp.maximum({}, {})", "fiub", ""), ("jnp.minimum({}, {})", "fiub", ""),
    ("{} < {}", "fiu", "x"), ("{} == {}", "fiub", "x"), ("{} != {}", "fiub", "x"),
    ("{} >= {}", "fiu", "x"), ("{} & {}", "iub", ""), ("{} | {}", "iub", ""),
    ("{} ^ {}", "iub", ""), ("{} << {}", "iu", ""), ("{} >> {}", "iu", ""),
    ("jnp.logical_and({}, {})", "fiub", "x"), ("jnp.arctan2({}, {})", "f", "xn"),
    ("jnp.power({}, {})", "f", "xn"),
]
LITERALS = {"f": ["2.0", "0.5", "-1.5", "0.0"], "i": ["2", "1", "0", "-1", "31", "33"],
            "u": ["2", "1", "0", "31", "33"], "b": ["True", "False"]}
# (function, operand kinds, flags): "x", "n" as above; "e" the reduced axes must not be empty;
# "1" one axis at most.
REDUCTIONS = [
    ("jnp.sum", "fiub", "n"), ("jnp.max", "fiub", "e"), ("jnp.min", "fiub", "e"),
    ("jnp.prod", "fiu", "n"), ("jnp.mean", "fiub", "n"), ("jnp.argmax", "fiub", "xe1"),
    ("jnp.argmin", "fiub", "xe1"), ("jnp.any", "fiub", "x"), ("jnp.all", "fiub", "x"),
]
CUMULATIVE = [("jnp.cumsum", "fiub", "n"), ("jnp.cumprod", "fiu", "n"),
              ("lax.cummax", "fiu", ""), ("lax.cummin", "fiu", "")]
# Float sums and products are computed in different orders by the two backends. So that no
# order overflows (inf - inf or 0 * inf would make NaN in some orders only) and no order
# cancels (which loses all relative accuracy), their float operands are clipped to a bound,
# and those of sums (dots included) made non-negative: (bound, absolute value).
BOUNDS = {"jnp.sum": (1e30, True), "jnp.mean": (1e30, True), "jnp.cumsum": (1e30, True),
          "dot": (1e15, True), "jnp.prod": (2.0, False), "jnp.cumprod": (2.0, False)}
STEPS_MAX = 8
# A step's choices (see Choices): as many as a step with regions may read, a fixed number so
# that hypothesis does not favour short recipes of simple steps.
RECIPE = st.lists(st.integers(0, 255), min_size=48, max_size=48)
REGION_DEPTH = 2


def _broadcast(*shapes):
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return None
    return shape if math.prod(shape) <= MAX_RESULT else None


class Choices:
    """A step's recipe: integers drawn by hypothesis, read one by one as choices among n
    options (0, the simplest option, once they run out). Drawing every step's recipe apart
    from the pool it is read against lets hypothesis delete steps and zero choices while
    shrinking, the remaining steps adapting to the values that are left."""

    def __init__(self, values):
        self.values, self.at = values, 0

    def below(self, n):
        if self.at == len(self.values):
            return 0
        self.at += 1
        return self.values[self.at - 1] % n


class Gen:
    """Draws steps into `lines`, keeping the pool of live values and their eager samples."""

    def __init__(self, choices, pool, env, names, dtypes, depth=0, exact_only=False):
        self.choices, self.names, self.depth = choices, names, depth
        self.exact_only = exact_only
        self.dtypes = dtypes     # of every value made, regions included (shared)
        self.pool, self.env = list(pool), dict(env)
        self.lines, self.made = [], []
        self.steps = []          # (lines, names made) per step

    # ------------------------------------------------------------------ drawing helpers
    def fresh(self, prefix="v"):
        return f"{prefix}{next(self.names)}"

    def pick(self, items):
        return items[self.choices.below(len(items))] if items else None

    def candidates(self, kinds="fiub", exact=False, where=lambda v: True):
        """The pool values of one of `kinds` (exact if asked or in an exact-only region)."""
        return [v for v in self.pool if v.kind in kinds and where(v)
                and not (v.inexact and (exact or self.exact_only))]

    def choose(self, kinds="fiub", exact=False, where=lambda v: True):
        """One of the candidates; the newest one half of the time, so that steps build on
        each other."""
        items = self.candidates(kinds, exact, where)
        return items[-1] if items and self.flag() else self.pick(items)

    def flag(self):
        return bool(self.choices.below(2))

    def integer(self, lo, hi):
        return lo + self.choices.below(hi - lo + 1)

    def maybe_integer(self, lo, hi):
        return self.integer(lo, hi) if self.flag() else None

    def permutation(self, items):
        items = list(items)
        for k in range(len(items) - 1, 0, -1):
            j = self.integer(0, k)
            items[k], items[j] = items[j], items[k]
        return items

    # ------------------------------------------------------------------ running steps
    def add(self, lines, outs):
        """Run `lines` eagerly on the samples and add the values named in `outs` (name ->
        inexact flag when its dtype is float) to the pool."""
        namespace = {"jnp": jnp, "lax": lax, "np": np, **self.env}
        with np.errstate(all="ignore"):
            exec("\n".join(lines), namespace)
        self.lines += lines
        self.steps.append((lines, list(outs)))
        made = []
        for name, inexact in outs.items():
            sample = namespace[name]
            dtype = np.dtype(sample.dtype)
            self.dtypes.add(dtype)
            made.append(Value(name, tuple(sample.shape), dtype, inexact and dtype.kind == "f"))
            self.env[name] = sample
        self.pool += made
        self.made += made

    def step(self):
        """One drawn step; a step that does not apply to the pool becomes a plain `+`."""
        kinds = STEP_KINDS if self.depth < REGION_DEPTH else STEP_KINDS[:-len(CONTROL)]
        kind = self.pick(kinds)
        drawn = kind(self)
        if drawn is None:
            x = self.choose()
            drawn = self.assign(f"{x.name} + {x.name}", x.inexact)
        self.add(*drawn)

    def assign(self, expr, inexact):
        name = self.fresh()
        return [f"{name} = {expr}"], {name: inexact}

    def region(self, params, exact_only):
        """A sub-generator over the pool plus `params` (Values with samples) with 1-2 steps."""
        sub = Gen(self.choices, self.pool, self.env, self.names, self.dtypes, self.depth + 1,
                  self.exact_only or exact_only)
        sub.pool += [p for p, _ in params]
        sub.env.update({p.name: sample for p, sample in params})
        for _ in range(self.integer(1, 2)):
            sub.step()
        return sub

    def result(self, sub, like, extra=()):
        """(expression, inexact) for a value of `like`'s shape and dtype at the end of region
        `sub`: one of the values it made (or `extra`), fitted."""
        usable = [v for v in sub.made + list(extra)
                  if like.kind == "f" or not v.inexact]
        v = self.pick(usable) or like
        return fit(v, like.shape, like.dtype), v.inexact and like.kind == "f"

    def scalar_index(self):
        """An expression for an integer scalar: a literal, or computed from an exact value
        (a count, or a sum/max of integers: any value, out of bounds included)."""
        choice = self.integer(0, 3)
        v = self.choose(exact=True) if choice else None
        if v is None:
            return str(self.integer(-3, 4))
        if choice == 1 or v.kind not in "iu":
            return f"jnp.sum({v.name} > 0)"
        if choice == 2 or v.size == 0:
            return f"jnp.sum({v.name})"
        return f"jnp.max({v.name})"

    def predicate(self, extra=()):
        """A scalar bool expression from an exact value of the pool (or of `extra`)."""
        v = self.pick([v for v in self.pool + list(extra) if not v.inexact])
        if v is None:
            return "True"
        test = f"{v.name}" if v.kind == "b" else f"{v.name} > 0"
        return self.pick([f"jnp.any({test})", f"jnp.sum({test}) % 2 == 0",
                          f"jnp.all({test})"])


def fit(v, shape, dtype):
    """Source text turning value `v` into an array of `shape` and `dtype` (truncating or
    repeating its elements)."""
    n, expr = math.prod(shape), v.name
    if v.shape != tuple(shape):
        if n == 0 or v.size == 0:
            expr = f"jnp.zeros({tuple(shape)}, {v.name}.dtype)"
        elif v.size >= n:
            expr = f"jnp.reshape(jnp.ravel({v.name})[:{n}], {tuple(shape)})"
        else:
            reps = -(-n // v.size)
            expr = f"jnp.reshape(jnp.tile(jnp.ravel({v.name}), {reps})[:{n}], {tuple(shape)})"
    if v.dtype != dtype:
        expr = f"({expr}).astype({dtype_text(dtype)})"
    return expr


_NAME = re.compile(r"\b[a-z]\d+\b")


def live(steps, results):
    """The lines of the steps that the names `results` depend on: dead steps are left out of
    the source, so that failing programs print short."""
    needed, kept = set(results), []
    for lines, outs in reversed(steps):
        if needed & set(outs):
            kept.append(lines)
            needed |= set(_NAME.findall("\n".join(lines)))
    return [line for lines in reversed(kept) for line in lines]


def bounded(x, operation):
    """Source text for operand `x` of `operation`, as BOUNDS says."""
    if x.kind != "f" or operation not in BOUNDS:
        return x.name
    bound, absolute = BOUNDS[operation]
    clipped = f"jnp.clip({x.name}, {-bound!r}, {bound!r})"
    return f"jnp.abs({clipped})" if absolute else clipped


def dtype_text(dtype):
    return "jnp.bool_" if dtype.kind == "b" else f"jnp.{dtype.name}"


def indent(lines, by="    "):
    return [by + line for line in lines]


# ------------------------------------------------------------------------- elementwise steps

def unary(g):
    template, kinds, flags = g.pick([u for u in UNARY if g.candidates(u[1], "x" in u[2])])
    x = g.choose(kinds, "x" in flags)
    return g.assign(template.format(x.name), x.inexact or "n" in flags)


def binary(g):
    template, kinds, flags = g.pick([b for b in BINARY if g.candidates(b[1], "x" in b[2])])
    exact = "x" in flags
    x = g.choose(kinds, exact)
    y = g.choose(kinds, exact, lambda v: _broadcast(v.shape, x.shape) is not None)
    if y is None or g.flag():
        operands = [x.name, g.pick(LITERALS[x.kind])]
        inexact = x.inexact
    else:
        operands, inexact = [x.name, y.name], x.inexact or y.inexact
    if g.flag():
        operands.reverse()
    return g.assign(template.format(*operands), inexact or "n" in flags)


def where(g):
    c = g.choose(exact=True)
    if c is None:
        return None
    x = g.choose(where=lambda v: _broadcast(v.shape, c.shape) is not None)
    if x is None:
        return None
    y = g.choose(where=lambda v: _broadcast(v.shape, c.shape, x.shape) is not None)
    test = c.name if c.kind == "b" else f"{c.name} > 0"
    other = y.name if y is not None else g.pick(LITERALS[x.kind])
    return g.assign(f"jnp.where({test}, {x.name}, {other})",
                    x.inexact or (y is not None and y.inexact))


def astype(g):
    target = g.pick(DTYPES)
    x = g.choose(exact=target.kind != "f")
    return g.assign(f"{x.name}.astype({dtype_text(target)})", x.inexact)


# ------------------------------------------------------------------------- reductions

def _axes(g, x, one_axis):
    if x.ndim == 0 or g.integer(0, 3) == 0:
        return None
    if one_axis or g.flag():
        return g.integer(-x.ndim, x.ndim - 1)
    axes = [a for a in range(x.ndim) if g.flag()]
    return tuple(axes)


def reduction(g):
    fn, kinds, flags = g.pick(REDUCTIONS)
    x = g.choose(kinds, "x" in flags)
    if x is None:
        return None
    axes = _axes(g, x, "1" in flags)
    reduced = range(x.ndim) if axes is None else [axes] if isinstance(axes, int) else axes
    if "e" in flags and any(x.shape[a] == 0 for a in reduced):
        return None
    keep = g.flag()
    return g.assign(f"{fn}({bounded(x, fn)}, axis={axes!r}, keepdims={keep})",
                    x.inexact or "n" in flags)


def cumulative(g):
    fn, kinds, flags = g.pick(CUMULATIVE)
    x = g.choose(kinds, where=lambda v: v.ndim > 0)
    if x is None:
        return None
    axis = g.integer(0, x.ndim - 1)
    return g.assign(f"{fn}({bounded(x, fn)}, axis={axis})", x.inexact or "n" in flags)


# ------------------------------------------------------------------------- shapes

def shape_of_size(g, n):
    """A random shape of rank 0-3 with `n` elements."""
    if n == 0:
        dims = [g.integer(0, 3) for _ in range(g.integer(1, 3))]
        dims[g.integer(0, len(dims) - 1)] = 0
        return dims
    dims, left = [], n
    for _ in range(g.integer(0 if n == 1 else 1, 3) - 1):
        d = g.pick([d for d in range(1, left + 1) if left % d == 0])
        dims.append(d)
        left //= d
    return dims + [left] if n != 1 or dims or g.flag() else []


def reshape(g):
    x = g.choose()
    form = g.integer(0, 4)
    if form == 0:
        dims = shape_of_size(g, x.size)
        if x.size and dims and g.flag():
            dims[g.integer(0, len(dims) - 1)] = -1
        return g.assign(f"jnp.reshape({x.name}, {tuple(dims)})", x.inexact)
    if form == 1 or x.ndim == 0:
        axes = g.permutation(range(x.ndim))
        return g.assign(f"jnp.transpose({x.name}, {tuple(axes)})", x.inexact)
    axis = g.integer(0, x.ndim - 1)
    if form == 2:
        return g.assign(f"jnp.flip({x.name}, axis={axis})", x.inexact)
    if form == 3:
        return g.assign(f"jnp.expand_dims({x.name}, {g.integer(-x.ndim - 1, x.ndim)})",
                        x.inexact)
    return g.assign(f"jnp.squeeze({x.name})", x.inexact)


def _slice_of(g, n):
    form = g.integer(0, 3)
    if form == 0:
        return ":"
    if form == 1 and n > 0:
        return str(g.integer(-n, n - 1))
    start, stop = (g.maybe_integer(-n - 1, n + 1) for _ in range(2))
    bounds = ["" if b is None else str(b) for b in (start, stop)]
    return f"{bounds[0]}:{bounds[1]}:{g.pick([1, 2, -1, -2, 3])}"


def slicing(g):
    x = g.choose(where=lambda v: v.ndim > 0)
    if x is None:
        return None
    parts = [_slice_of(g, n) for n in x.shape[:g.integer(1, x.ndim)]]
    if g.integer(0, 3) == 0:
        parts.insert(g.integer(0, len(parts)), "None")
    return g.assign(f"{x.name}[{', '.join(parts)}]", x.inexact)


def concatenate(g):
    x = g.choose(where=lambda v: v.ndim > 0)
    if x is None:
        return None
    axis = g.integer(0, x.ndim - 1)
    fits = lambda v: v.ndim == x.ndim and all(
        a == b for k, (a, b) in enumerate(zip(v.shape, x.shape)) if k != axis)
    y = g.choose(where=fits)
    if (x.size + y.size) > MAX_RESULT:
        y = x
    if x.shape == y.shape and g.flag():
        return g.assign(f"jnp.stack([{x.name}, {y.name}], axis={axis})",
                        x.inexact or y.inexact)
    return g.assign(f"jnp.concatenate([{x.name}, {y.name}], axis={axis})",
                    x.inexact or y.inexact)


def broadcast_to(g):
    x = g.choose()
    dims = [g.pick([1, 0, 2, 3]) if d == 1 else d for d in x.shape]
    dims = [g.integer(0, 3) for _ in range(g.integer(0, 2))] + dims
    if math.prod(dims) > MAX_RESULT:
        return None
    return g.assign(f"jnp.broadcast_to({x.name}, {tuple(dims)})", x.inexact)


def pad(g):
    """lax.pad with negative (cropping) and interior padding."""
    x = g.choose(where=lambda v: v.ndim > 0)
    if x is None:
        return None
    config = []
    for n in x.shape:
        interior = g.integer(0, 1)
        grown = n + max(n - 1, 0) * interior
        lo = g.integer(-min(grown, 2), 2)
        config.append((lo, g.integer(-min(grown + lo, 2), 2), interior))
    if math.prod(n + lo + hi + max(n - 1, 0) * k
                 for n, (lo, hi, k) in zip(x.shape, config)) > MAX_RESULT:
        return None
    value = f"jnp.asarray({g.pick(LITERALS[x.kind])}, {dtype_text(x.dtype)})"
    return g.assign(f"lax.pad({x.name}, {value}, {config})", x.inexact)


def rearrange(g):
    """roll, tile, repeat, clip, top_k (a step that does not fit `x` gives None)."""
    x = g.choose()
    form = g.integer(0, 4)
    if form == 0:
        axis = g.integer(0, x.ndim - 1) if x.ndim and g.flag() else None
        return g.assign(f"jnp.roll({x.name}, {g.integer(-3, 3)}, axis={axis})", x.inexact)
    if form == 1 and x.size * 4 <= MAX_RESULT:
        return g.assign(f"jnp.tile({x.name}, {tuple(g.integer(0, 2) for _ in x.shape)})",
                        x.inexact)
    if form == 2 and x.ndim and x.size * 3 <= MAX_RESULT:
        axis = g.integer(0, x.ndim - 1)
        return g.assign(f"jnp.repeat({x.name}, {g.integer(0, 3)}, axis={axis})", x.inexact)
    if form == 3 and x.kind != "b":
        lo, hi = sorted((g.pick(LITERALS[x.kind]) for _ in range(2)), key=float)
        return g.assign(f"jnp.clip({x.name}, {lo}, {hi})", x.inexact)
    if form == 4 and x.ndim and x.shape[-1] and not x.inexact:
        values, indices = g.fresh(), g.fresh()
        return ([f"{values}, {indices} = lax.top_k({x.name}, {g.integer(1, x.shape[-1])})"],
                {values: False, indices: False})
    return None


# ------------------------------------------------------------------------- dot, sort, indexing

def einsum(g):
    """An einsum (a dot_general) of two values: axes of `y` either pair with an equal-sized
    axis of `x` or are new; each letter is kept in the output or summed."""
    x = g.choose("fiu", where=lambda v: 0 < v.ndim <= 4)
    if x is None:
        return None
    y = g.choose("fiu", where=lambda v: v.ndim <= 4) or x
    letters = iter("abcdefghijkl")
    xs = [next(letters) for _ in x.shape]
    ys, used = [], set()
    for d in y.shape:
        pair = [l for l, e in zip(xs, x.shape) if e == d and l not in used]
        if pair and g.flag():
            ys.append(g.pick(pair))
            used.add(ys[-1])
        else:
            ys.append(next(letters))
    sizes = dict(zip(xs, x.shape)) | dict(zip(ys, y.shape))
    kept = [l for l in sorted(sizes) if g.flag()]
    out = g.permutation(kept)
    if math.prod(sizes[l] for l in out) > MAX_RESULT:
        return None
    spec = f"{''.join(xs)},{''.join(ys)}->{''.join(out)}"
    return g.assign(f"jnp.einsum('{spec}', {bounded(x, 'dot')}, {bounded(y, 'dot')})", True)


def _matmul_shape(a, b):
    """The shape of a @ b (None if it does not exist or is too large)."""
    if not (a and b) or (b[0] if len(b) == 1 else b[-2]) != a[-1]:
        return None
    batch = _broadcast(a[:-2], b[:-2])
    shape = None if batch is None else batch + a[-2:-1] + b[-1:] * (len(b) > 1)
    return shape if shape is not None and math.prod(shape) <= MAX_RESULT else None


def matmul(g):
    x = g.choose("fiu", where=lambda v: v.ndim > 0)
    if x is None:
        return None
    y = g.choose("fiu", where=lambda v: _matmul_shape(x.shape, v.shape) is not None)
    if y is None or g.flag():     # x with itself: a Gram matrix (large enough for BLAS)
        gram = x.shape[:-2] + x.shape[-2:][::-1]
        if _matmul_shape(x.shape, gram) is None:
            return None
        rhs = bounded(x, 'dot') if x.ndim == 1 else f"jnp.swapaxes({bounded(x, 'dot')}, -1, -2)"
        return g.assign(f"{bounded(x, 'dot')} @ {rhs}", True)
    return g.assign(f"{bounded(x, 'dot')} @ {bounded(y, 'dot')}", True)


def sort(g):
    x = g.choose(where=lambda v: v.ndim > 0)
    if x is None:
        return None
    axis = g.integer(-x.ndim, x.ndim - 1)
    if x.inexact or g.flag():
        return g.assign(f"jnp.sort({x.name}, axis={axis})", x.inexact)
    return g.assign(f"jnp.argsort({x.name}, axis={axis})", False)


def dynamic_slice(g):
    x = g.choose(where=lambda v: v.ndim > 0)
    if x is None:
        return None
    starts = ", ".join(f"jnp.asarray({g.scalar_index()}, jnp.int32)" for _ in x.shape)
    if g.flag():
        sizes = tuple(g.integer(0, d) for d in x.shape)
        return g.assign(f"lax.dynamic_slice({x.name}, ({starts},), {sizes})", x.inexact)
    u = g.choose(exact=x.kind != "f")
    shape = tuple(g.integer(0, d) for d in x.shape)
    return g.assign(f"lax.dynamic_update_slice({x.name}, {fit(u, shape, x.dtype)}, "
                    f"({starts},))", x.inexact or u.inexact)


def gather(g):
    """x[idx], take with an axis (fill mode), and `.at[idx]` updates with traced indices
    (repeated, negative, out of bounds); `.set` only with distinct static indices."""
    x = g.choose(where=lambda v: v.ndim > 0 and v.shape[0] > 0)
    idx = g.choose("iu", where=lambda v: v.size * (x.size if x else 0) <= MAX_RESULT * 4)
    if x is None or idx is None:
        return None
    form = g.integer(0, 3)
    if form == 0:
        return g.assign(f"{x.name}[{idx.name}]", x.inexact)
    if form == 1:
        axis = g.pick([a for a, d in enumerate(x.shape) if d > 0])
        return g.assign(f"jnp.take({x.name}, {idx.name}, axis={axis})", x.inexact)
    shape = idx.shape + x.shape[1:]
    u = g.choose(exact=x.kind != "f")
    if form == 2:
        update = g.pick(["max", "min", "add"][:2 if x.kind == "b" else 3])
        inexact = x.inexact or u.inexact or (update == "add" and x.kind == "f")
        return g.assign(f"{x.name}.at[{idx.name}].{update}({fit(u, shape, x.dtype)})",
                        inexact)
    rows = g.permutation(range(x.shape[0]))[:g.integer(0, x.shape[0])]
    shape = (len(rows),) + x.shape[1:]
    return g.assign(f"{x.name}.at[jnp.array({rows}, jnp.int32)].set({fit(u, shape, x.dtype)})",
                    x.inexact or u.inexact)


# ------------------------------------------------------------------------- control flow

def _loop_param(g, x, name):
    """(parameter, exact_only) for a loop carrying `x`: a float carry is inexact unless the
    body is drawn exact-only (then its predicate and discrete operations may read it)."""
    exact_body = x.kind == "f" and not x.inexact and g.flag()
    return Value(name, x.shape, x.dtype, x.kind == "f" and not exact_body), exact_body


def _index_param(g):
    """(loop variable, its int32 copy as a region parameter with a sample, the line making
    the copy): the loop variable may be a Python int or an array of another integer dtype."""
    t, i = g.fresh("t"), Value(g.fresh("i"), (), np.dtype(np.int32))
    return t, (i, jnp.zeros((), jnp.int32)), f"{i.name} = jnp.asarray({t}, jnp.int32)"


def _trip_count(g):
    if g.flag():
        return str(g.integer(0, 3))
    v = g.choose(exact=True)
    return str(g.integer(0, 3)) if v is None else f"jnp.minimum(jnp.sum({v.name} > 0), 3)"


@dataclass
class Body:
    """A loop body over carries: its parameters, region and results (expressions fitted to
    the carries, which may pass parameters through or swap them)."""
    params: list
    sub: Gen
    results: list
    inexact: list            # per carry: may the result be inexact?


def loop_body(g, xs, names=None, extra=()):
    """The body of a loop carrying the values `xs` (parameters named `names`, fresh ones by
    default), with further region parameters `extra` ((Value, sample) pairs)."""
    drawn = [_loop_param(g, x, name or g.fresh("p"))
             for x, name in zip(xs, names or [None] * len(xs))]
    params = [p for p, _ in drawn]
    sub = g.region([(p, g.env[x.name]) for p, x in zip(params, xs)] + list(extra),
                   any(exact for _, exact in drawn))
    fitted = [g.result(sub, x, params + [e for e, _ in extra]) for x in xs]
    inexact = [p.inexact or inexact for p, (_, inexact) in zip(params, fitted)]
    if any(inexact):   # a result may pass to another carry (a swap) on the next trip
        inexact = [x.kind == "f" for x in xs]
    return Body(params, sub, [expr for expr, _ in fitted], inexact)


def carries(g):
    """One or two values for a loop to carry (the same one twice, sometimes)."""
    first = g.choose()
    return [first] if g.flag() else [first, g.choose()]


def tuple_text(names):
    return f"({', '.join(names)},)"


def pack(names):
    """One carry as itself, several as a tuple."""
    return names[0] if len(names) == 1 else tuple_text(names)


def _carry_form(names):
    """(parameter text, unpacking lines) for a function taking carries `names`."""
    if len(names) == 1:
        return names[0], []
    state = "c_" + names[0]
    return state, [f"{', '.join(names)} = {state}"]


def _branch_fn(g, fname, x):
    p = Value(g.fresh("p"), x.shape, x.dtype, x.inexact)
    sub = g.region([(p, g.env[x.name])], exact_only=False)
    expr, inexact = g.result(sub, x, [p])
    return ([f"def {fname}({p.name}):"] + indent(sub.lines + [f"return {expr}"])), inexact


def cond(g):
    x = g.choose()
    pred = g.predicate()
    lines, inexact = [], x.inexact
    fnames = [g.fresh("f") for _ in range(2 if g.flag() else g.integer(1, 3))]
    for fname in fnames:
        body, branch_inexact = _branch_fn(g, fname, x)
        lines += body
        inexact |= branch_inexact
    name = g.fresh()
    if len(fnames) == 2 and g.flag():
        call = f"lax.cond({pred}, {fnames[0]}, {fnames[1]}, {x.name})"
    else:
        call = f"lax.switch({g.scalar_index()}, [{', '.join(fnames)}], {x.name})"
    return lines + [f"{name} = {call}"], {name: inexact}


def _outs(names, body):
    return dict(zip(names, body.inexact))


def fori_loop(g):
    xs = carries(g)
    t, i, copy = _index_param(g)
    body = loop_body(g, xs, extra=[i])
    state, unpack = _carry_form([p.name for p in body.params])
    fname, names = g.fresh("f"), [g.fresh() for _ in xs]
    lines = [f"def {fname}({t}, {state}):"] + indent(
        unpack + [copy] + body.sub.lines + [f"return {pack(body.results)}"])
    init = pack([x.name for x in xs])
    call = f"lax.fori_loop({g.integer(0, 1)}, {_trip_count(g)}, {fname}, {init})"
    return lines + [f"{pack(names)} = {call}"], _outs(names, body)


def scan(g):
    xs = carries(g)
    seq = g.choose(where=lambda v: v.ndim > 0 and v.shape[0] <= 4)
    extra = []
    if seq is not None:
        q = Value(g.fresh("q"), seq.shape[1:], seq.dtype, seq.inexact)
        extra.append((q, g.env[seq.name][0] if seq.shape[0] else jnp.zeros(q.shape, q.dtype)))
    body = loop_body(g, xs, extra=extra)
    y = g.pick(body.sub.made)
    if y.size * 4 > MAX_RESULT:
        return None
    state, unpack = _carry_form([p.name for p in body.params])
    fname, names, ys = g.fresh("f"), [g.fresh() for _ in xs], g.fresh()
    arg = extra[0][0].name if extra else "_"
    lines = [f"def {fname}({state}, {arg}):"] + indent(
        unpack + body.sub.lines + [f"return {pack(body.results)}, {y.name}"])
    source = seq.name if seq is not None else "None"
    length = "" if seq is not None else f", length={g.integer(0, 3)}"
    reverse = ", reverse=True" if g.flag() else ""
    init = pack([x.name for x in xs])
    lines.append(f"{pack(names)}, {ys} = lax.scan({fname}, {init}, {source}{length}"
                 f"{reverse})")
    return lines, _outs(names, body) | {ys: y.inexact or any(body.inexact)}


def while_loop(g):
    xs = carries(g)
    k = Value(g.fresh("k"), (), np.dtype(np.int32))
    body = loop_body(g, xs, extra=[(k, jnp.zeros((), jnp.int32))])
    params = [k.name] + [p.name for p in body.params]
    pred = g.predicate(body.params)
    fname, names, state = g.fresh("f"), [g.fresh() for _ in xs], g.fresh("s")
    lines = [f"def {fname}({state}):"] + indent(
        [f"{', '.join(params)} = {state}"] + body.sub.lines
        + [f"return {tuple_text([k.name + ' + 1'] + body.results)}"])
    test = (f"lambda {state}: jnp.logical_and({state}[0] < {_trip_count(g)}, "
            f"(lambda {', '.join(params)}: {pred})(*{state}))")
    init = tuple_text(["jnp.int32(0)"] + [x.name for x in xs])
    lines.append(f"_, {', '.join(names)} = lax.while_loop({test}, {fname}, {init})")
    return lines, _outs(names, body)


def python_if(g):
    x = g.choose()
    pred = g.predicate()
    name, inexact = g.fresh(), x.inexact
    arms = []
    for _ in range(2):
        sub = g.region([], exact_only=False)
        expr, arm_inexact = g.result(sub, x)
        arms.append(sub.lines + [f"{name} = {expr}"])
        inexact |= arm_inexact
    if g.flag():
        return [f"{name} = {x.name}", f"if {pred}:"] + indent(arms[0]), {name: inexact}
    return ([f"if {pred}:"] + indent(arms[0]) + ["else:"] + indent(arms[1])), {name: inexact}


def python_loop(g):
    """`while` with a counter and a traced condition, or `for i in range(n)`, carrying
    variables the body reassigns."""
    xs = carries(g)
    names = [g.fresh() for _ in xs]
    start = [f"{name} = {x.name}" for name, x in zip(names, xs)]
    if g.flag():
        t, i, copy = _index_param(g)
        body = loop_body(g, xs, names, extra=[i])
        update = [f"{', '.join(names)} = {', '.join(body.results)}"]
        return start + [f"for {t} in range({g.integer(0, 3)}):"] + indent(
            [copy] + body.sub.lines + update), _outs(names, body)
    counter = g.fresh("k")
    body = loop_body(g, xs, names)
    pred = g.predicate(body.params)
    update = [f"{', '.join(names)} = {', '.join(body.results)}", f"{counter} = {counter} + 1"]
    head = start + [f"{counter} = 0",
                    f"while jnp.logical_and({counter} < {_trip_count(g)}, {pred}):"]
    return head + indent(body.sub.lines + update), _outs(names, body)


PLAIN = [unary, binary, astype, reduction, reshape, slicing, where, concatenate,
         broadcast_to, einsum, matmul, cumulative, sort, dynamic_slice, gather, pad, rearrange]
CONTROL = [cond, fori_loop, python_if, python_loop, scan, while_loop]
STEP_KINDS = PLAIN + CONTROL


# ------------------------------------------------------------------------- programs

@st.composite
def input_arrays(draw):
    """One to three arrays of the DTYPES, with special values among their elements."""
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(DTYPES))
        shape = draw(st.one_of(
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)
            .filter(lambda s: math.prod(s) <= MAX_SIZE),
            st.tuples(st.integers(0, MAX_SIZE)),     # long enough for vector loops' tails
            st.tuples(*[st.sampled_from([1, 2, 3, 7, 16])] * 2)))   # products reaching BLAS
        arrays.append(draw(hnp.arrays(dtype, shape, elements=_ELEMENTS[dtype.kind])))
    return arrays


@st.composite
def programs(draw, max_steps=STEPS_MAX):
    """A random program and its inputs (see the module docstring)."""
    inputs = draw(input_arrays())
    params = [Value(f"a{k}", a.shape, a.dtype) for k, a in enumerate(inputs)]
    env = {p.name: jnp.zeros(p.shape, p.dtype) for p in params}
    g = Gen(None, params, env, itertools.count(), {a.dtype for a in inputs})
    # At least three steps (those a failing program does not need are pruned from its source).
    for recipe in draw(st.lists(RECIPE, min_size=3, max_size=max_steps)):
        g.choices = Choices(recipe)
        g.step()
    g.choices = Choices(draw(RECIPE))
    outputs = [v for v in g.made[:-1] if g.flag()] + g.made[-1:]
    if g.flag():   # an input or a value returned twice
        outputs.append(g.pick(params + outputs))
    names = ", ".join(v.name for v in outputs)
    source = "\n".join(
        ["import numpy as np", "import kiln.numpy as jnp", "from kiln import lax", "", "",
         f"def prog({', '.join(p.name for p in params)}):"]
        + indent(live(g.steps, [v.name for v in outputs]) + [f"return ({names},)"])) + "\n"
    floats = [d for d in g.dtypes if d.kind == "f"]
    return Program(source, inputs, outputs, min(floats, key=lambda d: d.itemsize,
                                                 default=np.dtype(np.float64)))
