"""An SSA function as one StableHLO module in MLIR text (`lower_module`).

    lower_module(fn, name=None, replicas=1) -> StableHloModule(text, name, in_avals, out_avals)

`fn` is an SSA `Function` after the reference pipeline (simplify; fusion equations, if any,
are lowered through their regions). The module holds one `func.func public @main` whose
arguments are `fn`'s inputs in order and whose results are its outputs, with tensor types
(`tensor<2x3xf32>`); `in_avals`/`out_avals` are their abstract values (shape, dtype).
`replicas` is the module's `mhlo.num_replicas`: above 1 for a pmap's or shard_map's module,
run once per device, whose collectives carry their replicas' layout (lower_collectives.py).
"""
import re
from typing import NamedTuple

from ...ir.abstract import ShapedArray
from .emitter import Emitter, Value


class StableHloModule(NamedTuple):
    text: str            # the module, MLIR text (`module @name { func.func public @main ... }`)
    name: str            # the module's symbol name
    in_avals: tuple      # @main's arguments: ShapedArray (shape, dtype) each
    out_avals: tuple     # @main's results


def _symbol(name):
    text = re.sub(r"[^A-Za-z0-9_]", "_", name or "main")
    return text if re.match(r"[A-Za-z_]", text) else "m_" + text


def lower_module(fn, name=None, replicas=1):
    """The StableHLO module of the SSA function `fn` (module docstring)."""
    ctx = Emitter()
    for v in list(fn.invars) + list(fn.outvars):
        if v.aval.dtype.kind == "O":
            raise ctx.error(f"the StableHLO backend cannot pass reverse mode's tapes "
                            f"({v.aval.str_short()}) in or out of a function; differentiate "
                            f"inside the compiled function instead")
    args = [Value(f"%arg{i}", v.aval) for i, v in enumerate(fn.invars)]
    outs = ctx.lower_function(fn, args)
    symbol = _symbol(name or fn.name)
    params = ", ".join(repr(a) for a in args)
    results = ", ".join(o.type for o in outs)
    lines = [f"module @{symbol} attributes {{mhlo.num_partitions = 1 : i32, "
             f"mhlo.num_replicas = {replicas} : i32}} {{",
             f"  func.func public @main({params}) -> ({results}) {{"]
    lines += ctx.lines
    if outs:
        lines.append(f"    return {', '.join(o.name for o in outs)} : {results}")
    else:
        lines.append("    return")
    lines += ["  }", "}"]
    as_avals = lambda vs: tuple(ShapedArray(v.aval.shape, v.aval.dtype) for v in vs)
    return StableHloModule("\n".join(lines) + "\n", symbol, as_avals(fn.invars),
                           as_avals(fn.outvars))
