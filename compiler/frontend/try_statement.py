"""`try` statements in compiled functions, run at specialisation as JAX runs them at trace time.

The body is specialised; an exception raised meanwhile (by kiln: a shape or dtype error, a
ConcretizationError; by Python: a KeyError from a dict; by the user's `raise`; in a helper)
that a handler matches is handled by specialising the handler instead. `else` and `finally`
run as in Python, `except E as e` binds the exception, a bare `raise` re-raises it. Compiled
code does not raise: only exceptions raised while specialising are caught.
"""
import weakref

import gast

from ..errors import CompileError
from ..ir import builder as _builder
from . import statements as S
from .specialise import ReturnSignal, BreakSignal, ContinueSignal, eval_expr, is_traced, with_location

class Step(gast.stmt):
    """A step of the specialiser placed among the user's statements (so that it also runs in
    the continuation a `return` under a traced `if` specialises): `run(frame)`."""
    _fields = ()


def _step(run, node):
    st = _located(Step(), node)
    st.run = run
    return st


def _located(st, node):
    st.lineno, st.col_offset = getattr(node, "lineno", None), getattr(node, "col_offset", 0)
    return st


class _Escaped(Exception):
    """An exception raised after a `try` body completed (in its `else`, its `finally` or the
    statements after it): not for that `try`'s handlers."""


class AbandonSpeculation(Exception):
    """A handler caught an exception while a loop was compiled speculatively (`for i in
    range(n)` with `i` traced, where Python has it static): the exception may come from that,
    so the loop is unrolled instead, as Python runs it."""


# Control-flow signals of the specialiser: never matched by a user's `except`.
_SIGNALS = (ReturnSignal, BreakSignal, ContinueSignal, _Escaped, AbandonSpeculation)
# handling: exceptions being handled (a bare `raise` re-raises the last); bodies: (builder,
# frame, node) of each `try` body being specialised, innermost last (None while its `else`
# runs); speculating: the number of loops being compiled speculatively; returning: the
# regions of `if`s on traced values whose branches end in a `return` (continuations).
_TRY = _builder.PerThread(handling=list, bodies=list, speculating=lambda: [0],
                          returning=weakref.WeakSet)


def try_statement(frame, node, rest):
    """`try` at specialisation, as JAX's tracing runs it in Python: the body is specialised,
    and an exception raised meanwhile that a handler matches is handled by specialising that
    handler. What the body emitted before the exception stays (dead code, removed later);
    variables it assigned keep their values, except values of traced regions it left
    unfinished, which go back to what they were before the `try`. `rest` (the statements after
    the `try`, when it jumps) runs after the `finally` block on every path."""
    reached_finally = []
    tail = [_step(lambda f: reached_finally.append(True), node)] + list(node.finalbody) + rest
    entry, b = dict(frame.locals), _builder.current()
    _TRY.bodies.append((b, frame, node))
    depth = len(_TRY.bodies)
    try:
        try:
            S.exec_block(frame, list(node.body) + [_step(_then(list(node.orelse) + tail), node)])
        except _Escaped as e:
            raise e.args[0] from None
        except _SIGNALS:
            raise
        except Exception as exc:
            del _TRY.bodies[depth - 1:]
            handler = _matching_handler(frame, node, exc)
            if handler is None:
                raise
            if _TRY.speculating[0]:
                raise AbandonSpeculation() from exc
            _after_exception(frame, entry, b)
            _handle(frame, handler, exc, tail)
    finally:
        del _TRY.bodies[depth - 1:]
        if node.finalbody and not reached_finally:
            _after_exception(frame, entry, b)
            S.exec_block(frame, node.finalbody)


def _then(stmts):
    def run(frame):
        _TRY.bodies.append(None)
        try:
            S.exec_block(frame, stmts)
        except _SIGNALS:
            raise
        except Exception as e:
            raise _Escaped(e) from None
        finally:
            _TRY.bodies.pop()
    return run


def _matching_handler(frame, node, exc):
    for handler in node.handlers:
        if handler.type is None:
            return handler
        kinds = eval_expr(frame, handler.type)
        if is_traced(kinds) or not isinstance(kinds, (type, tuple)):
            raise CompileError("an `except` clause needs exception classes known when the "
                               "function is compiled", frame.info(handler.type))
        if isinstance(exc, kinds):
            return handler
    return None


def _handle(frame, handler, exc, tail):
    """Specialise `handler` for `exc` (bound to its name: the exception as raised, without
    the source location kiln adds to errors it reports), then `tail`."""
    depth = len(_TRY.handling)
    _TRY.handling.append(exc)

    def end(frame):
        del _TRY.handling[depth:]
        if handler.name is not None:   # Python deletes the name after the handler
            frame.locals.pop(handler.name.id, None)
    try:
        if handler.name is not None:
            S.assign_target(frame, handler.name, getattr(exc, "_kiln_original", exc))
        S.exec_block(frame, list(handler.body) + [_step(end, handler)] + tail)
    finally:
        del _TRY.handling[depth:]


def _after_exception(frame, entry, b):
    """The locals after an exception left a `try` body: a traced value of a region the
    exception left unfinished (a branch or loop body on traced values) is not usable any more,
    and the variable goes back to its value before the `try`."""
    live = set()
    while b is not None:
        live.add(id(b))
        b = b.parent

    def usable(v):
        if is_traced(v):
            return id(v.builder) in live
        if type(v) in (tuple, list):
            return all(usable(x) for x in v)
        if type(v) is dict:
            return all(usable(x) for x in v.values())
        return True
    now = frame.locals
    frame.locals = {k: v for k, v in entry.items() if k not in now}
    for k, v in now.items():
        if usable(v) and (k in entry or not k.startswith("$")):
            frame.locals[k] = v
        elif k in entry:
            frame.locals[k] = entry[k]


def reraise(frame, node):
    """A bare `raise`: the exception being handled."""
    if not _TRY.handling:
        raise with_location(RuntimeError("No active exception to reraise"), frame.info(node))
    raise _TRY.handling[-1]


def in_try_body():
    """Is the innermost `try` body being specialised at the current builder's level (so that
    an exception raised here may be handled here)?"""
    return bool(_TRY.bodies) and _TRY.bodies[-1] is not None and \
        _TRY.bodies[-1][0] is _builder.current()


def returning_region(builder):
    """`builder` is a branch of an `if` on a traced value that ends in a `return`."""
    _TRY.returning.add(builder)


def raise_in_branch(frame, exc):
    """`raise exc` in a branch of an `if` on a traced value, inside a `try` body of the same
    function whose handler for it ends in a `return` (and that has no `finally`): specialise
    the handler there, as that branch's continuation, which returns. Nothing (the raise
    cannot be compiled) where any of that does not hold."""
    entry = _TRY.bodies[-1] if _TRY.bodies else None
    if entry is None or entry[1] is not frame or entry[2].finalbody:
        return
    b = _builder.current()
    while b is not entry[0]:
        if b is None or b not in _TRY.returning:
            return
        b = b.parent
    handler = _matching_handler(frame, entry[2], exc)
    if handler is not None and handler.body and isinstance(handler.body[-1], gast.Return):
        _handle(frame, handler, exc, [])


class speculating:
    """Context: a loop is being compiled speculatively (see `AbandonSpeculation`)."""

    def __enter__(self):
        _TRY.speculating[0] += 1

    def __exit__(self, *exc):
        _TRY.speculating[0] -= 1
