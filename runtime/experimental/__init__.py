"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md), and `io_callback`, a
host callback with effects (docs/differences.md), and `compilation_cache` (its
`set_cache_dir` records JAX's cache directory option), `serialize_executable`
(serializing and loading PJRT executables, docs/pjrt.md), `mesh_utils` (devices laid out
for a `Mesh`), `hijax` (`VJPHiPrimitive`, class-based custom derivatives,
docs/differences.md), `checkify`, run-time error checks as values (docs/debugging.md), and
`ode` (`odeint`, JAX's adaptive ODE solver with its adjoint derivatives), and `sparse`
(BCOO and BCSR sparse arrays and `sparsify`, docs/sparse.md).
JAX's deprecated `shard_map` and `pjit` modules are here too, imported when named:
`kiln.experimental.shard_map.shard_map` and `kiln.experimental.pjit.pjit` warn as JAX's do and
are `kiln.shard_map` and `kiln.jit`."""
from . import (checkify, compilation_cache, hijax, mesh_utils, multihost_utils, ode,
               serialize_executable, sparse)
from ..callbacks import io_callback

__all__ = ["checkify", "compilation_cache", "hijax", "mesh_utils", "multihost_utils", "ode",
           "serialize_executable", "sparse", "io_callback"]
