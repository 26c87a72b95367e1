"""`kiln.debug`: printing runtime values from compiled code.

`kiln.debug.print(fmt, *args, **kwargs)` has JAX's signature: outside compiled code it prints
`fmt.format(*args, **kwargs)` at once; inside it becomes a `debug_print` host callback that
prints with the runtime values at every call. Plain `print(...)` inside a jitted function
compiles to the same callback (kiln specialises source, so it can); at the top level of a
shard_map body it prints once, each value gathered from every device and shown per device
as JAX's eager shard_map shows it (runtime/shard_map.py's `print_site`). `kiln.debug.callback`
calls a Python function for its effect (runtime/callbacks.py); `kiln.debug.breakpoint` stops
in pdb (runtime/debugger.py). `visualize_array_sharding`, `visualize_sharding` and
`inspect_array_sharding` show where an array's blocks live (runtime/sharding_view.py: plain
text, no `rich`).
"""
import builtins

from .compiler.ir.builder import current
from .compiler.primitives import PRIMITIVES as P
from .dispatch import bind, is_traced as _is_traced
from .lax._parallel import all_gather
from .callbacks import debug_callback as callback  # noqa: F401
from .debugger import breakpoint  # noqa: F401,A004
from .compiler.frontend.runtime_text import RuntimeText, escape
from .sharding_view import (visualize_array_sharding, visualize_sharding,  # noqa: F401
                            inspect_array_sharding)



def _static_piece(x):
    return str(x) if not isinstance(x, (int, float, bool, str)) else x


def print_callback(fmt, args, kwargs):
    """Emit the callback for print(*args) (fmt None) or fmt.format(*args, **kwargs)."""
    sep, end = " ", "\n"
    site = None
    if fmt is None:
        sep, end = _print_options(kwargs)
        site = _shard_map_print_site()
        if any(isinstance(a, RuntimeText) for a in args):
            fmt, args = _as_format(args, sep)
    operands, template = [], []
    for a in args:
        if _is_traced(a) and site is not None:
            template.append(("m", len(operands), site.headers))
            operands.append(all_gather(a, site.names))
        elif _is_traced(a):
            template.append(("v", len(operands)))
            operands.append(a)
        else:
            template.append(("s", _static_piece(a)))
    if site is not None and (operands or site.every_call):
        template.append(("first", len(operands)))
        operands.append(_at_first_device(site.names))
    for k, v in kwargs.items():
        if _is_traced(v):
            template.append(("kv", k, len(operands)))
            operands.append(v)
        else:
            template.append(("ks", k, _static_piece(v)))
    bind(P["debug_print"], *operands, fmt=fmt, template=tuple(template), sep=sep, end=end)
    return None


def _shard_map_print_site():
    from .shard_map import print_site
    return print_site()


def _at_first_device(names):
    from .shard_map import at_first
    return at_first(names)


def _print_options(kwargs):
    """print()'s (sep, end), taken out of `kwargs`; flush is accepted (the callback always
    flushes), anything else refused."""
    sep, end = kwargs.pop("sep", None), kwargs.pop("end", None)
    kwargs.pop("flush", None)
    if kwargs:
        raise TypeError(f"print() inside a compiled function supports sep, end and flush, "
                        f"got {', '.join(kwargs)}")
    return " " if sep is None else sep, "\n" if end is None else end  # None: the default


def _as_format(args, sep):
    """print(*args) with f-strings of traced values (RuntimeText) among its arguments, as one
    str.format template and its positional values."""
    pieces, values = [], []
    for a in args:
        if isinstance(a, RuntimeText):
            pieces.append(a.template(len(values)))
            values += a.values
        elif _is_traced(a):
            pieces.append("{%d}" % len(values))
            values.append(a)
        else:
            pieces.append(escape(str(a)))
    return escape(sep).join(pieces), values


def print(fmt, *args, ordered=False, **kwargs):  # noqa: A001
    """Print `fmt.format(*args, **kwargs)`, with runtime values when compiled."""
    if current() is not None:
        return print_callback(fmt, list(args), dict(kwargs))
    builtins.print(fmt.format(*args, **kwargs))
    return None
