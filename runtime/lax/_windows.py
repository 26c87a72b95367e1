"""`kiln.lax.reduce_window`: JAX's name and signature over the window primitives
(compiler/primitives/windows.py).

lax.add, lax.max and lax.min (or jnp.add, jnp.maximum, jnp.minimum) with their identity as a
concrete `init_value` bind reduce_window_sum/max/min, which have derivative rules and native
lowerings. Any other computation or init value is the general form: the operand padded (and
base-dilated) with `init_value`, one strided slice per window position, folded with
`computation` in window order starting from `init_value` (XLA's semantics); it is built from
pad, slice and the computation's own primitives, so every transform and backend takes it.
"""
import itertools
import operator

import numpy as np

from ..array import to_array
from ..dispatch import bind
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.windows import identity, window_out_shape
from . import _ops
from ._conv import padtype_to_pads

__all__ = ["reduce_window", "reduce_window_shape_tuple"]

_MONOIDS = {"add": "sum", "max": "max", "min": "min", "maximum": "max", "minimum": "min"}


def _monoid(computation, init, dtype):
    """"sum", "max" or "min" when (computation, init) is that monoid with its identity."""
    name = getattr(computation, "__name__", None)
    module = getattr(computation, "__module__", "") or ""
    kind = _MONOIDS.get(name)
    if kind is None or not module.startswith("kiln."):
        return None
    try:
        value = np.asarray(init)
    except TypeError:           # a traced init value: the general form
        return None
    if value.shape != () or value.dtype == object:
        return None
    return kind if value == identity(kind, dtype) else None


def _window_params(x, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    n = x.ndim
    dims = tuple(operator.index(d) for d in window_dimensions)
    strides = (1,) * n if window_strides is None else tuple(map(operator.index, window_strides))
    base = (1,) * n if base_dilation is None else tuple(map(operator.index, base_dilation))
    wdil = (1,) * n if window_dilation is None else tuple(map(operator.index, window_dilation))
    if isinstance(padding, str):
        eff = [(d - 1) * r + 1 for d, r in zip(dims, wdil)]
        padding = padtype_to_pads(x.shape, eff, strides, padding)
    pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    return dict(window_dimensions=dims, window_strides=strides, padding=pads,
                base_dilation=base, window_dilation=wdil)


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    x = to_array(operand, "lax.reduce_window")
    params = _window_params(x, window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    kind = _monoid(computation, init_value, x.dtype)
    if kind is not None:
        return bind(P[f"reduce_window_{kind}"], x, **params)
    return _general(x, to_array(init_value, "lax.reduce_window"), computation, params)


def _general(x, init, computation, params):
    init = _ops.convert_element_type(init, x.dtype)
    config = [(max(0, lo), max(0, hi), b - 1)
              for (lo, hi), b in zip(params["padding"], params["base_dilation"])]
    padded = _ops.pad(x, init, config)
    crop_lo = [max(0, -lo) for lo, _ in params["padding"]]
    out = window_out_shape(x.shape, *(params[p] for p in ("window_dimensions", "window_strides",
                                                          "padding", "base_dilation",
                                                          "window_dilation")))
    acc = _ops.broadcast_in_dim(init, out, ())
    if 0 in out:
        return acc
    strides = params["window_strides"]
    for k in itertools.product(*map(range, params["window_dimensions"])):
        start = [c + i * r for c, i, r in zip(crop_lo, k, params["window_dilation"])]
        limit = [s + (o - 1) * st + 1 for s, o, st in zip(start, out, strides)]
        acc = computation(acc, _ops.slice(padded, start, limit, strides))
    return acc


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    n = len(operand_shape)
    return window_out_shape(tuple(operand_shape), tuple(window_dimensions),
                            tuple(window_strides), tuple(map(tuple, padding)),
                            base_dilation or (1,) * n, window_dilation or (1,) * n)
