"""Hiding kiln's own frames from tracebacks of user errors (`KILN_TRACEBACK=full` shows all).

Errors raised while kiln specialises or runs a user's function already name the user's file,
line and expression (with a caret); the frames of kiln's compiler in between only get in the
way, so `reraise_filtered` drops every frame whose file lies inside the kiln package.
"""
import os
import types

from . import compiler as _compiler

_KILN_DIRS = tuple(os.path.dirname(os.path.abspath(p)) + os.sep
                   for p in (__file__, _compiler.__file__))


def _is_kiln_frame(tb):
    f = os.path.abspath(tb.tb_frame.f_code.co_filename)
    return f.startswith(_KILN_DIRS)


def filter_traceback(tb):
    frames = []
    while tb is not None:
        if not _is_kiln_frame(tb):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def show_full():
    return os.environ.get("KILN_TRACEBACK", "").lower() == "full"
