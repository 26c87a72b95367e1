"""Finding and parsing a function's source: the first stage of specialisation.

`function_ast(fn)` returns the gast node (FunctionDef or Lambda) of a Python function, parsed
from its source file through `inspect` and `linecache` (so functions defined in notebook cells
and `exec`'d strings registered in linecache work too), with line numbers and columns of the
original file. Results are cached per code object. A function without source (a builtin, a C
extension, code compiled from a string that linecache does not know) raises `CompileError`
saying so.
"""
import inspect
import linecache
import textwrap

import gast

from ..errors import CompileError, SourceInfo

_CACHE = {}


class ParsedFunction:
    """A function's AST and what is needed to point back into its source."""
    __slots__ = ("node", "filename", "lines", "line_offset", "col_offset", "name")

    def __init__(self, node, filename, lines, line_offset, col_offset, name):
        self.node = node
        self.filename = filename
        self.lines = lines
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.name = name

    def info(self, node):
        """SourceInfo of `node` in the original file."""
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return SourceInfo(self.filename, self.line_offset + 1, 0, None, "", self.name)
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        col = (getattr(node, "col_offset", 0) or 0)
        end = getattr(node, "end_col_offset", None)
        if getattr(node, "end_lineno", lineno) != lineno:
            end = len(line.rstrip())
        return SourceInfo(self.filename, lineno + self.line_offset,
                          col + self.col_offset, None if end is None else end + self.col_offset,
                          (" " * self.col_offset) + line, self.name)


# Functions whose call does not run the body: kiln would otherwise run it as a plain function.
_SUSPENDING = {inspect.CO_COROUTINE: "an async function", inspect.CO_GENERATOR: "a generator",
               inspect.CO_ASYNC_GENERATOR: "an async generator"}
_SUSPENDING_FLAGS = inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def _refuse_suspending(fn, code, node):
    """A CompileError for an async function or a generator: its call does not run its body, so
    running the body as a plain function would be wrong. One whose body awaits or yields is
    left to the specialiser, which points at the `await` or `yield` itself."""
    kind = _SUSPENDING.get(code.co_flags & _SUSPENDING_FLAGS)
    if kind is None or any(isinstance(n, (gast.Await, gast.Yield, gast.YieldFrom))
                           for n in gast.walk(node)):
        return
    raise CompileError(
        f"kiln cannot compile {getattr(fn, '__qualname__', fn)}: it is {kind}, and its body "
        f"does not run when it is called (the call returns a "
        f"{'coroutine' if 'async' in kind else 'generator'}).", _def_line(code),
        "Compile a plain function and call it from the async code or the loop over the "
        "generator instead.")


def _def_line(code):
    """The SourceInfo of the line a function is defined on (its `def`, caret under it)."""
    line = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
    indent = len(line) - len(line.lstrip())
    return SourceInfo(code.co_filename, code.co_firstlineno, indent, len(line) or None, line,
                      code.co_name)


def function_ast(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        raise CompileError(f"kiln cannot compile {fn!r}: it is not a Python function with "
                           f"source (no __code__).", None,
                           "Call it outside the compiled function, or write it in Python.")
    # Code objects compare equal across files (equality ignores co_filename): key by both.
    key = (code, code.co_filename)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    parsed = _parse(fn, code)
    _refuse_suspending(fn, code, parsed.node)
    _CACHE[key] = parsed
    return parsed


def _parse(fn, code):
    filename = code.co_filename
    try:
        lines, start = inspect.findsource(code)
    except (OSError, TypeError):
        lines = linecache.getlines(filename)
        if not lines:
            raise CompileError(
                f"kiln cannot compile {getattr(fn, '__qualname__', fn)}: its source is not "
                f"available (defined in {filename!r}, which is not a file kiln can read).",
                None, "Define the function in a .py file or a notebook cell, or pass "
                      "kiln.jit a function whose source inspect.getsource can find.") from None
        start = code.co_firstlineno - 1
    block = inspect.getblock(lines[start:])
    text = textwrap.dedent("".join(block))
    # The indentation dedent removed (the lines' common one, not always the first line's).
    col_offset = len(block[0]) - len(text.splitlines(True)[0]) if block else 0
    try:
        tree = gast.parse(text)
    except SyntaxError:
        # A lambda inside a larger expression: parse the lines as a parenthesised expression,
        # starting on the line after the "(" so that lines and columns stay the file's.
        try:
            tree = gast.parse("(\n" + text.rstrip().rstrip(",").rstrip("\\") + "\n)")
            block = ["\n"] + block
            start -= 1
        except SyntaxError:  # its lines do not parse on their own: parse the whole file
            tree, block, start, col_offset = gast.parse("".join(lines)), lines, 0, 0
    node = _find(tree, fn, code, start, col_offset)
    if node is None:
        raise CompileError(f"kiln could not find the definition of "
                           f"{getattr(fn, '__qualname__', fn)} in {filename} at line "
                           f"{code.co_firstlineno}.", None,
                           "Define the function with `def` (or a lambda on its own line).")
    src_lines = [ln[col_offset:] if ln[:col_offset].strip() == "" else ln for ln in block]
    return ParsedFunction(node, filename, src_lines, start, col_offset, fn.__qualname__
                          if hasattr(fn, "__qualname__") else fn.__name__)


def _find(tree, fn, code, start, col_offset):
    name = code.co_name
    want_args = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    candidates = []
    for n in gast.walk(tree):
        if name == "<lambda>" and isinstance(n, gast.Lambda):
            candidates.append(n)
        elif isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef)) and n.name == name:
            candidates.append(n)
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    if name == "<lambda>":
        hit = _lambda_at(candidates, code, start, col_offset)
        if hit is not None:
            return hit
    for n in candidates:
        args = [a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
        if args == want_args and n.lineno == 1:
            return n
    for n in candidates:
        args = [a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
        if args == want_args:
            return n
    return candidates[0]


def _lambda_at(candidates, code, start, col_offset):
    """Of several lambdas in one block (`[lambda x: x + 1, lambda x: x * 10]`), the one whose
    body holds the code's first instruction (positions are the file's lines and columns);
    the innermost one when lambdas nest."""
    for line, _, col, end_col in code.co_positions():
        if line is not None and col is not None and end_col:
            break
    else:
        return None
    at = (line - start, col - col_offset)
    inside = [n for n in candidates
              if (n.body.lineno, n.body.col_offset) <= at <= (n.body.end_lineno,
                                                              n.body.end_col_offset)]
    return max(inside, key=lambda n: (n.body.lineno, n.body.col_offset), default=None)
