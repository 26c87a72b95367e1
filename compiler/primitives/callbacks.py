"""Host callbacks: `debug_print`, the primitive behind `print` and `kiln.debug.print` in
compiled code. It has no results and an effect (the `effect` flag), so simplification never
removes or merges it; it prints at every execution with the runtime values of its operands.
It has zero derivative: a derivative's forward sweep prints it once.

  debug_print(*operands, fmt=..., template=(...), sep=' ', end='\\n')
    template: one entry per piece: ("v", i) is operand i, ("s", text) static text, and
    ("kv", name, i) / ("ks", name, text) the same for keyword pieces.
    fmt None: print the pieces like Python's print (sep/end); otherwise
    fmt.format(*pieces, **keyword_pieces) (kiln.debug.print's form).
"""
import sys

import numpy as np

from .core import register, BATCH
from . import batching as B


def _eval(*operands, fmt=None, template=(), sep=" ", end="\n"):
    return ()


def render(operands, fmt, template, sep, end):
    pos, kw = [], {}
    for kind, *rest in template:
        if kind == "v":
            pos.append(operands[rest[0]])
        elif kind == "s":
            pos.append(rest[0])
        elif kind == "kv":
            kw[rest[0]] = operands[rest[1]]
        else:
            kw[rest[0]] = rest[1]
    if fmt is None:
        return sep.join(str(p) for p in pos) + end
    return fmt.format(*pos, **kw) + end


def _impl(*operands, fmt=None, template=(), sep=" ", end="\n"):
    sys.stdout.write(render([np.asarray(o) for o in operands], fmt, template, sep, end))
    sys.stdout.flush()
    return ()


debug_print = register("debug_print", _eval, _impl, multiple_results=True)
debug_print.effect = True
# No results, so nothing to differentiate; transforms keep it in the forward sweep only, so it
# prints once per evaluation of a derivative, with the primal values.
debug_print.zero_derivative = True
# Under vmap it prints once per example, in order (JAX's debug callbacks do the same): a loop
# over the examples, not a vectorised print.
BATCH[debug_print] = B.loop_rule(debug_print)
