"""CUDA kernels of the indexing primitives: gather, the scatter family (scatter, scatter_add,
scatter_mul, scatter_min, scatter_max), dynamic_slice and dynamic_update_slice, and of
concatenate and pad.

`KERNELS[name](fn)` is the Kernel of `fn`, a function of one such equation (program.py's
`_single`), for every dimension-number form the primitives accept (no operand batching
dimensions: the primitives have none). Shapes, strides and dimension numbers are constants of
the text; the kernel reads its index arrays at run time. Semantics are the reference's
(compiler/primitives/indexing.py, XLA's):

- an index element is read as int64 (`(long long)`: signed indices sign-extend, unsigned ones
  zero-extend, uint64 wraps, as the reference's `astype(int64)`) and starts the window along
  its operand dimension (`start_index_map` / `scatter_dims_to_operand_dims`; a repeated
  dimension: the last component counts; other dimensions start at 0);
- gather, a thread per result element (grid-stride): modes "clip" and "promise_in_bounds"
  clamp each window start into [0, dim - size]; mode "fill" gives `fill_value` (default NaN,
  True, the integer minimum or, unsigned, maximum) for a window that does not fit unclamped;
- scatter, a thread per update element: the result starts as a copy of the operand
  (`Kernel.starts_from`, the layer copies it before the launch); mode "clip" clamps the window
  starts, "drop" and "promise_in_bounds" skip an update whose window does not fit. Updates of
  one element from several windows (repeated indices) meet as atomics:
  - `scatter` stores plainly: with repeated indices the element gets one of its updates, which
    one is unspecified (as JAX on a GPU; the reference and the LLVM backend apply them in
    order, so the last wins there);
  - `scatter_add` is `atomicAdd` for float32, float64, int32, uint32, int64 and uint64 (float64
    needs sm_60 or later); other dtypes, `scatter_mul`, `scatter_min` and `scatter_max` are a
    compare-and-swap loop (`atomicCAS` on the element, or on the aligned 32-bit word holding a
    1- or 2-byte element) around the elementwise rule (CUDA_SCALAR's add, mul, min, max; or
    and and on booleans, as the reference). Integer results and min/max are exact whatever the
    order; float sums and products are combined in the order the threads arrive, so they may
    differ from the reference's in-order results by rounding;
- concatenate (how `x[i, j]` builds its index vectors), a thread per result element;
- pad, a thread per result element: the operand's element that lands there, else the
  padding value (interior padding, and negative padding that crops);
- dynamic_slice, a thread per result element, and dynamic_update_slice, a thread per operand
  element (inside the clamped window: the update's element, else the operand's): each start
  is clamped into [0, dim - size], exactly for every index dtype (unsigned starts compare as
  unsigned).
"""
import numpy as np

from ...ir.abstract import ShapedArray, contiguous_strides
from ...ir.ssa import Literal
from ...primitives.core import CUDA_SCALAR
from ...primitives import PRIMITIVES
from ...primitives.indexing import default_fill
from . import source as S
from .scalar import ctype


class Reads:
    """C expressions reading the operands of `fn`'s one equation: `in{k}` for its k-th input,
    a literal's constant for a Literal."""

    def __init__(self, fn):
        self.fn = fn
        self.eqn = fn.eqns[0]
        self.position = {v.name: k for k, v in enumerate(fn.invars)}
        for v in self.eqn.invars + self.eqn.outvars:
            if ctype(v.aval.dtype) is None:
                raise S._unsupported(f"{self.eqn.prim.name} on {v.aval.dtype}", self.eqn.info)

    def pointer(self, x):
        if isinstance(x, Literal):
            raise S._unsupported(f"{self.eqn.prim.name} of a literal array", self.eqn.info)
        return f"in{self.position[x.name]}"

    def element(self, x, index):
        if isinstance(x, Literal):
            return S.constant(x.value, x.aval.dtype)
        return f"{self.pointer(x)}[{index}]"


def _affine(terms, offset=0):
    """`offset + sum(expression * stride)` over (expression, stride) pairs, as C."""
    parts = [str(offset)] if offset else []
    parts += [f"{e} * {s}" if s != 1 else str(e) for e, s in terms if s]
    return " + ".join(parts) or "0"


def flat_coordinates(shape):
    """The lines computing the coordinates c0, c1, ... of the flat index `i` in `shape`."""
    if len(shape) == 1:
        return ["const long long c0 = i;"]
    return S.coordinate_lines(shape, ["c0"])


def _window_starts(reads, indices, index_map, operand_shape, window, batch):
    """Lines computing `s{d}`, the window's start along each operand dimension `d` that
    `index_map` names (a repeated dimension: the last component counts), from the index
    vector at batch coordinates `batch` (C expressions, one per batch axis of `indices`), and
    `fits` (the window fits unclamped); then the starts clamped. Returns (lines, the
    dimensions with a start)."""
    strides = contiguous_strides(indices.aval.shape)
    row = _affine(zip(batch, strides[:-1]))
    component = {d: k for k, d in enumerate(index_map)}
    lines = [f"const long long row = {row};"] if component else []
    limits = {d: max(operand_shape[d] - window[d], 0) for d in component}
    for d, k in sorted(component.items()):
        index = "row" if not k else f"row + {k}"
        lines.append(f"long long s{d} = (long long){reads.element(indices, index)};")
    tests = [f"(s{d} >= 0 && s{d} <= {operand_shape[d] - window[d]})" for d in sorted(component)]
    lines.append(f"const bool fits = {' && '.join(tests) or 'true'};")
    lines += [f"s{d} = s{d} < 0 ? 0 : (s{d} > {limit} ? {limit} : s{d});"
              for d, limit in sorted(limits.items())]
    return lines, sorted(component)


def _operand_index(shape, started, along):
    """The flat index in an operand of `shape` of a window's element: along dimension d, its
    start `s{d}` (d in `started`) plus the coordinate `along[d]` (a window dimension)."""
    terms = []
    for d, stride in enumerate(contiguous_strides(shape)):
        parts = ([f"s{d}"] if d in started else []) + ([along[d]] if d in along else [])
        if parts:
            terms.append((f"({' + '.join(parts)})", stride))
    return _affine(terms)


def one_equation_kernel(fn, body, n, **fields):
    """The Kernel of `fn` whose grid-stride loop over `n` elements runs `body` (none when
    there are no elements: a dimension of 0 would divide by 0 in the coordinates)."""
    eqn = fn.eqns[0]
    body = body if n else []
    name = f"kiln_{S._identifier(fn.name)[2:]}"
    params, scalars, _ = S.inputs(fn)
    out = eqn.outvars[0]
    params += [f"{S._memory_type(out.aval.dtype)}* __restrict__ out0", "long long n"]
    lines = fields.pop("helpers", []) + [
        f'extern "C" __global__ void {name}({", ".join(params)})', "{",
        "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;",
        "         i += (long long)blockDim.x * gridDim.x) {"]
    lines += [f"        {line}" for line in body]
    lines += ["    }", "}", ""]
    return S.Kernel(name, "\n".join(lines), tuple(v.aval.dtype for v in fn.invars),
                    (out.aval.dtype,), tuple(scalars), sizes=(int(n),),
                    out_shapes=(out.aval.shape,), info=S.origin(fn), **fields)


# ------------------------------------------------------------------------------- gather

def gather(fn):
    reads = Reads(fn)
    eqn = reads.eqn
    x, indices = eqn.invars
    p, out = eqn.params, eqn.outvars[0]
    dn, sizes, mode = p["dimension_numbers"], p["slice_sizes"], p.get("mode", "clip")
    shape, rank = out.aval.shape, len(x.aval.shape)
    window_dims = [d for d in range(rank) if d not in dn.collapsed_slice_dims]
    batch = [f"c{a}" for a in range(len(shape)) if a not in dn.offset_dims]
    body = flat_coordinates(shape)
    lines, started = _window_starts(reads, indices, dn.start_index_map, x.aval.shape, sizes,
                                    batch)
    body += lines
    along = {d: f"c{a}" for d, a in zip(window_dims, dn.offset_dims)}
    index = _operand_index(x.aval.shape, started, along)
    value = reads.element(x, index)
    if mode == "fill":
        fill = default_fill(x.aval.dtype) if p.get("fill_value") is None else p["fill_value"]
        mem = S._memory_type(out.aval.dtype)
        value = f"fits ? {value} : ({mem})({S.constant(fill, out.aval.dtype)})"
    body.append(f"out0[i] = {value};")
    return one_equation_kernel(fn, body, out.aval.size)


# ------------------------------------------------------------------------------ scatter

# scatter name -> the elementwise primitive combining an element with an update (None: the
# update replaces it), and on booleans (the reference's logical or / and)
_COMBINE = {"scatter": (None, None), "scatter_add": ("add", "or"),
            "scatter_mul": ("mul", "and"), "scatter_min": ("min", "and"),
            "scatter_max": ("max", "or")}

_ATOMIC_ADD = {"float32": "float", "float64": "double", "int32": "int",
               "uint32": "unsigned int", "int64": "unsigned long long",
               "uint64": "unsigned long long"}


def _cas_helper(name, dtype, combine):
    """A device function `name(p, v)`: *p = combine(*p, v) atomically, as a compare-and-swap
    loop on the element (4 or 8 bytes) or on the aligned 32-bit word holding it (1 or 2)."""
    dtype = np.dtype(dtype)
    mem, reg = S._memory_type(dtype), ctype(dtype)
    aval = ShapedArray((), dtype)
    result = CUDA_SCALAR[PRIMITIVES[combine]]([f"(({reg})a)", f"(({reg})v)"], [aval, aval], aval)
    head = f"__device__ static inline void {name}({mem}* p, {mem} v)"
    if dtype.itemsize >= 4:
        word = "unsigned int" if dtype.itemsize == 4 else "unsigned long long"
        return [head, "{",
                f"    {word}* w = ({word}*)p;",
                f"    {word} old = *w, seen;",
                "    do {",
                "        seen = old;",
                f"        {mem} a; memcpy(&a, &seen, sizeof a);",
                f"        const {mem} r = ({mem})({result});",
                f"        {word} next; memcpy(&next, &r, sizeof next);",
                "        old = atomicCAS(w, seen, next);",
                "    } while (old != seen);", "}", ""]
    bits = 8 * dtype.itemsize
    narrow = "unsigned char" if bits == 8 else "unsigned short"
    return [head, "{",
            "    unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ULL);",
            "    const unsigned int shift = (unsigned int)((unsigned long long)p & 3ULL) * 8;",
            f"    const unsigned int mask = {(1 << bits) - 1}U << shift;",
            "    unsigned int old = *w, seen;",
            "    do {",
            "        seen = old;",
            f"        const {narrow} held = ({narrow})((seen & mask) >> shift);",
            f"        {mem} a; memcpy(&a, &held, sizeof a);",
            f"        const {mem} r = ({mem})({result});",
            f"        {narrow} put; memcpy(&put, &r, sizeof put);",
            "        old = atomicCAS(w, seen, (seen & ~mask) | ((unsigned int)put << shift));",
            "    } while (old != seen);", "}", ""]


def _scatter_for(name):
    def scatter(fn):
        reads = Reads(fn)
        eqn = reads.eqn
        x, indices, updates = eqn.invars
        dn, mode, out = eqn.params["dimension_numbers"], eqn.params.get("mode", "drop"), \
            eqn.outvars[0]
        u_shape, rank, dtype = updates.aval.shape, len(x.aval.shape), np.dtype(x.aval.dtype)
        window_dims = [d for d in range(rank) if d not in dn.inserted_window_dims]
        along = {d: f"c{a}" for d, a in zip(window_dims, dn.update_window_dims)}
        window = [u_shape[dn.update_window_dims[window_dims.index(d)]] if d in along else 1
                  for d in range(rank)]
        batch = [f"c{a}" for a in range(len(u_shape)) if a not in dn.update_window_dims]
        body = flat_coordinates(u_shape)
        lines, started = _window_starts(reads, indices, dn.scatter_dims_to_operand_dims,
                                        x.aval.shape, window, batch)
        body += lines
        if mode != "clip":
            body.append("if (!fits) continue;")
        target = _operand_index(x.aval.shape, started, along)
        body.append(f"const long long t = {target};")
        update = reads.element(updates, "i")
        combine, on_bool = _COMBINE[name]
        helpers = []
        if combine is None:
            body.append(f"out0[t] = {update};")
        elif combine == "add" and dtype.name in _ATOMIC_ADD:
            word = _ATOMIC_ADD[dtype.name]
            body.append(f"atomicAdd(({word}*)&out0[t], ({word}){update});")
        else:
            helper = f"kiln_{S._identifier(fn.name)[2:]}_combine"
            helpers = _cas_helper(helper, dtype, on_bool if dtype.kind == "b" else combine)
            body.append(f"{helper}(&out0[t], {update});")
        reads.pointer(x)   # (a literal operand is refused)
        n = updates.aval.size if x.aval.size else 0   # (clip: windows of 1 in a 0)
        return one_equation_kernel(fn, body, n, helpers=helpers,
                       starts_from=((0, reads.position[x.name]),))
    scatter.__name__ = name
    return scatter


# ------------------------------------------------------------------------ dynamic slices

def _clamped_start(reads, d, start, limit):
    """The line declaring `s{d}`: dynamic start `start` clamped into [0, limit] (unsigned
    starts compared as unsigned)."""
    value = reads.element(start, "0")
    if np.dtype(start.aval.dtype).kind == "u":
        return (f"const long long s{d} = (long long)((unsigned long long){value} > {limit}ULL"
                f" ? {limit}ULL : (unsigned long long){value});")
    return (f"const long long s{d} = (long long){value} < 0 ? 0 : ((long long){value} > "
            f"{limit} ? {limit} : (long long){value});")


def dynamic_slice(fn):
    reads = Reads(fn)
    x, *starts = reads.eqn.invars
    out = reads.eqn.outvars[0]
    shape, sizes = x.aval.shape, reads.eqn.params["slice_sizes"]
    body = flat_coordinates(out.aval.shape)
    body += [_clamped_start(reads, d, s, shape[d] - sizes[d]) for d, s in enumerate(starts)]
    index = _affine([(f"(s{d} + c{d})", s) for d, s in enumerate(contiguous_strides(shape))])
    body.append(f"out0[i] = {reads.element(x, index)};")
    return one_equation_kernel(fn, body, out.aval.size)


def dynamic_update_slice(fn):
    reads = Reads(fn)
    x, update, *starts = reads.eqn.invars
    shape, sizes = x.aval.shape, update.aval.shape
    body = flat_coordinates(shape)
    body += [_clamped_start(reads, d, s, shape[d] - sizes[d]) for d, s in enumerate(starts)]
    inside = " && ".join(f"c{d} >= s{d} && c{d} < s{d} + {z}" for d, z in enumerate(sizes))
    index = _affine([(f"(c{d} - s{d})", s) for d, s in enumerate(contiguous_strides(sizes))])
    body.append(f"out0[i] = ({inside or 'true'}) ? {reads.element(update, index)} : "
                f"{reads.element(x, 'i')};")
    return one_equation_kernel(fn, body, x.aval.size)


# ------------------------------------------------------------------------- concatenate

def concatenate(fn):
    """A thread per result element, reading the operand whose span along `dimension` holds
    it (how `x[i, j]` builds its gather's index vectors)."""
    reads = Reads(fn)
    out, axis = reads.eqn.outvars[0], reads.eqn.params["dimension"]
    body = flat_coordinates(out.aval.shape)
    value, start = None, 0
    for x in reads.eqn.invars:
        size = x.aval.shape[axis]
        if not size:
            continue
        coordinates = [f"(c{a} - {start})" if a == axis and start else f"c{a}"
                       for a in range(len(out.aval.shape))]
        read = reads.element(x, _affine(zip(coordinates, contiguous_strides(x.aval.shape))))
        start += size
        value = read if value is None else f"c{axis} < {start - size} ? {value} : {read}"
    body.append(f"out0[i] = {value};")
    return one_equation_kernel(fn, body, out.aval.size)


# --------------------------------------------------------------------------------- pad

def pad(fn):
    """A thread per result element: the operand's element that lands there (element k of an
    axis lands at `low + k * (interior + 1)`; negative padding crops), else the padding
    value."""
    reads = Reads(fn)
    (x, value), out = reads.eqn.invars, reads.eqn.outvars[0]
    body, tests, terms = flat_coordinates(out.aval.shape), [], []
    strides = contiguous_strides(x.aval.shape)
    for d, ((low, _, interior), size) in enumerate(zip(reads.eqn.params["padding_config"],
                                                       x.aval.shape)):
        step = interior + 1
        body.append(f"const long long p{d} = c{d} - ({low}LL);")
        tests.append(f"p{d} >= 0 && p{d} < {(size - 1) * step + 1}LL" +
                     (f" && p{d} % {step} == 0" if step > 1 else ""))
        terms.append((f"(p{d} / {step})" if step > 1 else f"p{d}", strides[d]))
    inside = " && ".join(tests) or "true"
    body.append(f"out0[i] = {inside} ? {reads.element(x, _affine(terms))} : "
                f"{reads.element(value, '0')};")
    return one_equation_kernel(fn, body, out.aval.size)


KERNELS = {"gather": gather, "concatenate": concatenate, "dynamic_slice": dynamic_slice,
           "dynamic_update_slice": dynamic_update_slice, "pad": pad,
           **{name: _scatter_for(name) for name in _COMBINE}}
