"""Window reductions (pooling): reduce_window_sum, reduce_window_max, reduce_window_min, and the
two primitives max/min pooling's derivatives are made of, select_and_gather_add and
select_and_scatter_add (XLA's, as JAX uses them).

Window params: `window_dimensions`, `window_strides`, `padding` ((low, high) pairs, padded with
the reduction's identity), `base_dilation` (holes of identity between operand elements) and
`window_dilation`, one entry per operand axis. The select primitives take
`select_prim` ("ge": max pooling, the first maximal element of a window; "le": min) and no
base dilation.

Rules (JAX's): the sum is linear and its transpose pads the cotangent (interior padding for
the strides) and sums windows over it; max/min's JVP gathers each window's tangent at its
selected element (select_and_gather_add), the VJP scatters each cotangent there
(select_and_scatter_add); those two are each other's transposes. Batching adds a window of 1
along the batch axis.
"""
import numpy as np

from ..ir.abstract import ShapedArray
from . import emit as E
from . import batching as B
from .core import register, type_error, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule
from .convolution import dilate_shape, _lhs_padding

WINDOW_PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation",
                 "window_dilation")


def window_out_shape(shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation):
    out = []
    for d, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                         base_dilation, window_dilation):
        span = dilate_shape([d], [bd])[0] + lo + hi
        eff = dilate_shape([w], [wd])[0]
        out.append(0 if span < eff or w == 0 else (span - eff) // s + 1)
    return tuple(out)


def _check(op, x, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    for name, v in zip(WINDOW_PARAMS, (window_dimensions, window_strides, padding,
                                       base_dilation, window_dilation)):
        if len(v) != x.ndim:
            raise type_error(op, f"{name} must have one entry per operand axis ({x.ndim}), got "
                             f"{tuple(v)}")
    for name, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if any(s < 1 for s in v):
            raise type_error(op, f"{name} must be positive, got {tuple(v)}")


def identity(kind, dtype):
    dtype = np.dtype(dtype)
    if kind == "sum":
        return dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-np.inf if kind == "max" else np.inf)
    if dtype.kind == "b":
        return np.bool_(kind == "min")
    info = np.iinfo(dtype)
    return dtype.type(info.min if kind == "max" else info.max)


def windows(x, fill, window_dimensions, window_strides, padding, base_dilation,
            window_dilation):
    """A view of shape (output..., window...) of `x` dilated and padded with `fill`."""
    for axis, bd in enumerate(base_dilation):
        if bd > 1 and x.shape[axis] > 1:
            shape = list(x.shape)
            shape[axis] = dilate_shape([x.shape[axis]], [bd])[0]
            y = np.full(shape, fill, x.dtype)
            index = [slice(None)] * x.ndim
            index[axis] = slice(None, None, bd)
            y[tuple(index)] = x
            x = y
    x = np.pad(x, [(max(0, lo), max(0, hi)) for lo, hi in padding], constant_values=fill)
    x = x[tuple(slice(max(0, -lo), max(max(0, -lo), x.shape[a] - max(0, -hi)))
                for a, (lo, hi) in enumerate(padding))]
    eff = dilate_shape(window_dimensions, window_dilation)
    out = window_out_shape(x.shape, window_dimensions, window_strides, [(0, 0)] * x.ndim,
                           [1] * x.ndim, window_dilation)
    if 0 in out or 0 in window_dimensions:
        return np.full(out + tuple(window_dimensions), fill, x.dtype)
    view = np.lib.stride_tricks.sliding_window_view(x, eff)
    index = tuple(slice(None, o * s, s) for o, s in zip(out, window_strides)) + \
        tuple(slice(None, None, wd) for wd in window_dilation)
    return view[index]


# ---------------------------------------------------------------------------- reduce_window_*

_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def _reduce_eval(kind):
    def rule(x, **params):
        _check(f"reduce_window_{kind}", x, *(params[p] for p in WINDOW_PARAMS))
        if kind == "sum" and x.dtype.kind == "b":
            raise type_error("reduce_window_sum", "does not accept booleans")
        return ShapedArray(window_out_shape(x.shape, *(params[p] for p in WINDOW_PARAMS)),
                           x.dtype, x.weak_type)
    return rule


def _reduce_impl(kind):
    def impl(x, **params):
        nd = x.ndim
        if nd == 0:   # no axis: one window, holding the value itself
            return np.array(x, x.dtype)
        view = windows(x, identity(kind, x.dtype), *(params[p] for p in WINDOW_PARAMS))
        if view.size == 0:
            return np.full(view.shape[:nd], identity(kind, x.dtype), x.dtype)
        return _REDUCE[kind](view, axis=tuple(range(nd, 2 * nd))).astype(x.dtype, copy=False)
    return impl


reduce_window_sum, reduce_window_max, reduce_window_min = (
    register(f"reduce_window_{k}", _reduce_eval(k), _reduce_impl(k)) for k in ("sum", "max", "min"))


# ---------------------------------------------------------------------------- select_and_*

SELECT_PARAMS = ("window_dimensions", "window_strides", "padding", "window_dilation")


def _selected(operand, select_prim, window_dimensions, window_strides, padding,
              window_dilation):
    """Per output position, the flat index into `operand` of its window's selected element
    (-1 where the window lies in the padding only)."""
    nd = operand.ndim
    kind = "max" if select_prim == "ge" else "min"
    fill = identity(kind, operand.dtype)
    positions = np.arange(operand.size).reshape(operand.shape)
    base = (1,) * nd
    view = windows(operand, fill, window_dimensions, window_strides, padding, base,
                   window_dilation)
    pos = windows(positions, -1, window_dimensions, window_strides, padding, base,
                  window_dilation)
    out = view.shape[:nd]
    if view.size == 0:
        return np.full(out, -1, np.int64)
    flat, pflat = view.reshape(out + (-1,)), pos.reshape(out + (-1,))
    pick = (np.argmax if select_prim == "ge" else np.argmin)(flat, axis=-1)   # first one
    return np.take_along_axis(pflat, pick[..., None], -1)[..., 0]


def _select_eval(op):
    def rule(values, operand, *, select_prim, **params):
        if select_prim not in ("ge", "le"):
            raise type_error(op, f"select_prim must be 'ge' or 'le', got {select_prim!r}")
        _check(op, operand, params["window_dimensions"], params["window_strides"],
               params["padding"], (1,) * operand.ndim, params["window_dilation"])
        out = window_out_shape(operand.shape, *(params[p] for p in SELECT_PARAMS[:3]),
                               (1,) * operand.ndim, params["window_dilation"])
        want = out if op == "select_and_scatter_add" else operand.shape
        if values.shape != want:
            raise type_error(op, f"source shape {values.shape} must be the windows' shape {out}")
        return ShapedArray(operand.shape if op == "select_and_scatter_add" else out,
                           values.dtype, values.weak_type)
    return rule


def _scatter_impl(source, operand, *, select_prim, **params):
    chosen = _selected(operand, select_prim, **params)
    out = np.zeros(operand.size, source.dtype)
    keep = chosen >= 0
    np.add.at(out, chosen[keep], source[keep])
    return out.reshape(operand.shape)


def _gather_impl(tangents, operand, *, select_prim, **params):
    chosen = _selected(operand, select_prim, **params)
    if tangents.size == 0:
        return np.zeros(chosen.shape, tangents.dtype)
    flat = tangents.reshape(-1)
    return np.where(chosen >= 0, flat[np.maximum(chosen, 0)], 0).astype(tangents.dtype)


select_and_scatter_add = register("select_and_scatter_add",
                                  _select_eval("select_and_scatter_add"), _scatter_impl)
select_and_gather_add = register("select_and_gather_add",
                                 _select_eval("select_and_gather_add"), _gather_impl)


# ---------------------------------------------------------------------------- derivatives

def _select_params(kind, params):
    if any(d != 1 for d in params["base_dilation"]):
        raise NotImplementedError(f"the derivative of reduce_window_{kind} with base_dilation "
                                  f"{params['base_dilation']} (JAX has none either)")
    return dict(select_prim="ge" if kind == "max" else "le",
                **{p: params[p] for p in SELECT_PARAMS})


def _sum_jvp(primals, tangents, out, **params):
    return E.reduce_window_sum(tangents[0], **params)


def _sum_vjp(ct, primals, out, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
    x = E.aval(primals[0])
    pads = _lhs_padding(x.shape, window_dimensions, window_strides, E.aval(ct).shape, padding,
                        base_dilation, window_dilation)
    padded = E.pad(ct, E.scalar(0, E.aval(ct)),
                   padding_config=tuple((lo, hi, s - 1) for (lo, hi), s in
                                        zip(pads, window_strides)))
    return [E.reduce_window_sum(padded, window_dimensions=window_dimensions,
                                window_strides=tuple(base_dilation),
                                padding=((0, 0),) * x.ndim, base_dilation=(1,) * x.ndim,
                                window_dilation=window_dilation)]


def _chooser_jvp(kind):
    def jvp(primals, tangents, out, **params):
        return E.select_and_gather_add(tangents[0], primals[0], **_select_params(kind, params))
    return jvp


def _chooser_vjp(kind):
    def vjp(ct, primals, out, **params):
        return [E.select_and_scatter_add(ct, primals[0], **_select_params(kind, params))]
    return vjp


def _linear_first(other):
    """JVP and VJP of a primitive linear in its first operand whose transpose is `other`."""
    def jvp(primals, tangents, out, **params):
        if tangents[0] is None:
            return None
        return E.bind(other[0], tangents[0], primals[1], **params)

    def vjp(ct, primals, out, **params):
        return [E.bind(other[1], ct, primals[1], **params), None]
    return jvp, vjp


# ---------------------------------------------------------------------------- batching

def _unit_window(params):
    out = dict(params)
    for p, unit in (("window_dimensions", 1), ("window_strides", 1), ("padding", (0, 0)),
                    ("base_dilation", 1), ("window_dilation", 1)):
        if p in out:
            out[p] = (unit,) + tuple(out[p])
    return out


def _window_batch(prim):
    def rule(args, dims, **params):
        size = B.batch_size(args, dims)
        args = [B.to_front(a, d, size) for a, d in zip(args, dims)]
        return E.bind(prim.name, *args, **_unit_window(params)), 0
    return rule


for _kind, _prim in (("sum", reduce_window_sum), ("max", reduce_window_max),
                     ("min", reduce_window_min)):
    JVP[_prim] = tangent_rule(_sum_jvp if _kind == "sum" else _chooser_jvp(_kind))
    VJP[_prim] = cotangent_rule(_sum_vjp if _kind == "sum" else _chooser_vjp(_kind))
for _prim, _names in ((select_and_scatter_add, ("select_and_scatter_add", "select_and_gather_add")),
                      (select_and_gather_add, ("select_and_gather_add", "select_and_scatter_add"))):
    _jvp, _vjp = _linear_first(_names)
    JVP[_prim] = tangent_rule(_jvp)
    VJP[_prim] = cotangent_rule(_vjp)
for _prim in (reduce_window_sum, reduce_window_max, reduce_window_min, select_and_scatter_add,
              select_and_gather_add):
    BATCH[_prim] = _window_batch(_prim)
