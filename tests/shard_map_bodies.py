"""shard_map bodies that tests/test_pjrt_shard_map.py runs through kiln and, with these imports
replaced by JAX's, through JAX 0.10.2 (`SPECS`: each one's shard_map arguments over a 4 x 2
mesh with axes "x" and "y"; `DIFFERENTIATED`: those whose grad and vmap are compared too;
`other_mesh`: a jitted function with a shard_map over a mesh given apart)."""
from kiln import lax, P
import kiln.numpy as jnp


def psum_index(a):
    return lax.psum(a, "y") * lax.axis_index("x").astype(jnp.float32)


def gather_permute(a):
    ring = [(i, (i + 1) % 4) for i in range(4)]
    return jnp.sin(lax.all_gather(a, "x", tiled=True)[:2]) * a + lax.ppermute(a, "x", ring)


def scatter_all_to_all(a):
    return (lax.psum_scatter(a, "y", scatter_dimension=0, tiled=True).sum() * a
            + lax.all_to_all(a, "y", 0, 0, tiled=True) + lax.axis_index("y"))


def partial(a):
    return lax.psum(jnp.cos(a), "x")


def unchecked(a):
    return a * 2.0


def two_results(a):
    return lax.psum(a, "x"), jnp.exp(a) * 3.0


def other_mesh(shard_map, mesh):
    """A jitted function whose shard_map runs over `mesh`, not over its argument's mesh."""
    inner = shard_map(lambda a: lax.psum(a * 2.0, "y"), mesh=mesh, in_specs=P("x"),
                      out_specs=P("x"))
    return lambda a: inner(a) + 1.0


SPECS = {
    "psum_index": dict(in_specs=P("x", "y"), out_specs=P("x")),
    "gather_permute": dict(in_specs=P("x", "y"), out_specs=P("x", "y")),
    "scatter_all_to_all": dict(in_specs=P("x", "y"), out_specs=P("x", "y")),
    "partial": dict(in_specs=P("x"), out_specs=P(), axis_names={"x"}),
    "unchecked": dict(in_specs=P("x", "y"), out_specs=P(), check_vma=False),
    "two_results": dict(in_specs=P("x", "y"), out_specs=(P(None, "y"), P("x", "y"))),
}
BODIES = {name: globals()[name] for name in SPECS}
DIFFERENTIATED = ["gather_permute", "partial", "unchecked", "two_results"]
