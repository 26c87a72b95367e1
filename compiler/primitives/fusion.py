"""`fusion`: a group of equations that a backend runs as one loop nest.

    outs = fusion(*ins, body=<region>)

`body` is a closed region (an SSA `Function`) holding the group's equations: elementwise
operations, views (broadcast_in_dim, transpose, reshape, ...) of its inputs, iota, and
reductions at its end (compiler/transforms/fuse.py builds them). The result types are the
region's; the NumPy implementation runs the region, so fused SSA still runs on the reference
backend and the fuse pass is tested by running its input and its output there.

`fusion` only appears after the pass pipeline, but its rules replay the region through the
existing transforms, so fused code can still be differentiated (JVP, VJP) and batched.
"""
from ..ir.abstract import ShapedArray
from .core import register, type_error, JVP, VJP, BATCH
from .rule_forms import tangent_rule, cotangent_rule
from .control import run_region
from . import batching, emit, regions


def _fusion_eval(*avals, body):
    want = [v.aval for v in body.invars]
    if len(avals) != len(want) or any(a.shape != w.shape or a.dtype != w.dtype
                                      for a, w in zip(avals, want)):
        raise type_error("fusion", f"region {body.name} takes "
                         f"({', '.join(a.str_short() for a in want)}) but is given "
                         f"({', '.join(a.str_short() for a in avals)})")
    return tuple(ShapedArray(a.shape, a.dtype, a.weak_type) for a in body.out_avals)


def _fusion(*args, body):
    return tuple(run_region(body, *args))


fusion = register("fusion", _fusion_eval, _fusion, multiple_results=True)


def _fusion_jvp(primals, tangents, outs, *, body):
    return regions.jvp(body, primals, tangents)[1]


def _fusion_vjp(cts, primals, outs, *, body):
    active = [emit.is_float(p) for p in primals]
    return regions.vjp(body, primals, cts, active)[1]


def _fusion_batch(args, dims, *, body):
    return regions.batch(body, args, dims, batching.batch_size(args, dims))


JVP[fusion] = tangent_rule(_fusion_jvp)
VJP[fusion] = cotangent_rule(_fusion_vjp)
BATCH[fusion] = _fusion_batch
