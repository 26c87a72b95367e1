"""`kiln.experimental`, as far as kiln has JAX's `jax.experimental`: `multihost_utils`, the
helpers for programs run as several processes (docs/distributed.md), and `io_callback`, a
host callback with effects (docs/differences.md), and `compilation_cache` (its
`set_cache_dir` records JAX's cache directory option), `serialize_executable`
(serializing and loading PJRT executables, docs/pjrt.md), `mesh_utils` (devices laid out
for a `Mesh`), `hijax` (`VJPHiPrimitive`, class-based custom derivatives,
docs/differences.md), `checkify`, run-time error checks as values (docs/debugging.md),
`ode` (`odeint`, JAX's adaptive ODE solver with its adjoint derivatives), `jet`
(Taylor-mode differentiation, docs/autodiff.md), `rnn` (JAX's LSTM),
`random` (JAX's stateful generator), `layout` (`Format` and `Layout`, row-major only),
`compute_on`, `shard_alike`, `xla_metadata` and `custom_partitioning` (accepted and checked;
kiln computes where and how it would anyway, docs/compat.md), and `key_reuse` (no names, as
JAX's; the checker is `kiln.debug_key_reuse`), and `sparse` (BCOO and BCSR sparse arrays and
`sparsify`, docs/sparse.md).
JAX's deprecated `shard_map` and `pjit` modules are here too, imported when named:
`kiln.experimental.shard_map.shard_map` and `kiln.experimental.pjit.pjit` warn as JAX's do and
are `kiln.shard_map` and `kiln.jit`."""
from . import (checkify, compilation_cache, compute_on, custom_partitioning, hijax,
               jet, key_reuse, layout, mesh_utils, multihost_utils, ode, random, rnn,
               serialize_executable, shard_alike, sparse, xla_metadata)
from ..callbacks import io_callback

__all__ = ["checkify", "compilation_cache", "compute_on", "custom_partitioning", "hijax",
           "jet", "key_reuse", "layout", "mesh_utils", "multihost_utils", "ode", "random", "rnn",
           "serialize_executable", "shard_alike", "sparse", "xla_metadata", "io_callback"]
