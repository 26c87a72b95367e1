"""`kiln.debug`: printing runtime values from compiled code.

`kiln.debug.print(fmt, *args, **kwargs)` has JAX's signature: outside compiled code it prints
`fmt.format(*args, **kwargs)` at once; inside it becomes a `debug_print` host callback that
prints with the runtime values at every call. Plain `print(...)` inside a jitted function
compiles to the same callback (kiln specialises source, so it can). `kiln.debug.callback`
calls a Python function for its effect (runtime/callbacks.py). `visualize_array_sharding`,
`visualize_sharding` and `inspect_array_sharding` show where an array's blocks live
(runtime/sharding_view.py: plain text, no `rich`).
"""
import builtins

from .compiler.ir.builder import current
from .compiler.primitives import PRIMITIVES as P
from .dispatch import bind, is_traced as _is_traced
from .callbacks import debug_callback as callback  # noqa: F401
from .sharding_view import (visualize_array_sharding, visualize_sharding,  # noqa: F401
                            inspect_array_sharding)



def _static_piece(x):
    return str(x) if not isinstance(x, (int, float, bool, str)) else x


def print_callback(fmt, args, kwargs):
    """Emit the callback for print(*args) (fmt None) or fmt.format(*args, **kwargs)."""
    operands, template = [], []
    for a in args:
        if _is_traced(a):
            template.append(("v", len(operands)))
            operands.append(a)
        else:
            template.append(("s", _static_piece(a)))
    sep, end = " ", "\n"
    if fmt is None:
        sep, end = kwargs.pop("sep", None), kwargs.pop("end", None)
        sep = " " if sep is None else sep  # as Python's print: None means the default
        end = "\n" if end is None else end
        kwargs.pop("flush", None)  # the callback always flushes
        if kwargs:
            raise TypeError(f"print() inside a compiled function supports sep, end and flush, "
                            f"got {', '.join(kwargs)}")
    else:
        for k, v in kwargs.items():
            if _is_traced(v):
                template.append(("kv", k, len(operands)))
                operands.append(v)
            else:
                template.append(("ks", k, _static_piece(v)))
    bind(P["debug_print"], *operands, fmt=fmt, template=tuple(template), sep=sep, end=end)
    return None


def print(fmt, *args, ordered=False, **kwargs):  # noqa: A001
    """Print `fmt.format(*args, **kwargs)`, with runtime values when compiled."""
    if current() is not None:
        return print_callback(fmt, list(args), dict(kwargs))
    builtins.print(fmt.format(*args, **kwargs))
    return None
