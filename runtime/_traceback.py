"""Hiding kiln's own frames from tracebacks of user errors (`KILN_TRACEBACK=full` shows all).

Errors raised while kiln specialises or runs a user's function already name the user's file,
line and expression (with a caret); the frames of kiln's compiler in between only get in the
way, so `filter_traceback` drops every frame whose file lies inside the kiln package, or under
a path a library registered with `register_exclusion` (as libraries written for JAX register
their own files with JAX's `traceback_util`; `include_frame` and `include_filename` say
whether a frame is shown). `user_facing(fn)` (`api_boundary`, JAX's name)
runs `fn` and re-raises its errors with the filtered traceback.

Under `KILN_AS_JAX=1` this module also answers `import jax._src.traceback_util`
(kiln/compat.py), for libraries (equinox, jaxtyping) that register their files there.
"""
import functools
import os
import types

from . import compiler as _compiler
from .compiler.ir.builder import current

_KILN_DIRS = tuple(os.path.dirname(os.path.abspath(p)) + os.sep
                   for p in (__file__, _compiler.__file__))
_excluded = [*_KILN_DIRS]   # path prefixes whose frames are hidden


def register_exclusion(path):
    """Hide the frames of files under `path` (a file or a folder) from filtered tracebacks."""
    _excluded.append(os.path.abspath(path))


def include_filename(filename):
    """Whether frames of `filename` are shown in filtered tracebacks."""
    return not os.path.abspath(filename).startswith(tuple(_excluded))


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


def user_facing(fn):
    """Run `fn` with kiln's frames hidden from tracebacks of user errors (unless
    `KILN_TRACEBACK=full`, or while a function is being specialised: the enclosing call
    filters)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if show_full() or current() is not None:
                raise
            raise e.with_traceback(filter_traceback(e.__traceback__)) from None
    return wrapper


def api_boundary(fun, *, repro_api_name=None, repro_user_func=False):
    """JAX's name for `user_facing` (its `repro_*` options name what JAX's repro tool records;
    kiln has no such tool)."""
    return user_facing(fun)
