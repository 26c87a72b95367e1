"""conv_general_dilated: N-D convolution with strides, padding, dilations, feature and batch
groups, in any layout (XLA's ConvGeneralDilated, as JAX binds it).

Params: `window_strides`, `padding` (explicit (low, high) pairs; the lax wrapper resolves
"SAME"/"VALID"), `lhs_dilation`, `rhs_dilation`, `dimension_numbers` = (lhs_spec, rhs_spec,
out_spec), each a tuple of axis numbers: (batch, feature, spatial...) for lhs and out,
(out feature, in feature, spatial...) for rhs (JAX's ConvDimensionNumbers),
`feature_group_count`, `batch_group_count`, `precision` (None, or "highest" where the user asked
for full precision: backends then keep to the direct sum's rounding, e.g. no Winograd
transforms; sums are always in the operands' precision), `preferred_element_type`.

Rules (JAX's): the JVP is bilinear; the operands' cotangents are convolutions of the
cotangent with the kernel (flipped, strides and lhs dilation swapped) and with the input
(`_transpose_lhs`, `_transpose_rhs`). Batching folds the vmapped axis into the batch axis
(lhs batched), the output features (rhs batched) or into feature groups (both), and loops
over the examples otherwise.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, type_error, JVP, VJP, BATCH
from .linalg import _result_dtype
from .rule_forms import tangent_rule, cotangent_rule


def dilate_shape(shape, dilation):
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def conv_out_shape(lhs_shape, rhs_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, batch_group_count=1):
    """The result's shape (in out_spec's layout)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    ins = dilate_shape([lhs_shape[a] for a in lhs_spec[2:]], lhs_dilation)
    win = dilate_shape([rhs_shape[a] for a in rhs_spec[2:]], rhs_dilation)
    spatial = []
    for i, w, s, (lo, hi) in zip(ins, win, window_strides, padding):
        span = i + lo + hi - w
        spatial.append(0 if span < 0 or w == 0 else span // s + 1)
    canonical = [lhs_shape[lhs_spec[0]] // batch_group_count, rhs_shape[rhs_spec[0]]] + spatial
    shape = [0] * len(canonical)
    for axis, size in zip(out_spec, canonical):
        shape[axis] = size
    return tuple(shape)


def _conv_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision=None,
               preferred_element_type=None):
    op = "conv_general_dilated"
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nd = lhs.ndim - 2
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise type_error(op, f"lhs and rhs must have the same rank >= 2, got {lhs.str_short()} "
                         f"and {rhs.str_short()}")
    for name, spec in (("lhs", lhs_spec), ("rhs", rhs_spec), ("out", out_spec)):
        if sorted(spec) != list(range(lhs.ndim)):
            raise type_error(op, f"dimension_numbers' {name}_spec {tuple(spec)} is not a "
                             f"permutation of the {lhs.ndim} axes")
    for name, v in (("window_strides", window_strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nd:
            raise type_error(op, f"{name} must have {nd} entries (one per spatial dimension), "
                             f"got {tuple(v)}")
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if any(s < 1 for s in v):
            raise type_error(op, f"{name} must be positive, got {tuple(v)}")
    G, BG = feature_group_count, batch_group_count
    if G < 1 or BG < 1 or (G > 1 and BG > 1):
        raise type_error(op, f"feature_group_count ({G}) and batch_group_count ({BG}) must be "
                         "positive and at most one of them greater than 1")
    c_in, n = lhs.shape[lhs_spec[1]], lhs.shape[lhs_spec[0]]
    o, i = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    if c_in % G or c_in // G != i:
        raise type_error(op, f"lhs feature dimension ({c_in}) must equal feature_group_count "
                         f"({G}) times the rhs input feature dimension ({i})")
    if o % G or o % BG or n % BG:
        raise type_error(op, f"rhs output feature dimension ({o}) must be a multiple of "
                         f"feature_group_count ({G}) and batch_group_count ({BG}), and the "
                         f"lhs batch dimension ({n}) of batch_group_count")
    if lhs.dtype != rhs.dtype and preferred_element_type is None:
        raise TypeError(f"lax.conv_general_dilated requires arguments to have the same dtypes, "
                        f"got {lhs.dtype}, {rhs.dtype}.")
    dtype = _result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    shape = conv_out_shape(lhs.shape, rhs.shape, window_strides, padding, lhs_dilation,
                           rhs_dilation, dimension_numbers, BG)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def _pad_crop(x, axis, lo, hi):
    """`x` padded with zeros (or cropped, for negative amounts) along `axis`."""
    widths = [(0, 0)] * x.ndim
    widths[axis] = (max(0, lo), max(0, hi))
    x = np.pad(x, widths)
    n = x.shape[axis]
    return np.take(x, range(max(0, -lo), max(max(0, -lo), n - max(0, -hi))), axis=axis)


def _dilate(x, axis, r):
    if r == 1 or x.shape[axis] == 0:
        return x
    shape = list(x.shape)
    shape[axis] = 1 + r * (x.shape[axis] - 1)
    out = np.zeros(shape, x.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(None, None, r)
    out[tuple(index)] = x
    return out


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision=None,
               preferred_element_type=None):
    """The NumPy definition: canonical layouts, explicit dilation and padding, then one
    product of the windows with the kernel per group."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    dtype = _result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    x = np.transpose(lhs, lhs_spec).astype(dtype)      # N, C, spatial
    w = np.transpose(rhs, rhs_spec).astype(dtype)      # O, I, spatial
    nd = x.ndim - 2
    for d in range(nd):
        x = _pad_crop(_dilate(x, 2 + d, lhs_dilation[d]), 2 + d, *padding[d])
        w = _dilate(w, 2 + d, rhs_dilation[d])
    G, BG = feature_group_count, batch_group_count
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    win = w.shape[2:]
    out_sp = tuple(0 if xs < ws or ws == 0 else (xs - ws) // s + 1
                   for xs, ws, s in zip(x.shape[2:], win, window_strides))
    out = np.zeros((n // BG, o) + out_sp, dtype)
    if 0 not in out.shape and c * int(np.prod(win)):
        views = np.lib.stride_tricks.sliding_window_view(x, win, axis=tuple(range(2, 2 + nd)))
        views = views[(slice(None), slice(None)) + tuple(
            slice(None, sz * s, s) for sz, s in zip(out_sp, window_strides))]
        # views: N, C, out spatial..., window...; groups: (BG, N/BG) and (G, C/G) and (G*BG, O/..)
        views = views.reshape((BG, n // BG, G, c // G) + views.shape[2:])
        wg = w.reshape((BG * G, o // (BG * G), i) + win)
        sp = "".join(chr(ord("p") + d) for d in range(nd))
        ks = "".join(chr(ord("i") + d) for d in range(nd))
        for bg in range(BG):
            for g in range(G):
                part = np.einsum(f"nc{sp}{ks},oc{ks}->no{sp}", views[bg, :, g],
                                 wg[bg * G + g], optimize=True)
                k = o // (BG * G)
                out[:, (bg * G + g) * k:(bg * G + g + 1) * k] = part
    return np.transpose(out, np.argsort(out_spec)).astype(dtype, copy=False)


conv_general_dilated = register("conv_general_dilated", _conv_eval, _conv_impl)


# ---------------------------------------------------------------------------- derivative rules

def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _split_axis(x, axis, groups):
    """Axis `axis` of size groups*k split into (groups, k)."""
    shape = list(E.aval(x).shape)
    shape[axis:axis + 1] = [groups, shape[axis] // groups]
    return E.reshape(x, new_sizes=tuple(shape), dimensions=None)


def _merge_axis(x, src, dst):
    """Axis `src` merged into axis `dst` (numbered without `src`) as its major part."""
    shape = list(E.aval(x).shape)
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    sizes = [shape[i] for i in range(len(shape)) if i != src]
    sizes[dst] *= shape[src]
    return E.reshape(E.transpose(x, permutation=tuple(perm)), new_sizes=tuple(sizes),
                     dimensions=None)


def _lhs_padding(lhs_sp, rhs_sp, strides, out_sp, padding, lhs_dil, rhs_dil):
    ld, rd = dilate_shape(lhs_sp, lhs_dil), dilate_shape(rhs_sp, rhs_dil)
    od = dilate_shape(out_sp, strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rd, padding)]
    return tuple((b, l + r - 1 - o - b) for b, l, r, o in zip(before, ld, rd, od))


def _rhs_padding(lhs_sp, rhs_sp, strides, out_sp, padding, lhs_dil, rhs_dil):
    ld, rd = dilate_shape(lhs_sp, lhs_dil), dilate_shape(rhs_sp, rhs_dil)
    od = dilate_shape(out_sp, strides)
    return tuple((lo, (o - l) + (r - lo - 1)) for l, r, o, (lo, _) in zip(ld, rd, od, padding))


def _transpose_lhs(g, lhs_aval, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_aval, g_aval = E.aval(rhs), E.aval(g)
    groups = feature_group_count
    if feature_group_count > 1 or batch_group_count > 1:
        groups = max(feature_group_count, batch_group_count)
        rhs = _merge_axis(_split_axis(rhs, rhs_spec[0], groups), rhs_spec[0], rhs_spec[1])
    pads = _lhs_padding([lhs_aval.shape[a] for a in lhs_spec[2:]],
                        [rhs_aval.shape[a] for a in rhs_spec[2:]], window_strides,
                        [g_aval.shape[a] for a in out_spec[2:]], padding, lhs_dilation,
                        rhs_dilation)
    flipped = E.rev(rhs, dimensions=tuple(rhs_spec[2:]))
    out = E.conv_general_dilated(
        g, flipped, window_strides=tuple(lhs_dilation), padding=pads,
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=(tuple(out_spec), _spec_transpose(rhs_spec), tuple(lhs_spec)),
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type)
    if batch_group_count > 1:
        out = _merge_axis(_split_axis(out, lhs_spec[1], batch_group_count), lhs_spec[1],
                          lhs_spec[0])
    return E.cast_like(out, lhs_aval)


def _transpose_rhs(g, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_aval, g_aval = E.aval(lhs), E.aval(g)
    if 0 in g_aval.shape:
        return E.zeros(rhs_aval)
    fg, bg = (batch_group_count, 1) if batch_group_count > 1 else (1, feature_group_count)
    pads = _rhs_padding([lhs_aval.shape[a] for a in lhs_spec[2:]],
                        [rhs_aval.shape[a] for a in rhs_spec[2:]], window_strides,
                        [g_aval.shape[a] for a in out_spec[2:]], padding, lhs_dilation,
                        rhs_dilation)
    out = E.conv_general_dilated(
        lhs, g, window_strides=tuple(rhs_dilation), padding=pads,
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=(_spec_transpose(lhs_spec), _spec_transpose(out_spec),
                           _spec_transpose(rhs_spec)),
        feature_group_count=fg, batch_group_count=bg, precision=precision,
        preferred_element_type=preferred_element_type)
    return E.cast_like(out, rhs_aval)


def _conv_jvp(primals, tangents, out, **params):
    (lhs, rhs), (tl, tr) = primals, tangents
    terms = ([E.conv_general_dilated(tl, rhs, **params)] if tl is not None else []) + \
            ([E.conv_general_dilated(lhs, tr, **params)] if tr is not None else [])
    return terms[0] if len(terms) == 1 else E.add(*terms)


def _conv_vjp(ct, primals, out, **params):
    lhs, rhs = primals
    return [_transpose_lhs(ct, E.aval(lhs), rhs, **params) if E.is_float(lhs) else None,
            _transpose_rhs(ct, lhs, E.aval(rhs), **params) if E.is_float(rhs) else None]


# ---------------------------------------------------------------------------- batching

def _conv_batch(args, dims, **params):
    """The vmapped axis folded into one of the convolution's own axes, as a major part:
    lhs batched -> the batch axis; rhs batched -> the output features; both -> feature
    groups. Other combinations (with groups in the way) loop over the examples."""
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    G, BG = params["feature_group_count"], params["batch_group_count"]
    lhs, rhs = args
    ld, rd = dims
    size = B.batch_size(args, dims)
    if ld is not None and rd is None and BG == 1:
        x = _merge_axis(lhs, ld, lhs_spec[0])
        return _split_axis(E.conv_general_dilated(x, rhs, **params), out_spec[0], size), \
            out_spec[0]
    if rd is not None and ld is None and G == 1 and BG == 1:
        w = _merge_axis(rhs, rd, rhs_spec[0])
        return _split_axis(E.conv_general_dilated(lhs, w, **params), out_spec[1], size), \
            out_spec[1]
    if ld is not None and rd is not None and BG == 1:
        x = _merge_axis(lhs, ld, lhs_spec[1])
        w = _merge_axis(rhs, rd, rhs_spec[0])
        out = E.conv_general_dilated(x, w, **dict(params, feature_group_count=G * size))
        return _split_axis(out, out_spec[1], size), out_spec[1]
    return B.loop_rule(conv_general_dilated)(args, dims, **params)


JVP[conv_general_dilated] = tangent_rule(_conv_jvp)
VJP[conv_general_dilated] = cotangent_rule(_conv_vjp)
BATCH[conv_general_dilated] = _conv_batch
