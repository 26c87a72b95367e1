"""`kiln.experimental.shard_alike`: JAX's `shard_alike(x, y)`, which asks the partitioner to
give two pytrees of equally shaped arrays the same sharding. kiln places a jitted function's
values by `in_shardings`, `out_shardings` and `device_put`, and runs each sharded program as
one replica per device of its mesh, so there is no propagation for the call to steer: it
checks the two trees as JAX does (same structure, same shapes: a `ValueError` otherwise) and
returns them unchanged."""
from ..tree_util import tree_flatten, tree_unflatten

__all__ = ["shard_alike"]


def shard_alike(x, y):
    """`(x, y)`, asked to be sharded alike; their leaves must have the same shapes."""
    x_leaves, x_tree = tree_flatten(x)
    y_leaves, y_tree = tree_flatten(y)
    if x_tree != y_tree:
        raise ValueError("`x` and `y` should have the same tree structure. Got `x` tree "
                         f"structure: {x_tree} and `y` tree structure: {y_tree}")
    for a, b in zip(x_leaves, y_leaves):
        if a.shape != b.shape:
            raise ValueError(
                "The leaves shapes of `x` and `y` should match. Got `x` leaf shape: "
                f"{a.shape} and `y` leaf shape: {b.shape}. File an issue at "
                "https://github.com/jax-ml/jax/issues if you want this feature.")
    return tree_unflatten(x_tree, x_leaves), tree_unflatten(y_tree, y_leaves)
