"""`ffi_call` and `ffi_call_effect` (compiler/primitives/ffi.py) as JAX writes them: a typed-FFI
`stablehlo.custom_call` of the target, its attributes in `backend_config`, its operands' and
results' layouts, `has_side_effect` for ffi_call_effect, and `output_operand_aliases`:

    %0:2 = stablehlo.custom_call @affine(%arg0) {api_version = 4 : i32,
        backend_config = {extra = {k = 7 : i64}, scale = 0x4000000000000000 : f64,
        tag = "abc"}, operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = [...]}
        : (tensor<5xf64>) -> (tensor<5xf64>, tensor<1xi64>)

Scalars are written as their bit patterns (exact); a float array attribute as decimals that
are its values exactly (one holding NaN or an infinity is refused: MLIR's dense lists take no
such literal). The PJRT runtime registers the target with the plug-in before compiling
(pjrt/ffi_targets.py).
"""
import re

import numpy as np

from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from .emitter import Value
from .types import element_type, scalar_text, tensor_type

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")


def _string(text):
    out = []
    for byte in text.encode():
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\' else f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def _attribute(ctx, attribute):
    kind = attribute[0]
    if kind == "string":
        return _string(attribute[1])
    if kind == "dict":
        return _dictionary(ctx, attribute[1])
    dtype = np.dtype(attribute[1])
    if kind == "scalar":
        value = scalar_text(attribute[2], dtype)
        return value if dtype.kind == "b" else f"{value} : {element_type(dtype)}"
    values = np.asarray(attribute[2], dtype)
    if dtype.kind == "f" and not np.all(np.isfinite(values)):
        raise ctx.error("an FFI call's array attribute holds NaN or an infinity, which the "
                        "StableHLO backend cannot write: pass the array as an operand")
    items = ", ".join(("true" if v else "false") if dtype.kind == "b" else
                      repr(float(v)) if dtype.kind == "f" else str(int(v)) for v in values)
    return f"dense<[{items}]> : tensor<{values.size}x{element_type(dtype)}>"


def _dictionary(ctx, entries):
    return "{" + ", ".join(f"{name if _BARE.match(name) else _string(name)} = "
                           f"{_attribute(ctx, value)}" for name, value in entries) + "}"


def _layout(order, rank):
    minor_to_major = list(reversed(order if order is not None else range(rank)))
    if not minor_to_major:
        return "dense<> : tensor<0xindex>"
    return f"dense<{minor_to_major}> : tensor<{rank}xindex>"


def _ffi_call(ctx, args, *, target_name, results, attributes=(), vmap_method=None,
              layouts=None, aliases=()):
    return custom_call(ctx, target_name, args, ctx.out_avals, _dictionary(ctx, attributes),
                       side_effect=ctx.eqn.prim.name == "ffi_call_effect", layouts=layouts,
                       aliases=aliases)


def custom_call(ctx, target_name, args, outs, config="{}", side_effect=False, layouts=None,
                aliases=()):
    """A typed-FFI `stablehlo.custom_call @target_name` of `args` giving values of the avals
    `outs`: `config` (an MLIR dictionary) its backend_config, `layouts` (operand orders,
    result orders) or row-major ones; the results' Values."""
    in_orders, out_orders = layouts or (None, None)
    in_orders = in_orders or (None,) * len(args)
    out_orders = out_orders or (None,) * len(outs)
    fields = ["api_version = 4 : i32", f"backend_config = {config}"]
    if side_effect:
        fields.append("has_side_effect = true")
    fields.append("operand_layouts = [" + ", ".join(
        _layout(o, a.aval.ndim) for o, a in zip(in_orders, args)) + "]")
    if aliases:
        fields.append("output_operand_aliases = [" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = "
            f"{[o] if len(outs) > 1 else []}, operand_index = {i}, operand_tuple_indices = []>"
            for i, o in aliases) + "]")
    fields.append("result_layouts = [" + ", ".join(
        _layout(o, len(a.shape)) for o, a in zip(out_orders, outs)) + "]")
    first = ctx.fresh()
    head = "" if not outs else (f"{first} = " if len(outs) == 1 else f"{first}:{len(outs)} = ")
    types = [tensor_type(a) for a in outs]
    result = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
    ctx.line(f"{head}stablehlo.custom_call @{target_name}({', '.join(a.name for a in args)}) "
             f"{{{', '.join(fields)}}} : ({', '.join(a.type for a in args)}) -> {result}")
    if len(outs) == 1:
        return [Value(first, outs[0])]
    return [Value(f"{first}#{k}", a) for k, a in enumerate(outs)]


STABLEHLO[PRIMITIVES["ffi_call"]] = STABLEHLO[PRIMITIVES["ffi_call_effect"]] = _ffi_call
