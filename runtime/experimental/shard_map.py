"""`kiln.experimental.shard_map`: JAX's deprecated spelling of `kiln.shard_map`, kept as JAX
keeps it. `shard_map(f, mesh, in_specs, out_specs, check_rep=True)` is
`kiln.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)`,
manual over every mesh axis; reading the name warns as JAX 0.10.2's module does."""
from ._deprecated import deprecated_names

__all__ = []


def _shard_map(f, mesh, in_specs, out_specs, check_rep=True):
    """`kiln.shard_map` with the mesh and specs given by position, as JAX's old API took them."""
    from ..shard_map import shard_map
    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)


__getattr__ = deprecated_names(__name__, {"shard_map": (
    "jax.experimental.shard_map is deprecated in v0.8.0. Used jax.shard_map instead.",
    lambda: _shard_map)})
