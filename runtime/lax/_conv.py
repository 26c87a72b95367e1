"""`kiln.lax`'s convolutions: JAX's names and signatures over the one primitive
`conv_general_dilated` (compiler/primitives/convolution.py).

The wrappers resolve what the primitive takes explicitly: padding strings ("SAME", "VALID",
"SAME_LOWER") to (low, high) pairs, dimension numbers given as strings ("NHWC", "HWIO",
"NHWC"), as a ConvDimensionNumbers or None (NCHW.../OIHW...) to axis numbers, and defaults.
"""
import operator
from typing import NamedTuple, Sequence

import numpy as np

from ..array import to_array
from ..dispatch import bind
from ..compiler.ir import dtypes
from ..compiler.primitives import PRIMITIVES as P
from ..compiler.primitives.convolution import conv_out_shape
from ._precision import conv_precision

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv",
           "conv_dimension_numbers", "conv_general_dilated", "conv_general_dilated_local",
           "conv_general_dilated_patches", "conv_general_permutations", "conv_general_shape_tuple",
           "conv_shape_tuple", "conv_transpose", "conv_transpose_shape_tuple",
           "conv_with_general_padding", "padtype_to_pads"]


class ConvDimensionNumbers(NamedTuple):
    """Axis numbers: lhs_spec and out_spec = (batch, feature, spatial...), rhs_spec =
    (out feature, in feature, spatial...)."""
    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


ConvGeneralDilatedDimensionNumbers = ConvDimensionNumbers | tuple | None


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) padding pairs for "SAME", "SAME_LOWER" or "VALID" (XLA's rules)."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind in ("SAME", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_shape, window_strides)]
        total = [max(0, (o - 1) * s + w - i)
                 for o, s, w, i in zip(out, window_strides, window_shape, in_shape)]
        if kind == "SAME":
            return [(t // 2, t - t // 2) for t in total]
        return [(t - t // 2, t // 2) for t in total]
    raise TypeError(f"Unknown padding type: {padding}.")


def conv_general_permutations(dimension_numbers):
    """Axis numbers of string specs: ("NCHW", "OIHW", "NCHW") -> (lhs, rhs, out) perms."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    for spec, chars in ((lhs_spec, "NC"), (rhs_spec, "OI"), (out_spec, "NC")):
        if any(spec.count(c) != 1 for c in chars):
            raise TypeError(f"conv_general_permutations: spec {spec!r} must contain each of "
                            f"{chars[0]!r} and {chars[1]!r} once")
    if len(lhs_spec) != len(rhs_spec) or len(lhs_spec) != len(out_spec):
        raise TypeError(f"conv_general_permutations: specs must have equal lengths, got "
                        f"{dimension_numbers}")
    if (set(lhs_spec) - set("NC")) != (set(rhs_spec) - set("OI")) or \
            (set(out_spec) - set("NC")) != (set(rhs_spec) - set("OI")):
        raise ValueError(f"conv_general_permutations: the spatial dimensions of the specs "
                         f"{dimension_numbers} must be the same letters")
    spatial = [c for c in rhs_spec if c not in "OI"]
    lhs_perm = (lhs_spec.index("N"), lhs_spec.index("C")) + tuple(
        lhs_spec.index(c) for c in spatial)
    rhs_perm = (rhs_spec.index("O"), rhs_spec.index("I")) + tuple(
        rhs_spec.index(c) for c in spatial)
    out_perm = (out_spec.index("N"), out_spec.index("C")) + tuple(
        out_spec.index(c) for c in spatial)
    return lhs_perm, rhs_perm, out_perm


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """A ConvDimensionNumbers from None (NCHW..., OIHW..., NCHW...), axis numbers or specs."""
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(operator.index(a) for a in s)
                                      for s in dimension_numbers))
    if len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if all(isinstance(s, str) for s in dimension_numbers):
        if any(len(s) != len(lhs_shape) for s in dimension_numbers):
            raise TypeError(f"convolution dimension_numbers {dimension_numbers} must each have "
                            f"{len(lhs_shape)} letters, one per axis")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*(tuple(operator.index(a) for a in s)
                                  for s in dimension_numbers))


def _pairs(padding, n):
    pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    if len(pads) != n:
        raise ValueError(f"convolution padding must have {n} (low, high) pairs, got {padding}")
    return pads


def _ints(v, n, default=1):
    return (default,) * n if v is None else tuple(operator.index(x) for x in v)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    x = to_array(lhs, "lax.conv_general_dilated")
    w = to_array(rhs, "lax.conv_general_dilated")
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    n = x.ndim - 2
    lhs_dilation, rhs_dilation = _ints(lhs_dilation, n), _ints(rhs_dilation, n)
    strides = _ints(window_strides, n)
    if isinstance(padding, str):
        if lhs_dilation != (1,) * n and padding.upper() != "VALID":
            raise ValueError("conv_general_dilated: padding strings other than 'VALID' cannot "
                             "be combined with lhs_dilation; give explicit (low, high) pairs")
        ins = [x.shape[a] for a in dn.lhs_spec[2:]]
        win = [1 + r * (w.shape[a] - 1) if w.shape[a] else 0
               for a, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads(ins, win, strides, padding)
    pet = None if preferred_element_type is None else dtypes.canonicalize(preferred_element_type)
    return bind(P["conv_general_dilated"], x, w, window_strides=strides,
                padding=_pairs(padding, n), lhs_dilation=lhs_dilation,
                rhs_dilation=rhs_dilation, dimension_numbers=tuple(tuple(s) for s in dn),
                feature_group_count=operator.index(feature_group_count),
                batch_group_count=operator.index(batch_group_count),
                precision=conv_precision(precision), preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """NCHW/OIHW convolution without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


def _transpose_padding(k, s, padding):
    """(low, high) padding of the transposed convolution of one spatial axis."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        lo, total = k - padding[0] - 1, 2 * k - 2 - padding[0] - padding[1]
    return lo, total - lo


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The gradient of a strided convolution as a convolution with lhs dilation (JAX's
    conventions, `use_consistent_padding` included)."""
    x, w = to_array(lhs, "lax.conv_transpose"), to_array(rhs, "lax.conv_transpose")
    if x.ndim != w.ndim or x.ndim < 2:
        raise TypeError(f"lax.conv_transpose requires operands of equal rank >= 2, got "
                        f"{x.shape} and {w.shape}")
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_LAYOUTS[x.ndim]
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    n = x.ndim - 2
    rhs_dilation = _ints(rhs_dilation, n)
    if use_consistent_padding or isinstance(padding, str):
        per_axis = [padding] * n if isinstance(padding, str) else [tuple(p) for p in padding]
        ks = [1 + r * (w.shape[a] - 1) if w.shape[a] else 0
              for a, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = [_transpose_padding(k, s, p) for k, s, p in zip(ks, strides, per_axis)]
    if transpose_kernel:
        w = bind(P["rev"], w, dimensions=tuple(dn.rhs_spec[2:]))
        perm = list(range(w.ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        w = bind(P["transpose"], w, permutation=tuple(perm))
    return conv_general_dilated(x, w, (1,) * n, padding, tuple(strides), rhs_dilation, dn,
                                precision=precision, preferred_element_type=preferred_element_type)


def _patch_kernel(dtype, channels, filter_shape, rhs_spec):
    """The kernel whose convolution (feature groups = channels) copies each window position
    of each channel into its own output feature (channel-major)."""
    size = int(np.prod(filter_shape, dtype=np.int64))
    physical = (1, 1) + tuple(filter_shape)
    spatial = [physical[a] for a in rhs_spec[2:]]
    eye = np.eye(size, dtype=dtype).reshape((size, 1) + tuple(spatial))
    canonical = np.tile(eye, (channels,) + (1,) * (eye.ndim - 1))
    return np.transpose(canonical, np.argsort(rhs_spec))


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """Each window's elements, channel-major, in the output's feature axis."""
    x = to_array(lhs, "lax.conv_general_dilated_patches")
    filter_shape = tuple(operator.index(f) for f in filter_shape)
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    channels = x.shape[dn.lhs_spec[1]]
    kernel = _patch_kernel(x.dtype, channels, filter_shape, dn.rhs_spec)
    return conv_general_dilated(x, kernel, window_strides, padding, lhs_dilation, rhs_dilation,
                                dn, feature_group_count=channels,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution with a different kernel at each output position (an unshared
    convolution): rhs holds, per output position, (out features, in features * window)."""
    x = to_array(lhs, "lax.conv_general_dilated_local")
    w = to_array(rhs, "lax.conv_general_dilated_local")
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    canonical = ConvDimensionNumbers(dn.lhs_spec, dn.rhs_spec, dn.lhs_spec)
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, canonical)
    # patches (lhs layout): batch, patch features, spatial; rhs: out, patch features, spatial
    nd = x.ndim - 2
    p_sp, w_sp = tuple(dn.lhs_spec[2:]), tuple(dn.rhs_spec[2:])
    prod = bind(P["dot_general"], patches, w,
                dimension_numbers=(((dn.lhs_spec[1],), (dn.rhs_spec[1],)), (p_sp, w_sp)),
                precision=None, preferred_element_type=None)
    # prod: spatial..., batch, out features -> out_spec
    canonical_axes = [nd, nd + 1] + list(range(nd))    # positions of N, C, spatial in prod
    perm = [0] * x.ndim
    for axis, src in zip(dn.out_spec, canonical_axes):
        perm[axis] = src
    return bind(P["transpose"], prod, permutation=tuple(perm))


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The NCHW result shape of a convolution with explicit padding pairs."""
    iota = tuple(range(len(lhs_shape)))
    n = len(lhs_shape) - 2
    return conv_out_shape(tuple(lhs_shape), tuple(rhs_shape), tuple(strides), tuple(pads),
                          (1,) * n, (1,) * n, (iota, iota, iota), batch_group_count)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    if isinstance(padding, str):
        padding = padtype_to_pads([lhs_shape[a] for a in dn.lhs_spec[2:]],
                                  [rhs_shape[a] for a in dn.rhs_spec[2:]], window_strides,
                                  padding)
    return conv_out_shape(tuple(lhs_shape), tuple(rhs_shape), tuple(window_strides),
                          tuple(map(tuple, padding)), (1,) * n, (1,) * n, tuple(dn))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    ks = [rhs_shape[a] for a in dn.rhs_spec[2:]]
    if isinstance(padding, str):
        padding = [_transpose_padding(k, s, padding) for k, s in zip(ks, window_strides)]
    return conv_out_shape(tuple(lhs_shape), tuple(rhs_shape), (1,) * n,
                          tuple(map(tuple, padding)), tuple(window_strides), (1,) * n, tuple(dn))
