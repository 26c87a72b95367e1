"""JAX's array layout types, `Layout` and `Format` (`kiln.experimental.layout` exports them),
and the checks that let `jit`'s `in_shardings`/`out_shardings`, `device_put` and
`with_layout_constraint` accept a `Format`.

A `Layout` names the order of an array's dimensions in memory, most major first
(`major_to_minor`), with XLA's tiling and sub-byte element size; `Layout.AUTO` leaves the
choice to the compiler. A `Format` pairs a layout with a sharding. kiln keeps every array in
row-major order, the layout JAX writes `Layout(major_to_minor=(0, 1, ..., ndim - 1))` and
XLA's CPU client picks by default: a Format whose layout is that one, `AUTO` or None is
accepted, and its sharding is used as a sharding; any other layout raises
`NotImplementedError`. `Array.format` is the array's row-major layout (tiling `()`, as JAX's
concrete layouts have) with its sharding.
"""
import dataclasses

from .tree_util import tree_map


class _Auto:
    def __repr__(self):
        return "AUTO"


@dataclasses.dataclass(frozen=True)
class Layout:
    """The memory order of an array's dimensions, most major first, with XLA's tiling and
    sub-byte element size (JAX's `Layout`)."""
    major_to_minor: tuple
    tiling: object = None
    sub_byte_element_size_in_bits: int = 0

    AUTO = _Auto()

    def __post_init__(self):
        object.__setattr__(self, "major_to_minor", tuple(self.major_to_minor))

    def update(self, **kwargs):
        """This layout with the fields `kwargs` names replaced."""
        return dataclasses.replace(self, **kwargs)


class Format:
    """A layout and a sharding (JAX's `Format`); a concrete `Layout` needs a concrete
    sharding."""

    def __init__(self, layout=None, sharding=None):
        from .sharding import Sharding
        if isinstance(layout, Layout) and not isinstance(sharding, Sharding):
            raise ValueError(
                "Sharding has to be concrete when layout is of type "
                f"{type(layout)}. Please pass a `kiln.sharding.NamedSharding` or "
                "`kiln.sharding.SingleDeviceSharding` to the sharding argument. Got sharding "
                f"{sharding}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self):
        return f"Format(layout={self.layout!r}, sharding={self.sharding!r})"

    def __eq__(self, other):
        return isinstance(other, Format) and (self.layout, self.sharding) == (
            other.layout, other.sharding)

    def __hash__(self):
        return hash((self.layout, self.sharding))


def row_major(ndim):
    """kiln's (and XLA's default) layout of an `ndim`-dimensional array."""
    return Layout(tuple(range(ndim)), tiling=())


def check_layout(layout, ndim, what):
    """Refuse a layout other than row-major, `AUTO` or None for an `ndim`-dimensional value."""
    if layout is None or layout is Layout.AUTO:
        return
    if not isinstance(layout, Layout):
        raise TypeError(f"{what}: expected a kiln.experimental.layout.Layout, Layout.AUTO or "
                        f"None, got {layout!r}")
    if layout.major_to_minor != tuple(range(ndim)) or layout.tiling not in (None, ()) \
            or layout.sub_byte_element_size_in_bits:
        raise NotImplementedError(
            f"{what}: {layout!r} for a {ndim}-dimensional array is not supported; kiln keeps "
            f"arrays in row-major order, Layout(major_to_minor={tuple(range(ndim))}). Use "
            "that layout, Layout.AUTO or no layout")


def unwrap_format(where, ndim, what):
    """A Format's sharding, once its layout is checked; anything else unchanged."""
    if isinstance(where, Format):
        check_layout(where.layout, ndim, what)
        return where.sharding
    return where


def formats_as_shardings(shardings):
    """`jit`'s `in_shardings` or `out_shardings` with each `Format` replaced by its sharding,
    once its layout is checked to be row-major for as many dimensions as it names."""
    def sharding(where):
        if not isinstance(where, Format):
            return where
        ndim = len(where.layout.major_to_minor) if isinstance(where.layout, Layout) else 0
        return unwrap_format(where, ndim, "jit")
    return tree_map(sharding, shardings, is_leaf=lambda v: isinstance(v, Format))
