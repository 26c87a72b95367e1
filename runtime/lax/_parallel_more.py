"""`kiln.lax`'s point-to-point, ragged and type-level collectives (JAX's names and signatures),
composed from the collectives of `_parallel`:

- `psend(x, axis_name, perm)` / `precv(token, out_shape, axis_name, perm)`: a send and the
  matching receive. `psend` returns a `Token` that carries what each member of the axis
  receives (a `ppermute` of `x` by `perm`); `precv` given that token and the same axis and
  `perm` returns it, checked against `out_shape`. A `precv` whose token does not come from such
  a `psend` is a `ValueError` (JAX 0.10.2 runs the pair only on GPUs, through NCCL).
- `ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
  axis_name)`: JAX's semantics (its docstring's SEND/RECEIVE loop): every member gathers all
  operands and the senders' offsets, and each row of `output` takes the row of the last slice
  that covers it. Differentiable through `all_gather` and indexing.
- `pcast(x, axis_name, *, to)`: JAX's checks of the names and of `to`, then the identity on
  values; inside a shard_map body, `to="varying"` stages a `copy` that vma.py records as
  varying over the named axes (what `typeof` shows and `check_vma` checks).
"""
import numpy as np

from ..array import to_array
from ..dispatch import bind, is_traced
from .. import vma
from ..compiler.primitives import PRIMITIVES
from ..tree_util import tree_map
from . import _ops
from ._parallel import _names, _size, all_gather, all_to_all, ppermute
from ._staging import Token

__all__ = ["pcast", "psend", "precv", "ragged_all_to_all"]

_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x, axis_name, *, to):
    """`x` (a pytree) cast to `to` ("varying", "reduced" or "unreduced") over the named axes:
    the identity on values in kiln."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ValueError(f"Got unexpected `to` value {to!r}. Allowed `to` values are: "
                         f"{set(_PCAST_TO)}")
    names = _names("pcast", axis_name)
    return tree_map(lambda v: _cast(to_array(v, "lax.pcast"), names, to), x)


def _cast(v, names, to):
    """`v` as pcast gives it: inside a shard_map body a `copy` of it recorded as varying over
    `names` too (to="varying"), or as unreduced over them and no longer varying over them
    (to="unreduced": a shard_map result whose out_specs make it unreduced is the sum of the
    devices' values) or as reduced over them (vma.py); else `v` itself."""
    if not is_traced(v) or not vma.staging_a_body():
        return v
    out = bind(PRIMITIVES["copy"], v)
    if to == "varying":
        vma.mark(out, vma.varying(v) | set(names))
    else:
        vma.mark(out, vma.varying(v) - set(names) if to == "unreduced" else vma.varying(v))
        unreduced, reduced = vma.partial_axes(v)
        if to == "unreduced":
            unreduced = unreduced | set(names)
        else:
            reduced = reduced | set(names)
        vma.mark_partial(out, unreduced, reduced)
    return out


class SentToken(Token):
    """The token of a `psend`: what each member of the axis receives, for the `precv` that
    takes it."""

    def __init__(self, received, names, perm):
        self.received, self.names, self.perm = received, names, perm

    def __repr__(self):
        return f"Token(psend over {self.names}, perm={self.perm})"


def _perm(perm):
    return tuple((int(s), int(d)) for s, d in perm)


def psend(x, axis_name, perm):
    """Send `x` (a pytree: one token per leaf) from member `src` to member `dst` of the named
    axis for each pair of `perm`; the token is for the matching `precv`."""
    names = _names("psend", axis_name)
    perm = _perm(perm)
    return tree_map(lambda v: SentToken(ppermute(to_array(v, "lax.psend"), names, perm),
                                        names, perm), x)


def precv(token, out_shape, axis_name, perm):
    """What the `psend` whose token this is sent to this member (zeros where `perm` sends it
    nothing), of `out_shape`'s shape and dtype."""
    names, perm = _names("precv", axis_name), _perm(perm)
    if not isinstance(token, SentToken):
        raise ValueError("lax.precv: the token must be the result of a lax.psend over the same "
                         "axis and perm: kiln delivers what that psend sent (JAX 0.10.2 runs "
                         "psend/precv only on GPUs); a token from create_token or after_all "
                         "carries no data")
    if (token.names, token.perm) != (names, perm):
        raise ValueError(f"lax.precv: axis_name={names} and perm={perm} differ from those of "
                         f"the psend that made the token (axis_name={token.names}, "
                         f"perm={token.perm})")
    value = token.received
    want = (tuple(out_shape.shape), np.dtype(out_shape.dtype))
    if (value.shape, value.dtype) != want:
        raise TypeError(f"lax.precv: out_shape is {want[1].name}{list(want[0])}, but the psend "
                        f"sent {value.dtype.name}{list(value.shape)}")
    return value


def _check_sizes(operand, output, sizes):
    for what, v in sizes.items():
        if v.dtype.kind not in "iu":
            raise ValueError(f"ragged_all_to_all {what} must be integer type.")
        if v.ndim != 1 or v.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {what} must be rank 1 with positive dimension "
                             f"size, but got shape {v.shape}")
    if operand.shape[1:] != output.shape[1:] or operand.ndim < 1:
        raise TypeError(f"ragged_all_to_all: operand {operand.shape} and output {output.shape} "
                        f"must have the same shape after their leading dimension")
    if operand.dtype != output.dtype:
        raise TypeError(f"ragged_all_to_all: operand ({operand.dtype}) and output "
                        f"({output.dtype}) must have one dtype")
    lengths = {v.shape[0] for v in sizes.values()}
    if len(lengths) != 1:
        raise ValueError(f"ragged_all_to_all: the offsets and sizes must have one length, got "
                         f"{[v.shape[0] for v in sizes.values()]}")
    return lengths.pop()


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                      *, axis_name, axis_index_groups=None):
    """`output` with the slices every member sends to this one written in: slice i of member
    `src`'s operand (rows `input_offsets[i]` to `+send_sizes[i]`) goes to member
    `i // (K / axis size)`, at its rows from `output_offsets[i]`, for `recv_sizes` rows."""
    names = _names("ragged_all_to_all", axis_name, axis_index_groups)
    operand = to_array(operand, "lax.ragged_all_to_all")
    output = to_array(output, "lax.ragged_all_to_all")
    sizes = {"input_offsets": input_offsets, "send_sizes": send_sizes,
             "output_offsets": output_offsets, "recv_sizes": recv_sizes}
    sizes = {k: to_array(v, "lax.ragged_all_to_all") for k, v in sizes.items()}
    count, members = _check_sizes(operand, output, sizes), _size(names)
    if count % members:
        raise ValueError(f"ragged_all_to_all: the offsets and sizes have {count} entries, which "
                         f"is not a multiple of the size {members} of the axis {names}")
    per_member = count // members
    # On this member, entry i = src * per_member + t is what member src sent as its entry
    # (this member) * per_member + t: its input and output offsets.
    starts = _ops.convert_element_type(
        all_to_all(sizes["input_offsets"], names, 0, 0, tiled=True), np.int32)
    at = _ops.convert_element_type(
        all_to_all(sizes["output_offsets"], names, 0, 0, tiled=True), np.int32)
    length = _ops.convert_element_type(sizes["recv_sizes"], np.int32)
    rows = _ops.iota(np.int32, output.shape[0])[:, None]
    covered = (rows >= at[None, :]) & (rows < (at + length)[None, :])     # (M, K)
    entries = _ops.iota(np.int32, count)[None, :]
    last = _ops.reduce_max(_ops.select(covered, _ops.broadcast_in_dim(
        entries, covered.shape, (0, 1)), _ops.full(covered.shape, -1, np.int32)), (1,))
    entry = _ops.max(last, np.int32(0))
    src = entry // np.int32(per_member)
    row = starts[entry] + rows[:, 0] - at[entry]
    received = all_gather(operand, names)[src, row]
    hit = _ops.broadcast_in_dim(last >= 0, output.shape, (0,))
    return _ops.select(hit, received, output)
