"""How kiln's transforms wrap a user's function: the wrapper's name, its tracebacks, and how
error messages name the user's function.

`user_facing(fn)` (from _traceback.py) hides kiln's frames from tracebacks of errors raised by a call (unless
`KILN_TRACEBACK=full`, or while a function is being specialised: the enclosing call filters);
`user_facing_names(namespace)` does so for every function a public module exports, so eager
calls (`jnp.dot(a, b)` with mismatched shapes) show the user's frames and one of kiln's, as
jitted calls do;
`name_like(wrapper, fun)` names and documents a wrapper after `fun`; `describe(fun)` is
"name defined at file:line" for messages.
"""
import functools
import inspect
import types

from ._traceback import user_facing


def user_facing_names(namespace):
    """Wrap (`user_facing`) every plain function among the names `namespace["__all__"]` lists;
    classes, dtypes and submodules are left as they are."""
    wrapped = {}   # one wrapper per function, so aliases stay one object (xavier_uniform)
    for name in namespace["__all__"]:
        value = namespace.get(name)
        if isinstance(value, types.FunctionType) and not hasattr(value, "__wrapped__"):
            if id(value) not in wrapped:
                wrapped[id(value)] = user_facing(value)
            namespace[name] = wrapped[id(value)]


def name_like(wrapper, fun):
    """Name and document `wrapper` after `fun`, keeping kiln's `__module__`: the front end
    executes kiln's functions instead of walking their source."""
    functools.update_wrapper(wrapper, fun, assigned=("__name__", "__qualname__", "__doc__"),
                             updated=())
    wrapper.__wrapped__ = fun


def describe(fun):
    """`name defined at file:line` for the user's function under kiln's wrappers."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    fun = inspect.unwrap(fun)   # kiln's wrappers (grad, jit, the front end's) name the user's
    code = getattr(fun, "__code__", None)
    name = getattr(fun, "__qualname__", None) or getattr(fun, "__name__", repr(fun))
    if code is not None:
        return f"{name} defined at {code.co_filename}:{code.co_firstlineno}"
    return name
