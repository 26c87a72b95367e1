"""A local `def` or `lambda` of a function being specialised, made into a real Python function
that can run on the host later (the callback of `pure_callback`, `io_callback` or
`debug.callback` written inline, as JAX's docs do).

`host_function(fn)` compiles the function's own source again, in a factory whose parameters
are the variables it reads from the functions around it; their values are taken now, as
Python's closures would see them at this point of the specialisation. Names it does not find
there are the module's globals, read when the callback runs. A variable that holds a traced
value cannot be taken (its value exists only in compiled code): that is a `TypeError` naming
the variable and saying to pass it to the callback as an argument. A local function it reads
is made into a host function the same way.
"""
import ast
import symtable

import gast

from .specialise import LocalFunction, holds_traced, missing_value

_FACTORY = "__kiln_host_function_factory"


def host_function(fn):
    """`fn` (a LocalFunction) as a Python function (see the module docstring)."""
    node = gast.gast_to_ast(fn.node)
    if getattr(node, "decorator_list", None):
        raise TypeError(f"the callback {fn.__name__} is a decorated function defined inside "
                        f"the function kiln compiles; define it outside (at module level) to "
                        f"use it as a host callback")
    node.args.defaults, node.args.kw_defaults = [], [None] * len(node.args.kwonlyargs)
    captured = {}   # (the defaults were evaluated by the specialisation: fn.defaults)
    for name in sorted(_global_names(node)):
        value = fn.frame.enclosing(name)
        if value is missing_value:
            continue   # a global of the module, read when the callback runs
        if holds_traced(value):
            raise TypeError(f"the callback {fn.__name__} reads {name!r}, which holds a traced "
                            f"value of the function kiln compiles: it exists only inside the "
                            f"compiled code. Pass {name!r} to the callback as an argument "
                            f"instead (pure_callback(f, shapes, {name}, ...))")
        captured[name] = host_function(value) if isinstance(value, LocalFunction) else value
    inner = ([ast.Return(node)] if isinstance(node, ast.Lambda)
             else [node, ast.Return(ast.Name(node.name, ast.Load()))])
    args = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in captured], kwonlyargs=[],
                         kw_defaults=[], defaults=[])
    fields = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    factory = ast.FunctionDef(name=_FACTORY, args=args, body=inner, decorator_list=[],
                              returns=None, **fields)
    module = ast.fix_missing_locations(ast.copy_location(
        ast.Module([ast.copy_location(factory, node)], []), node))
    ast.increment_lineno(module, fn.frame.parsed.line_offset)
    namespace = {}
    exec(compile(module, fn.frame.parsed.filename, "exec"), fn.frame.globals, namespace)
    made = namespace[_FACTORY](**captured)
    made.__defaults__ = tuple(fn.defaults) or None
    made.__kwdefaults__ = dict(fn.kwdefaults) or None
    made.__name__ = made.__qualname__ = fn.__name__
    return made


def _global_names(node):
    """The names `node` reads that it does not bind itself (its own tables' globals)."""
    table = symtable.symtable(ast.unparse(node), "<callback>", "exec")
    names, todo = set(), list(table.get_children())
    while todo:
        t = todo.pop()
        names |= {s.get_name() for s in t.get_symbols()
                  if s.is_global() and not s.is_declared_global()}
        todo += t.get_children()
    return names
