"""`kiln.debug.visualize_array_sharding`, `visualize_sharding` and `inspect_array_sharding`.

JAX draws the layout with the `rich` package (and without it raises); kiln prints it as plain
text, with no dependency: a grid with one cell per block of a 1-d or 2-d array, each naming
the devices that hold that block (`CPU 0,1`: a block replicated on devices 0 and 1):

    +-------+-------+
    | CPU 0 | CPU 1 |
    +-------+-------+
    | CPU 2 | CPU 3 |
    +-------+-------+

Cells have one width (JAX scales them by the block sizes). A sharding over an AbstractMesh
(the type of a traced value, sharding_types.py) names mesh positions (`0,1`) instead of
devices. `inspect_array_sharding(x, callback=...)` calls `callback` with each leaf's
sharding: at once for arrays, at trace time inside a specialisation with the sharding of the
leaf's type (kiln runs a specialisation as one program, so there is no sharding the compiler
chose to report).
"""
import builtins

import numpy as np

from .sharding import AbstractMesh, Mesh, NamedSharding
from .tree_util import tree_leaves
from .dispatch import is_traced


def _indices(shape, sharding):
    """{label: index} of each device (or mesh position, over an AbstractMesh)."""
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, AbstractMesh):
        mesh = sharding.mesh
        positions = Mesh(np.arange(mesh.size, dtype=object).reshape(mesh.axis_sizes),
                         mesh.axis_names, mesh.axis_types)
        return {(None, p): i for p, i in NamedSharding(positions, sharding.spec)
                .devices_indices_map(shape).items()}
    return {(d.platform.upper(), d.id): i
            for d, i in sharding.devices_indices_map(shape).items()}


def layout(shape, sharding):
    """The grid of blocks of an array of `shape` (1-d or 2-d) under `sharding`: a list of rows,
    each a list of cell labels (`CPU 0,1`)."""
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError(f"visualize_sharding can only draw 1-d and 2-d arrays; got an array "
                         f"of shape {shape}")
    cells = {}
    for (platform, ident), index in _indices(shape, sharding).items():
        bounds = tuple(s.indices(n)[:2] for s, n in zip(index, shape))
        cells.setdefault(bounds, (platform, []))[1].append(ident)
    rows = sorted({b[0] for b in cells})
    cols = sorted({b[1] for b in cells}) if len(shape) == 2 else [None]
    grid = []
    for r in rows:
        line = []
        for c in cols:
            platform, ids = cells[(r, c) if c is not None else (r,)]
            names = ",".join(map(str, sorted(ids)))
            line.append(names if platform is None else f"{platform} {names}")
        grid.append(line)
    return grid if len(shape) == 2 else [[row[0] for row in grid]]


def render(grid):
    """`grid` (layout's rows of labels) as a plain-text table."""
    width = max(len(label) for row in grid for label in row) + 2
    rule = "+" + "+".join("-" * width for _ in grid[0]) + "+"
    lines = [rule]
    for row in grid:
        lines.append("|" + "|".join(label.center(width) for label in row) + "|")
        lines.append(rule)
    return "\n".join(lines)


def visualize_sharding(shape, sharding, *, use_color=True, scale=1.0, min_width=9,
                       max_width=80, color_map=None):
    """Print the layout of an array of `shape` under `sharding` (JAX's signature; the drawing
    options are accepted and plain text is printed)."""
    builtins.print(render(layout(shape, sharding)))


def _sharding_of(x):
    if is_traced(x):
        from .introspection import typeof
        return typeof(x).sharding
    return x.sharding


def visualize_array_sharding(arr, **kwargs):
    """Print the layout of `arr` over its devices (the type's, for a traced value)."""
    visualize_sharding(arr.shape, _sharding_of(arr), **kwargs)


def inspect_array_sharding(value, *, callback):
    """Call `callback(sharding)` for each array leaf of `value` (see the module docstring)."""
    for leaf in tree_leaves(value):
        callback(_sharding_of(leaf))
