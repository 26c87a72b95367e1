"""dot_general as a loop nest (a later step calls BLAS sgemm/dgemm for float32/float64).

The product is written as a fused group over the iteration space
(batch..., lhs free..., contracting..., rhs free...):
    l = broadcast(transpose(lhs)), r = broadcast(transpose(rhs))   (views: no code)
    out = reduce_sum(convert(l) * convert(r), axes=contracting)
(`and`/`reduce_or` for bools) and lowered by lower_fused.py. The innermost loop runs over the
rhs free axes (contiguous in rhs and in the output, accumulating into the output: the i-k-j
order, which vectorises); without rhs free axes it runs over the contracting axes with a
register accumulator.
"""
from ...ir.abstract import ShapedArray
from ...ir.ssa import Eqn, Var
from ...primitives import PRIMITIVES
from .lower_fused import lower_group

P = PRIMITIVES


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _dot_general(ctx, outs, ins, *, dimension_numbers, precision=None,
                 preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = ins
    out = outs[0]
    la, ra, dtype = lhs.aval, rhs.aval, out.aval.dtype
    lf, rf = _free(la.ndim, lc, lb), _free(ra.ndim, rc, rb)
    nb, nl, nc = len(lb), len(lf), len(lc)
    space = ([la.shape[i] for i in lb] + [la.shape[i] for i in lf] + [la.shape[i] for i in lc]
             + [ra.shape[i] for i in rf])
    names = iter(f"dot_{k}" for k in range(16))

    def var(shape, dt):
        return Var(next(names), ShapedArray(shape, dt))

    def spread(x, aval, order, positions):
        """x transposed into `order` and broadcast to the iteration space at `positions`."""
        t = var([aval.shape[i] for i in order], aval.dtype)
        b = var(space, aval.dtype)
        eqns = [Eqn([t], P["transpose"], [x], {"permutation": tuple(order)}),
                Eqn([b], P["broadcast_in_dim"], [t], {"shape": tuple(space),
                                                      "broadcast_dimensions": tuple(positions)})]
        if aval.dtype == dtype:
            return b, eqns
        c = var(space, dtype)
        return c, eqns + [Eqn([c], P["convert_element_type"], [b],
                              {"new_dtype": dtype, "weak_type": False})]

    lhs_v, rhs_v = var(la.shape, la.dtype), var(ra.shape, ra.dtype)
    contract_pos = list(range(nb + nl, nb + nl + nc))
    l, l_eqns = spread(lhs_v, la, list(lb) + lf + list(lc),
                       list(range(nb)) + list(range(nb, nb + nl)) + contract_pos)
    r, r_eqns = spread(rhs_v, ra, list(rb) + list(rc) + rf,
                       list(range(nb)) + contract_pos + list(range(nb + nl + nc, len(space))))
    boolean = dtype.kind == "b"
    prod = var(space, dtype)
    result = var(out.aval.shape, dtype)
    eqns = l_eqns + r_eqns + [
        Eqn([prod], P["and" if boolean else "mul"], [l, r], {}),
        Eqn([result], P["reduce_or" if boolean else "reduce_sum"], [prod],
            {"axes": tuple(contract_pos)})]
    lower_group(ctx, eqns, [(lhs_v, lhs), (rhs_v, rhs)], [(result, out)])


PRIMITIVES["dot_general"].rules["llvm"] = _dot_general
