"""CUDA kernels of the window primitives: reduce_window_sum, reduce_window_max,
reduce_window_min, select_and_gather_add, select_and_scatter_add (pooling and its derivatives),
and conv_general_dilated.

`KERNELS[name](fn)` is the Kernel of `fn`, a function of one such equation (program.py's
`_single`). Shapes, strides, windows, paddings and dilations are constants of the text. A
window element w (per axis d) of the window at output position o reads, in the operand's
dilated and padded coordinates, position `p = o * stride + w * window_dilation - low`; it is
an operand element when `0 <= p < dilated extent` and `p % base_dilation == 0` (element
`p / base_dilation`), and padding (the reduction's identity, or 0 for a convolution)
otherwise. Negative padding crops, by the same formula. Semantics are the reference's
(compiler/primitives/windows.py and convolution.py):

- reduce_window_*, a thread per result element, combining its window's elements in order with
  the CUDA_SCALAR rule of add, max or min (XLA's NaN and signed-zero order); a float16 or
  float32 sum is carried in double and rounded once;
- select_and_gather_add (max/min pooling's JVP), a thread per window: the first element of the
  window (padding included, as the reference's argmax) that is greatest ("ge") or least
  ("le"), NaN counting as greatest and least, and the tangent there (0 when it is padding);
- select_and_scatter_add (its VJP), a thread per *operand* element: it visits the windows
  holding the element in the reference's order (row-major over the windows), selects each
  window's element as above and adds the window's cotangent when that is this element. No
  atomics: every result is written once, and sums are in the reference's order, so results
  are exact. The cost is (window size)^2 per element, small for pooling windows;
- conv_general_dilated, a thread per result element (any layout, groups of features or of
  the batch, lhs and rhs dilation, preferred_element_type): a direct sum over the input
  features and the window, in the result's dtype. It is correct for every parameter and
  simple; it is not blocked for shared memory or tensor cores (docs/cuda.md).
"""
import numpy as np

from ...ir.abstract import ShapedArray, contiguous_strides
from ...primitives import PRIMITIVES
from ...primitives.core import CUDA_SCALAR
from ...primitives.convolution import dilate_shape
from ...primitives.windows import WINDOW_PARAMS, identity
from . import source as S
from .indexing import Reads, flat_coordinates, one_equation_kernel
from .scalar import ctype
from .scan import WIDE_SUM


def _decode(counter, dims, names, reverse=False):
    """Lines declaring `names[d]`, the row-major digits of `counter` over `dims` (from the
    last digit when `reverse`: dims[d] - 1 - digit)."""
    lines = [f"long long {counter}_r = {counter};"] if dims else []
    for d in reversed(range(len(dims))):
        digit = f"{counter}_r % {dims[d]}LL"
        value = f"{dims[d] - 1}LL - {digit}" if reverse else digit
        lines.append(f"const long long {names[d]} = {value}; {counter}_r /= {dims[d]}LL;")
    return lines


def _window_element(shape, strides, out, window, window_strides, padding, base_dilation,
                    window_dilation, prefix="p"):
    """Lines declaring `inside` (the window element is an operand element) and `at` (its
    offset when inside, from the operand's `strides` per axis), for output coordinates
    `out[d]` and window digits `window[d]` (a convolution's: base dilation = lhs dilation,
    window dilation = rhs dilation)."""
    lines, tests, terms = [], [], []
    for d, extent in enumerate(shape):
        p = f"{prefix}{d}"
        lines.append(f"const long long {p} = {out[d]} * {window_strides[d]}LL + "
                     f"{window[d]} * {window_dilation[d]}LL - {padding[d][0]}LL;")
        span = dilate_shape([extent], [base_dilation[d]])[0]
        tests.append(f"{p} >= 0 && {p} < {span}LL")
        if base_dilation[d] > 1:
            tests.append(f"{p} % {base_dilation[d]}LL == 0")
            terms.append(f"({p} / {base_dilation[d]}LL) * {strides[d]}LL")
        else:
            terms.append(f"{p} * {strides[d]}LL")
    lines.append(f"const bool inside = {' && '.join(tests) or 'true'};")
    lines.append(f"const long long at = {' + '.join(terms) or '0'};")
    return lines


def _scalar_rule(name, dtype):
    aval = ShapedArray((), dtype)
    rule = CUDA_SCALAR[PRIMITIVES[name]]
    return lambda a, b: rule([a, b], [aval, aval], aval)


# ------------------------------------------------------------------------ reduce_window_*

def _reduce_window_for(kind):
    def reduce_window(fn):
        reads = Reads(fn)
        eqn = reads.eqn
        (x,), out = eqn.invars, eqn.outvars[0]
        dtype, shape = np.dtype(x.aval.dtype), x.aval.shape
        params = [eqn.params[p] for p in WINDOW_PARAMS]
        dims = params[0]
        element = ctype(dtype)
        carry = WIDE_SUM.get(dtype, element) if kind == "sum" else element
        combine = (lambda a, b: f"{a} + {b}") if carry != element else \
            _scalar_rule({"sum": "add", "max": "max", "min": "min"}[kind], dtype)
        fill = S.constant(identity(kind, dtype), dtype)
        outs = [f"c{d}" for d in range(len(shape))]
        ws = [f"w{d}" for d in range(len(shape))]
        total = int(np.prod(dims, dtype=np.int64))
        body = flat_coordinates(out.aval.shape) + [
            f"{carry} acc = ({carry}){fill};",
            f"for (long long k = 0; k < {total}LL; ++k) {{"]
        inner = _decode("k", dims, ws) + _window_element(
            shape, contiguous_strides(shape), outs, ws, *params[1:])
        value = f"({carry})(inside ? ({element}){reads.element(x, 'at')} : {fill})"
        inner.append(f"acc = {combine('acc', value)};")
        body += [f"    {line}" for line in inner] + ["}",
                 f"out0[i] = ({S._memory_type(dtype)})(({element})acc);"]
        return one_equation_kernel(fn, body, out.aval.size)
    reduce_window.__name__ = f"reduce_window_{kind}"
    return reduce_window


# ------------------------------------------------------------------------ select_and_*

def _chooser(name, operand, params):
    """A device function `name(x, o0, o1, ...)`: the flat index in the operand `x` of the
    selected element of the window at output position (o0, o1, ...), -1 for padding."""
    select, dims = params["select_prim"], params["window_dimensions"]
    dtype, shape = np.dtype(operand.aval.dtype), operand.aval.shape
    element = ctype(dtype)
    fill = S.constant(identity("max" if select == "ge" else "min", dtype), dtype)
    better = ">" if select == "ge" else "<"
    outs = [f"o{d}" for d in range(len(shape))]
    ws = [f"w{d}" for d in range(len(shape))]
    args = "".join(f", long long {o}" for o in outs)
    lines = [f"__device__ static inline long long {name}(const {S._memory_type(dtype)}* x{args})",
             "{",
             f"    {element} best = {fill};",
             "    long long chosen = -1;",
             f"    for (long long k = 0; k < {int(np.prod(dims, dtype=np.int64))}LL; ++k) {{"]
    inner = _decode("k", dims, ws) + _window_element(
        shape, contiguous_strides(shape), outs, ws, params["window_strides"],
        params["padding"], (1,) * len(shape), params["window_dilation"])
    inner += [f"const {element} v = inside ? ({element})x[at] : {fill};",
              f"if (k == 0 || (best == best && (v != v || v {better} best))) "
              "{ best = v; chosen = inside ? at : -1; }"]
    lines += [f"        {line}" for line in inner] + ["    }", "    return chosen;", "}", ""]
    return lines


def select_and_gather_add(fn):
    reads = Reads(fn)
    eqn = reads.eqn
    tangents, operand = eqn.invars
    out = eqn.outvars[0]
    helper = f"kiln_{S._identifier(fn.name)[2:]}_choose"
    coordinates = "".join(f", c{d}" for d in range(len(out.aval.shape)))
    mem = S._memory_type(out.aval.dtype)
    body = flat_coordinates(out.aval.shape) + [
        f"const long long chosen = {helper}({reads.pointer(operand)}{coordinates});",
        f"out0[i] = chosen >= 0 ? {reads.element(tangents, 'chosen')} : ({mem})0;"]
    return one_equation_kernel(fn, body, out.aval.size, helpers=_chooser(helper, operand, eqn.params))


def select_and_scatter_add(fn):
    reads = Reads(fn)
    eqn = reads.eqn
    source, operand = eqn.invars
    out, p = eqn.outvars[0], eqn.params
    shape, windows = operand.aval.shape, source.aval.shape
    dims, strides, padding, dilation = (p["window_dimensions"], p["window_strides"],
                                        p["padding"], p["window_dilation"])
    helper = f"kiln_{S._identifier(fn.name)[2:]}_choose"
    element = ctype(out.aval.dtype)
    ws = [f"w{d}" for d in range(len(shape))]
    # The window holding element c at its digit w starts at o = (c + low - w * dilation) /
    # stride; visiting the digits from the last makes o grow, row-major, as the reference.
    inner = _decode("k", dims, ws, reverse=True)
    tests = []
    for d in range(len(shape)):
        inner.append(f"const long long t{d} = c{d} + {padding[d][0]}LL - w{d} * {dilation[d]}LL;")
        inner.append(f"const long long o{d} = t{d} / {strides[d]}LL;")
        tests.append(f"t{d} >= 0 && t{d} % {strides[d]}LL == 0 && o{d} < {windows[d]}LL")
    if tests:
        inner.append(f"if (!({' && '.join(tests)})) continue;")
    outs = "".join(f", o{d}" for d in range(len(shape)))
    window = " + ".join(f"o{d} * {s}LL" for d, s in
                        enumerate(contiguous_strides(windows))) or "0"
    inner.append(f"if ({helper}({reads.pointer(operand)}{outs}) == i) "
                 f"acc = acc + ({element}){reads.element(source, window)};")
    body = flat_coordinates(shape) + [
        f"{element} acc = 0;",
        f"for (long long k = 0; k < {int(np.prod(dims, dtype=np.int64))}LL; ++k) {{"]
    body += [f"    {line}" for line in inner] + ["}",
             f"out0[i] = ({S._memory_type(out.aval.dtype)})acc;"]
    return one_equation_kernel(fn, body, out.aval.size, helpers=_chooser(helper, operand, p))


# ------------------------------------------------------------------------ convolution

def conv_general_dilated(fn):
    reads = Reads(fn)
    eqn = reads.eqn
    lhs, rhs = eqn.invars
    out, p = eqn.outvars[0], eqn.params
    if np.dtype(out.aval.dtype).kind == "b":
        raise S._unsupported("conv_general_dilated of booleans", eqn.info)
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    nd = len(lhs_spec) - 2
    G, BG = p["feature_group_count"], p["batch_group_count"]
    xs, ks = contiguous_strides(lhs.aval.shape), contiguous_strides(rhs.aval.shape)
    n_in = lhs.aval.shape[lhs_spec[0]]
    o_all, i_per = rhs.aval.shape[rhs_spec[0]], rhs.aval.shape[rhs_spec[1]]
    o_per = o_all // (BG * G)
    window = [rhs.aval.shape[a] for a in rhs_spec[2:]]
    in_sp = [lhs.aval.shape[a] for a in lhs_spec[2:]]
    element = ctype(out.aval.dtype)
    c = {name: f"c{axis}" for name, axis in zip(["n", "o"] + [f"s{d}" for d in range(nd)],
                                                out_spec)}
    body = flat_coordinates(out.aval.shape) + [
        f"const long long gg = {c['o']} / {o_per}LL;",
        f"const long long nb = (gg / {G}LL) * {n_in // BG}LL + {c['n']};",
        f"const long long base = nb * {xs[lhs_spec[0]]}LL + "
        f"(gg % {G}LL) * {i_per * xs[lhs_spec[1]]}LL;",
        f"const long long kbase = {c['o']} * {ks[rhs_spec[0]]}LL;",
        f"{element} acc = 0;",
        f"for (long long j = 0; j < {i_per}LL; ++j) {{",
        f"    for (long long k = 0; k < {int(np.prod(window, dtype=np.int64))}LL; ++k) {{"]
    ws = [f"w{d}" for d in range(nd)]
    inner = _decode("k", window, ws) + _window_element(
        in_sp, [xs[a] for a in lhs_spec[2:]], [c[f"s{d}"] for d in range(nd)], ws,
        p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"], prefix="q")
    inner.append("if (!inside) continue;")
    x_at = f"base + j * {xs[lhs_spec[1]]}LL + at"
    k_at = " + ".join(["kbase", f"j * {ks[rhs_spec[1]]}LL"] +
                      [f"{ws[d]} * {ks[rhs_spec[2 + d]]}LL" for d in range(nd)])
    inner.append(f"acc += ({element}){reads.element(lhs, x_at)} * "
                 f"({element}){reads.element(rhs, k_at)};")
    body += [f"        {line}" for line in inner] + ["    }", "}",
             f"out0[i] = ({S._memory_type(out.aval.dtype)})acc;"]
    return one_equation_kernel(fn, body, out.aval.size)


KERNELS = {**{f"reduce_window_{k}": _reduce_window_for(k) for k in ("sum", "max", "min")},
           "select_and_gather_add": select_and_gather_add,
           "select_and_scatter_add": select_and_scatter_add,
           "conv_general_dilated": conv_general_dilated}
