"""`kiln.experimental.layout`: JAX's `Layout`, `Format` and `with_layout_constraint`.
kiln keeps arrays in row-major order: a `Format` whose layout is row-major, `Layout.AUTO` or
None is accepted wherever a sharding is (`jit`'s `in_shardings` and `out_shardings`,
`device_put`), and `Array.format` reports it; other layouts raise `NotImplementedError`
(runtime/layouts.py describes the types)."""
from ..layouts import Format, Layout, check_layout
from ..tree_util import tree_map

__all__ = ["Format", "Layout", "with_layout_constraint"]


def with_layout_constraint(x, layouts):
    """`x` (a pytree), asked to have `layouts` (a Layout or a pytree prefix of them); kiln's
    layouts are row-major already, so `x` is returned once the layouts are checked."""
    def check(layout, leaf):
        check_layout(layout, leaf.ndim, "with_layout_constraint")
        return leaf
    if isinstance(layouts, Layout) or layouts is None or layouts is Layout.AUTO:
        return tree_map(lambda leaf: check(layouts, leaf), x)
    return tree_map(check, layouts, x, is_leaf=lambda v: isinstance(v, Layout))
