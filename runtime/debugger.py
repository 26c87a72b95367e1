"""`kiln.debug.breakpoint` (JAX's `jax.debug.breakpoint`), and Python's own `breakpoint()`
inside a compiled function: stop and inspect values.

Outside compiled code it is `pdb` at the caller's line. Inside, the specialiser hands it the
variables of the function being specialised (compiler/frontend/host.py's `debug_breakpoint`):
the traced ones become operands of a `debug_callback`, so at every call, when the compiled code
reaches that point, a `pdb` session opens whose locals are those variables with their run-time
values (static ones with the values they had when the function was specialised). `c` (or the
end of the input) goes on with the compiled function; `q` raises `bdb.BdbQuit` out of the
call. Under `vmap` the session opens once per example, as a debug callback runs.
"""
import pdb
import sys

from .callbacks import debug_callback
from .dispatch import is_traced
from .tree_util import tree_flatten, tree_unflatten

_SESSION_NAME = "__kiln_breakpoint__"


class _Debugger(pdb.Pdb):
    """pdb where the end of the input continues (a run without a terminal does not stop)."""

    def do_EOF(self, arg):
        self.message("")
        return self.do_continue(arg)


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False,  # noqa: A001
               token=None, **kwargs):
    """Stop here in `pdb`: at once outside compiled code; inside, at every call (see the
    module docstring). Returns `token` unchanged."""
    _check_token(token, ordered)
    _Debugger().set_trace(sys._getframe(1))
    return token


def _check_token(token, ordered):
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")


def compiled_breakpoint(variables, where, kwargs):
    """The compiled form of a breakpoint at `where` (file:line) over the specialised
    function's `variables` ({name: value}): a debug callback that opens the session."""
    token = kwargs.get("token")
    _check_token(token, kwargs.get("ordered"))
    names = [n for n in variables if n.isidentifier() and not n.startswith("__")]
    leaves, tree = tree_flatten([variables[n] for n in names])
    traced = [i for i, x in enumerate(leaves) if is_traced(x)]

    def session(*values):
        filled = list(leaves)
        for i, v in zip(traced, values):
            filled[i] = v
        open_session(dict(zip(names, tree_unflatten(tree, filled))), where)
    debug_callback(session, *[leaves[i] for i in traced])
    return token


def open_session(namespace, where):
    """A pdb session whose frame's locals are `namespace`."""
    print(f"Entering kiln's debugger at {where} (c: continue, q: quit; "
          f"locals: {', '.join(namespace) or 'none'})", flush=True)
    code = f"def {_SESSION_NAME}({', '.join(namespace)}):\n    _debugger.set_trace()\n    pass\n"
    scope = {"_debugger": _Debugger()}
    exec(compile(code, f"<kiln breakpoint at {where}>", "exec"), scope)
    scope[_SESSION_NAME](**namespace)
