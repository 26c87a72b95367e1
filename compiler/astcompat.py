"""The one place that builds AST nodes: a thin layer over `gast` that hides its versions.

gast's node signatures change between releases (new fields such as `type_params`); every
other module builds nodes through these helpers, so supporting a new gast release means
editing this file only. Nodes are gast nodes; `to_python_ast` converts a tree for `compile`
and `astor`.
"""
import gast

_LIST_FIELDS = {"body", "orelse", "decorator_list", "targets", "elts", "args", "keywords",
                "posonlyargs", "kwonlyargs", "kw_defaults", "defaults", "type_params",
                "type_ignores", "finalbody", "handlers", "names", "ops", "comparators",
                "values", "generators", "ifs", "keys"}


def node(cls, **fields):
    """Build `cls` from keyword fields; fields this gast version has but the caller did not
    name get their empty default (`[]` for lists, None otherwise)."""
    values = {}
    for f in cls._fields:
        if f in fields:
            values[f] = fields[f]
        else:
            values[f] = [] if f in _LIST_FIELDS else None
    return cls(**values)


def name(id_, store=False, annotation=None):
    return node(gast.Name, id=id_, ctx=gast.Store() if store else gast.Load(),
                annotation=annotation)


def const(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return node(gast.UnaryOp, op=gast.USub(), operand=node(gast.Constant, value=-value))
    return node(gast.Constant, value=value)


def tuple_(elts, store=False):
    return node(gast.Tuple, elts=list(elts), ctx=gast.Store() if store else gast.Load())


def call(func, args=(), keywords=()):
    if isinstance(func, str):
        func = name(func)
    return node(gast.Call, func=func, args=list(args),
                keywords=[node(gast.keyword, arg=k, value=v) for k, v in keywords])


def assign(targets, value):
    return node(gast.Assign, targets=[targets], value=value)


def return_(value):
    return node(gast.Return, value=value)


def arguments(params):
    """Positional parameters: a list of (name, annotation-node-or-None)."""
    return node(gast.arguments, args=[name(n, annotation=a) for n, a in params])


def function_def(fname, params, body, returns=None):
    return node(gast.FunctionDef, name=fname, args=arguments(params), body=list(body),
                returns=returns)


def module(body):
    return node(gast.Module, body=list(body))


def parse(source):
    return gast.parse(source)


def to_python_ast(tree):
    import ast
    return ast.fix_missing_locations(gast.gast_to_ast(tree))


def to_source(tree):
    """Python source for a gast tree, printed by astor."""
    import astor
    return astor.to_source(to_python_ast(tree), pretty_source="".join)
