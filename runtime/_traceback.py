"""Hiding kiln's own frames from tracebacks of user errors (`KILN_TRACEBACK=full` shows all).

Errors raised while kiln specialises or runs a user's function already name the user's file,
line and expression (with a caret); the frames of kiln's compiler in between only get in the
way, so `filter_traceback` drops every frame whose file lies inside the kiln package, or under
a path a library registered with `register_exclusion` (as libraries written for JAX register
their own files with JAX's `traceback_util`: equinox, jaxtyping, flax; `include_frame` and
`include_filename` say whether a frame is shown). `api_boundary(fn)` (kiln's modules call it
`user_facing`) wraps a function so that errors leaving it are filtered that way.

Under `KILN_AS_JAX=1` this module also answers `import jax._src.traceback_util`
(kiln/compat.py), for these names and the list `_exclude_paths` that flax reads
(docs/compat.md).
"""
import functools
import os
import types

from . import compiler as _compiler
from .compiler.frontend.walked import WALKED_WRAPPERS
from .compiler.ir.builder import current

__all__ = ["api_boundary", "filter_traceback", "include_filename", "include_frame",
           "register_exclusion", "show_full", "user_facing"]

# Path prefixes whose frames tracebacks of user errors leave out: kiln's, then the registered.
_exclude_paths = [os.path.dirname(os.path.abspath(p)) + os.sep
                  for p in (__file__, _compiler.__file__)]


def register_exclusion(path):
    """Leave frames of files under `path` (a file or a folder) out of tracebacks of user
    errors (kept as given, as JAX keeps it: flax removes its paths from `_exclude_paths`)."""
    _exclude_paths.append(path)


def include_filename(filename):
    """Whether frames of `filename` are shown in filtered tracebacks."""
    return not os.path.abspath(filename).startswith(tuple(_exclude_paths))


def include_frame(frame):
    """Whether `frame` (a frame object) is shown in filtered tracebacks."""
    return include_filename(frame.f_code.co_filename)


def filter_traceback(tb):
    frames = []
    while tb is not None:
        if include_frame(tb.tb_frame):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def show_full():
    return os.environ.get("KILN_TRACEBACK", "").lower() == "full"


def api_boundary(fn, *, repro_api_name=None, repro_user_func=False):
    """Run `fn` with the excluded frames hidden from tracebacks of the errors it raises
    (unless `KILN_TRACEBACK=full`, or while a function is being specialised: the enclosing
    call filters). The wrapper takes `fn`'s name and module; the specialiser, which walks the
    source of functions outside kiln, walks `fn` itself (`WALKED_WRAPPERS`). The `repro_*`
    options name what JAX's repro tool records; kiln has no such tool."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if show_full() or current() is not None:
                raise
            raise e.with_traceback(filter_traceback(e.__traceback__)) from None
    WALKED_WRAPPERS[wrapper] = fn
    return wrapper


user_facing = api_boundary   # the name kiln's own modules use
