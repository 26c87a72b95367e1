"""`shard_map` as one equation with its body as a region: the form a shard_map takes inside a
jit partitioned over PJRT devices, lowered as JAX 0.10.2 lowers it (Shardy's
`sdy.manual_computation`, or GSPMD's `@SPMDFullToShardShape` / `@SPMDShardToFullShape`
custom calls: compiler/backends/stablehlo/lower_manual.py).

    *outs = shard_map(*args, body=f, mesh_axes=((name, size), ...), device_ids=(id, ...),
                      manual=(name, ...),
                      in_names=(per argument: per dimension a tuple of mesh axes), out_names=...)

`f` is one device's function: it takes each argument's block (dimension d divided by the
sizes of the mesh axes `in_names[i][d]` splits it over) and returns each result's block; the
results are joined along `out_names`. `mesh_axes` is the whole mesh (row-major), `device_ids`
its devices' ids in row-major order (the module's own, or another mesh of the same devices in
the same order: lower_manual.py), `manual`
the axes the body is manual over (the others stay whole, XLA's to partition). Collectives in
`f` name manual axes. A result that `out_names` leaves whole along a manual axis is the value
at coordinate 0 along it (the devices agree there when the body is right, as shard_map's
check says).

Derivatives and batching transform the region into a new equation of the same primitive:
- JVP: the body's JVP over the blocks of the primals and tangents (a tangent is split as its
  primal).
- VJP: a backward shard_map recomputes the body and runs its VJP. The cotangent of a result
  left whole along manual axes is shared by their devices (divided by their count), and the
  cotangent of an argument left whole along manual axes is summed over them (every device
  read it), as JAX's transpose of shard_map does. Where the body is right (a result left
  whole along an axis is the same on its devices, as check_vma makes sure) these are the
  derivatives of the result at coordinate 0, which the same shard_map written as nested
  vmaps takes; with check_vma=False and a result that differs along such an axis they are
  JAX's, not those of coordinate 0's value.
- vmap: the body batched, the batch a leading dimension split over no mesh axis.

Only the StableHLO backend runs it, in a module partitioned over its mesh (the staging of a
jit partitioned over PJRT devices emits it; anywhere else shard_map is nested vmaps or
replicas: runtime/shard_map.py).
"""
import math

from ..ir.builder import current, trace_region, close_regions
from . import emit as E
from . import batching as B
from . import regions
from .core import register, BATCH, JVP, VJP
from .rule_forms import cotangent_rule
from ..errors import BackendUnsupportedError


def _sizes(mesh_axes):
    return dict(mesh_axes)


def global_shape(block, names, mesh_axes):
    """The global shape of a block of shape `block` split per dimension over `names`."""
    sizes = _sizes(mesh_axes)
    return tuple(n * math.prod(sizes[a] for a in axes) for n, axes in zip(block, names))


def _eval(*avals, body, mesh_axes, device_ids, manual, in_names, out_names):
    sizes = _sizes(mesh_axes)
    for k, (a, names, v) in enumerate(zip(avals, in_names, body.invars)):
        if global_shape(v.aval.shape, names, mesh_axes) != tuple(a.shape):
            raise TypeError(f"shard_map: argument {k} of shape {tuple(a.shape)} does not split "
                            f"over {names} (mesh {sizes}) into the body's block "
                            f"{v.aval.str_short()}")
    return tuple(v.aval.update(shape=global_shape(v.aval.shape, names, mesh_axes))
                 for v, names in zip(body.outvars, out_names))


def _impl(*args, body, mesh_axes, device_ids, manual, in_names, out_names):
    raise BackendUnsupportedError(
        "a shard_map region runs only in a StableHLO module partitioned over its mesh of "
        "PJRT devices (the staging of a jit partitioned over them emits it); elsewhere "
        "shard_map is staged as nested vmaps or run as replicas", None)


shard_map = register("shard_map", _eval, _impl, multiple_results=True)


def _inexact(a):
    return a.dtype.kind in "fc"


def _bound(ins, body, params, in_names, out_names, outer=()):
    """The outputs of a new shard_map equation over `ins` (after the region's captured
    values `outer`, passed whole)."""
    new = dict(params, body=body,
               in_names=tuple((((),) * len(E.aval(x).shape)) for x in outer) + tuple(in_names),
               out_names=tuple(out_names))
    return list(current().bind(shard_map, list(outer) + list(ins), new))


def _region(name, fn, avals):
    (region,), outer = close_regions([trace_region(current(), name, fn, list(avals))])
    return region, outer


def _jvp(eqn, ins, tins):
    p = eqn.params
    body = p["body"]
    blocks = [v.aval for v in body.invars]
    tangent = [t is not None and _inexact(a) for t, a in zip(tins, blocks)]
    out_diff = [_inexact(v.aval) for v in body.outvars]

    def fn(inputs):
        n = len(blocks)
        it = iter(inputs[n:])
        outs, touts = regions.jvp(body, inputs[:n], [next(it) if t else None for t in tangent])
        return list(outs) + [E.instantiate(t, E.aval(o))
                             for o, t, d in zip(outs, touts, out_diff) if d]
    region, outer = _region(body.name + "_jvp", fn,
                            blocks + [a for a, t in zip(blocks, tangent) if t])
    in_names = list(p["in_names"]) + [n for n, t in zip(p["in_names"], tangent) if t]
    out_names = list(p["out_names"]) + [n for n, d in zip(p["out_names"], out_diff) if d]
    res = _bound(list(ins) + [t for t, d in zip(tins, tangent) if d], region, p, in_names,
                 out_names, outer)
    n = len(body.outvars)
    it = iter(res[n:])
    return res[:n], [next(it) if d else None for d in out_diff]


def _whole_along(names, manual):
    """The manual axes a value split over `names` (per dimension) is whole along."""
    split = {a for axes in names for a in axes}
    return tuple(a for a in manual if a not in split)


def _shared(x, axes, mesh_axes):
    """The cotangent `x` of a result whole along the manual `axes`, shared by their devices:
    divided by how many there are, as JAX's transpose of shard_map does."""
    sizes = _sizes(mesh_axes)
    count = math.prod(sizes[a] for a in axes)
    return x if count == 1 else E.div(x, float(count))


def _vjp(cts, primals, outs, *, body, mesh_axes, device_ids, manual, in_names, out_names):
    params = dict(body=body, mesh_axes=mesh_axes, device_ids=device_ids, manual=manual,
                  in_names=in_names, out_names=out_names)
    blocks = [v.aval for v in body.invars]
    diff = [_inexact(a) for a in blocks]
    given = [c is not None for c in cts]

    def backward(inputs):
        n = len(blocks)
        it = iter(inputs[n:])
        ct = [_shared(next(it), _whole_along(names, manual), mesh_axes) if g else None
              for g, names in zip(given, out_names)]
        _, cts_in = regions.vjp(body, inputs[:n], ct, diff)
        found = []
        for c, a, d, names in zip(cts_in, blocks, diff, in_names):
            if d:
                c = E.instantiate(c, a)
                whole = _whole_along(names, manual)
                found.append(E.psum(c, axis_name=whole) if whole else c)
        return found
    region, outer = _region(body.name + "_bwd", backward,
                            blocks + [v.aval for v, g in zip(body.outvars, given) if g])
    res = _bound(list(primals) + [c for c in cts if c is not None], region, params,
                 list(in_names) + [n for n, g in zip(out_names, given) if g],
                 [n for n, d in zip(in_names, diff) if d], outer)
    it = iter(res)
    return [next(it) if d else None for d in diff]


def _batch(args, dims, *, body, mesh_axes, device_ids, manual, in_names, out_names):
    params = dict(body=body, mesh_axes=mesh_axes, device_ids=device_ids, manual=manual,
                  in_names=in_names, out_names=out_names)
    size = B.batch_size(args, dims)
    ins = [x if d is None else B.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    blocks = [v.aval.update(shape=((size,) if d is not None else ()) + v.aval.shape)
              for v, d in zip(body.invars, dims)]

    def fn(inputs):
        outs, odims = regions.batch(body, inputs, [None if d is None else 0 for d in dims],
                                    size)
        return [B.to_front(o, d, size) for o, d in zip(outs, odims)]
    region, outer = _region(body.name + "_batched", fn, blocks)
    names = [(((),) if d is not None else ()) + tuple(n) for n, d in zip(in_names, dims)]
    outs = _bound(ins, region, params, names, [((),) + tuple(n) for n in out_names], outer)
    return outs, [0] * len(outs)


JVP[shard_map] = _jvp
VJP[shard_map] = cotangent_rule(_vjp)
BATCH[shard_map] = _batch
