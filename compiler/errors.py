"""Errors a user can cause while kiln compiles their function.

Every error carries the user's source location: the file, the line, the line's text and a caret
under the expression (`SourceInfo`), says why, and says what to do. `CompileError` is for
constructs kiln cannot compile; `ConcretizationError` (a TypeError, like JAX's) is for needing
a concrete value from a traced one; `NonConcreteBooleanIndexError` (an IndexError) for boolean
masks under `jit`. Errors raised while a helper function is specialised show the whole user
stack: each call site from the compiled function down, then the failing expression (`calling`).
"""
import contextlib
import threading


class SourceInfo:
    """Where in the user's source an expression is: file, line, column span and line text."""
    __slots__ = ("filename", "lineno", "col", "end_col", "line", "function")

    def __init__(self, filename, lineno, col=0, end_col=None, line="", function=None):
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self.end_col = end_col
        self.line = line
        self.function = function

    def caret(self):
        """The source line with a caret under the expression."""
        text = self.line.rstrip("\n")
        if not text:
            return ""
        width = max(1, (self.end_col or self.col + 1) - self.col)
        return f"    {text}\n    {' ' * self.col}{'^' * width}"

    def where(self):
        fn = f", in {self.function}" if self.function else ""
        return f'File "{self.filename}", line {self.lineno}{fn}'

    def __repr__(self):
        return f"{self.filename}:{self.lineno}:{self.col}"


# The call sites of the user functions being specialised in this thread, outermost first
# (`calling`): an error in a helper shows every user line from the jitted function down to it.
_CALLS = threading.local()


@contextlib.contextmanager
def calling(info):
    """Within: specialising a user function that the expression at `info` calls."""
    stack = getattr(_CALLS, "stack", None)
    if stack is None:
        stack = _CALLS.stack = []
    stack.append(info)
    try:
        yield
    finally:
        stack.pop()


def _frame_lines(info):
    caret = info.caret()
    return [info.where()] + ([caret] if caret else [])


def located(message, info, hint=None):
    """`message`, then every user frame from the outermost call site down to `info` (file,
    line, function, the line with a caret under the expression), then `hint`."""
    parts = [message]
    if info is not None:
        for site in getattr(_CALLS, "stack", ()):
            if site is not None and (site.filename, site.lineno) != (info.filename, info.lineno):
                parts += _frame_lines(site)
        parts += _frame_lines(info)
    if hint:
        parts.append(hint)
    return "\n".join(parts)


class KilnError(Exception):
    """Base of kiln's located errors; `info` is the SourceInfo of the offending expression."""

    def __init__(self, message, info=None, hint=None):
        self.info = info
        self.hint = hint
        self.bare_message = message
        super().__init__(located(message, info, hint))


class CompileError(KilnError):
    """Something in the function cannot be compiled (unsupported syntax, no source, ...)."""


class BackendUnsupportedError(CompileError):
    """A backend cannot lower something the reference backend runs (complex numbers on the
    LLVM backend, today). `jit` without an explicit backend falls back to the reference
    backend for such a function; with `backend=` named, the error reaches the user."""


class ConcretizationError(KilnError, TypeError):
    """A traced value was used where Python needs a concrete one."""


class NonConcreteBooleanIndexError(KilnError, IndexError):
    """Boolean-mask indexing needs the mask's values, which a traced mask does not have."""


class RuntimeFailure(RuntimeError):
    """Something the program called failed while it ran (an FFI handler's error): JAX's
    `jax.errors.JaxRuntimeError`. The message starts with the status code, as XLA's do."""
