"""`kiln.experimental.sparse`: JAX's `jax.experimental.sparse` as far as kiln has it
(docs/sparse.md).

`BCOO` (batched coordinate format) with its operations (`bcoo_fromdense`, `bcoo_todense`,
`bcoo_dot_general`, `bcoo_reduce_sum`, ...), `BCSR` (batched compressed rows), the
constructors `eye`, `empty` and `random_bcoo`, `todense`, and the transformation `sparsify`
with the sparse-aware `grad` and `value_and_grad`. Everything is written over `kiln.numpy`
and `kiln.lax`, so it runs eagerly, under `kiln.jit`, `kiln.grad` and `kiln.vmap`, and on
every backend.
"""
from ._base import JAXSparse
from .bcoo import (BCOO, bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_dot_general,
                   bcoo_dot_general_sampled, bcoo_extract, bcoo_fromdense,
                   bcoo_multiply_dense, bcoo_multiply_sparse, bcoo_reduce_sum, bcoo_reshape,
                   bcoo_sort_indices, bcoo_sum_duplicates, bcoo_todense, bcoo_transpose)
from .bcsr import BCSR, bcsr_dot_general, bcsr_fromdense, bcsr_todense
from .api import empty, eye, random_bcoo, todense
from .transform import grad, sparsify, value_and_grad

__all__ = ["BCOO", "BCSR", "JAXSparse", "bcoo_broadcast_in_dim", "bcoo_concatenate",
           "bcoo_dot_general", "bcoo_dot_general_sampled", "bcoo_extract", "bcoo_fromdense",
           "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum", "bcoo_reshape",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose",
           "bcsr_dot_general", "bcsr_fromdense", "bcsr_todense", "empty", "eye", "grad",
           "random_bcoo", "sparsify", "todense", "value_and_grad"]
