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
    col_offset = len(block[0]) - len(block[0].lstrip()) if block else 0
    try:
        tree = gast.parse(text)
    except SyntaxError:
        # A lambda inside a larger expression: parse the lines as an expression statement.
        tree = gast.parse("(" + text.strip().rstrip(",").rstrip("\\") + "\n)")
    node = _find(tree, fn, code)
    if node is None:
        raise CompileError(f"kiln could not find the definition of "
                           f"{getattr(fn, '__qualname__', fn)} in {filename} at line "
                           f"{code.co_firstlineno}.", None,
                           "Define the function with `def` (or a lambda on its own line).")
    src_lines = [ln[col_offset:] if ln[:col_offset].strip() == "" else ln for ln in block]
    return ParsedFunction(node, filename, src_lines, start, col_offset, fn.__qualname__
                          if hasattr(fn, "__qualname__") else fn.__name__)


def _find(tree, fn, code):
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
    for n in candidates:
        args = [a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
        if args == want_args and n.lineno == 1:
            return n
    for n in candidates:
        args = [a.id for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
        if args == want_args:
            return n
    return candidates[0]
