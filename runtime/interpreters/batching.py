"""`kiln.interpreters.batching`: the batching rules of user-defined primitives, as JAX's
`jax.interpreters.batching` has them.

`primitive_batchers[p] = rule`, `rule(args, dims, **params) -> (out, out_dim)`: `dims[i]` is
the axis of `args[i]` that carries the batch, or None (`not_mapped`) for an operand shared by
every example; the rule returns the batched result and its batch axis (lists of both for a
primitive with multiple results). `defvectorized(p)` registers the rule of a primitive that
applies to each element on its own. `axis_primitive_batchers[p] = rule` registers a rule in
JAX's older form, `rule(axis_size, axis_name, trace_type, args, dims, **params)` (equinox
registers its primitives so); kiln calls it with the batch size, and None for the axis name
(where JAX passes the vmap's axis name, or an anonymous one) and the trace type. See
docs/extend.md."""
import functools

import numpy as np

__all__ = ["primitive_batchers", "axis_primitive_batchers", "defvectorized", "bdim_at_front",
           "broadcast"]

primitive_batchers = {}


class _AxisPrimitiveBatchers:
    """Where rules in JAX's older form are registered: each goes into `primitive_batchers`,
    wrapped to receive the batch size (and None for the axis name and trace type)."""

    def __setitem__(self, prim, rule):
        def batcher(args, dims, **params):
            size = next(np.shape(a)[d] for a, d in zip(args, dims) if d is not None)
            return rule(size, None, None, args, dims, **params)
        primitive_batchers[prim] = batcher

    def __delitem__(self, prim):
        del primitive_batchers[prim]


axis_primitive_batchers = _AxisPrimitiveBatchers()


def broadcast(x, sz, axis, mesh_axis=None):
    """`x` with a new axis `axis` of size `sz` (each example the same)."""
    from .. import lax
    shape = list(np.shape(x))
    shape.insert(axis, sz)
    dims = [d for d in range(len(shape)) if d != axis]
    return lax.broadcast_in_dim(x, tuple(shape), tuple(dims))


def bdim_at_front(x, bdim, size, mesh_axis=None):
    """`x` with its batch axis `bdim` moved to the front (broadcast there when None)."""
    if bdim is None:
        return broadcast(x, size, 0)
    from .. import numpy as jnp
    return jnp.moveaxis(x, bdim, 0)


def _vectorized_batcher(prim, args, dims, **params):
    if len(set(dims)) == 1:
        return prim.bind(*args, **params), dims[0]
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return prim.bind(*[bdim_at_front(a, d, size) for a, d in zip(args, dims)], **params), 0


def defvectorized(prim):
    """Register the batching rule of `prim`, a primitive applied element by element to
    operands of one shape: it is bound on the batched operands (their batch axes moved to the
    front, unbatched ones broadcast there, unless all share one axis)."""
    primitive_batchers[prim] = functools.partial(_vectorized_batcher, prim)


def __dir__():
    return sorted(__all__)
