"""`kiln.interpreters.ad`: the derivative rules of user-defined primitives, as JAX's
`jax.interpreters.ad` has them.

`primitive_jvps[p] = rule`, `rule(primals, tangents, **params) -> (primal_out,
tangent_out)`: the JVP rule, called with the operands and their tangents (`Zero(aval)` for a
tangent known to be zero); forward mode calls it, and reverse mode transposes the tangent
computation it emits (JAX's grad is the transpose of the JVP). `primitive_transposes[p] =
rule`, `rule(ct, *args, **params) -> cotangent per operand`: the transpose rule of a
primitive used linearly in such a tangent computation, called with `UndefinedPrimal(aval)`
for the linear operands and values for the others; it returns None (or a `Zero`) for the
operands that get no cotangent. `defjvp`, `deflinear` and `defbilinear` write both from
simpler rules. `JVPTracer` is kiln's `Tracer`: kiln specialises a function before it
differentiates it, so the values a function under `jvp` computes are its traced values
(`x._trace.main is kiln.extend.core.find_top_trace(args).main` for those of the function
being traced; `isinstance` alone holds under any transformation). See docs/extend.md."""
import functools


from ..compiler.ir.abstract import ShapedArray
from ..tracer import Tracer as JVPTracer

__all__ = ["Zero", "UndefinedPrimal", "is_undefined_primal", "instantiate_zeros",
           "zeros_like_aval", "add_tangents", "primitive_jvps", "primitive_transposes",
           "get_primitive_transpose", "defjvp", "deflinear", "defbilinear", "JVPTracer"]


class Zero:
    """A tangent or cotangent known to be zero, of type `aval`."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    @staticmethod
    def from_primal_value(val):
        return Zero(_aval(val))

    def __repr__(self):
        return f"Zero({self.aval})"


class UndefinedPrimal:
    """An operand of a transpose rule that the primitive is linear in (its value is not known:
    its cotangent is what the rule computes), of type `aval`."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x):
    return type(x) is UndefinedPrimal


def _aval(x):
    a = getattr(x, "aval", None)
    if isinstance(a, ShapedArray):
        return a
    from ..custom_derivatives import value_aval
    return value_aval(x)


def zeros_like_aval(aval):
    """An array of zeros of type `aval`."""
    from .. import lax
    return lax.full(aval.shape, 0, aval.dtype)


def instantiate_zeros(tangent):
    """`tangent`, with a `Zero` made an array of zeros."""
    if type(tangent) is Zero:
        return zeros_like_aval(tangent.aval)
    return tangent


def add_tangents(x, y):
    """The sum of two tangents, either of which may be a `Zero`."""
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return x + y


primitive_jvps = {}
primitive_transposes = {}


def get_primitive_transpose(p):
    """The transpose rule of `p`; NotImplementedError (JAX's) without one."""
    try:
        return primitive_transposes[p]
    except KeyError as err:
        raise NotImplementedError(
            f"Transpose rule (for reverse-mode differentiation) for '{p}' not "
            "implemented") from err


def _standard_jvp(jvprules, primitive, primals, tangents, **params):
    val_out = primitive.bind(*primals, **params)
    tangent_out = Zero.from_primal_value(val_out)
    for rule, t in zip(jvprules, tangents):
        if rule is not None and type(t) is not Zero:
            tangent_out = add_tangents(tangent_out, rule(t, *primals, **params))
    return val_out, tangent_out


def defjvp(primitive, *jvprules):
    """The JVP rule of a single-result `primitive` from one rule per operand, `rule(g,
    *primals, **params)` (the output tangent for tangent `g` of that operand; None for an
    operand without a derivative); the output tangent is their sum."""
    if primitive.multiple_results:
        raise TypeError(f"ad.defjvp: primitive {primitive} has multiple results; register "
                        "its rule in ad.primitive_jvps instead")
    primitive_jvps[primitive] = functools.partial(_standard_jvp, jvprules, primitive)


def _linear_jvp(primitive, primals, tangents, **params):
    val_out = primitive.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        return val_out, Zero.from_primal_value(val_out)
    return val_out, primitive.bind(*[instantiate_zeros(t) for t in tangents], **params)


def _linear_transpose(transpose_rule, cotangent, *args, **params):
    if type(cotangent) is Zero:
        return [None] * len(args)
    return transpose_rule(cotangent, **params)


def deflinear(primitive, transpose_rule):
    """A primitive linear in all its operands: its JVP applies it to the tangents, and its
    transpose is `transpose_rule(ct, **params) -> cotangent per operand`."""
    primitive_jvps[primitive] = functools.partial(_linear_jvp, primitive)
    primitive_transposes[primitive] = functools.partial(_linear_transpose, transpose_rule)


def _bilinear_transpose(lhs_rule, rhs_rule, cotangent, x, y, **params):
    if is_undefined_primal(x):
        out = Zero(x.aval) if type(cotangent) is Zero else lhs_rule(cotangent, x, y, **params)
        return out, None
    out = Zero(y.aval) if type(cotangent) is Zero else rhs_rule(cotangent, x, y, **params)
    return None, out


def defbilinear(prim, lhs_rule, rhs_rule):
    """A two-operand primitive linear in each operand: its JVP binds it on one tangent and the
    other primal; `lhs_rule(ct, x, y, **params)` and `rhs_rule` are the transposes in `x`
    (then an UndefinedPrimal) and in `y`."""
    defjvp(prim, lambda g, x, y, **params: prim.bind(g, y, **params),
           lambda g, x, y, **params: prim.bind(x, g, **params))
    primitive_transposes[prim] = functools.partial(_bilinear_transpose, lhs_rule, rhs_rule)


def __dir__():
    return sorted(__all__)
