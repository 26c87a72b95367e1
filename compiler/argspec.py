"""The argument-spec grammar of the `kiln` command line: `f32[784,512]`, `(f32[3],i32[])`, `3`.

`parse(text)` reads one `--arg` spec into an `ArgSpec`: a tree of Python tuples, lists and dicts
whose array leaves are `ArraySpec`s (a dtype and a shape) and whose other leaves are Python
literals. `ArgSpec.example()` builds the example value that kiln specialises on (zeros of each
array's shape and dtype, as NumPy arrays); `ArgSpec.static` says whether the argument is static
(it holds Python literals and no array spec). A malformed spec raises `SpecError`, whose
message says what was expected and shows the spec with a caret under the bad character. `GRAMMAR` is the grammar's
user documentation (the epilog of `kiln show --help`, and docs/cli.md).

The grammar depends on NumPy and kiln's dtype table only, not on the runtime.
"""
import ast
import re

import numpy as np

from .ir import dtypes

DTYPE_NAMES = ("bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
               "f16", "f32", "f64", "c64", "c128")

GRAMMAR = """\
argument specs (one --arg per positional parameter, in order):
  f32[784,512]       an array: dtype, then the shape in brackets; i32[] is a scalar
                     dtypes: bool i8 i16 i32 i64 u8 u16 u32 u64 f16 f32 f64 c64 c128
                     (64-bit dtypes narrow to 32 bits unless x64 is enabled, as in JAX)
  (f32[3],i32[])     a tuple; (x,) is a 1-tuple and (x) is just x, as in Python
  [f32[3],f32[3]]    a list
  list[(f32[784,512],f32[512]),(f32[512,10],f32[10])]
                     the same as [...]: a list of the listed items
  {'W':f32[3,4],b:f32[4]}
                     a dict; keys are quoted strings or names
  3  2.5  True  None  'relu'
                     a Python literal (int, float, bool, None, string)
  Containers nest freely. An argument that holds literals but no array spec is static (it is
  passed to static_argnums, so it must be hashable: a literal or a tuple of literals).
  Numbers inside an argument that holds array specs are ordinary pytree leaves: weakly typed
  scalars. [], (), {} and None hold nothing and are passed as empty pytrees.
  Each array spec stands for zeros of that shape and dtype; kiln specialises on shapes and
  dtypes only, never on the values. Quote specs for the shell: --arg '(f32[3],i32[])'.
  --static NAME=VALUE passes a static keyword argument; VALUE is a static spec (a literal)."""


class SpecError(ValueError):
    """A malformed spec: `message` says what was expected at `text[pos]`."""

    def __init__(self, message, text, pos, width=1):
        self.message = message
        self.text = text
        self.pos = pos
        super().__init__(f"{message}\n    {text}\n    {' ' * pos}{'^' * max(1, width)}")


class ArraySpec:
    """One array of the spec: a dtype and a shape."""
    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)

    def zeros(self):
        """Zeros of this shape and dtype (a read-only view: no memory for large shapes)."""
        return np.broadcast_to(np.zeros((), self.dtype), self.shape)

    def __eq__(self, other):
        return type(other) is ArraySpec and (self.dtype, self.shape) == (other.dtype, other.shape)

    def __hash__(self):
        return hash((self.dtype, self.shape))

    def __str__(self):
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__


def _format(value):
    return _FORMAT.get(type(value), repr)(value)


def _example(value):
    return _EXAMPLE.get(type(value), lambda v: v)(value)


_FORMAT = {
    ArraySpec: str,
    tuple: lambda t: "(" + ",".join(map(_format, t)) + ("," if len(t) == 1 else "") + ")",
    list: lambda xs: "[" + ",".join(map(_format, xs)) + "]",
    dict: lambda d: "{" + ",".join(f"{k!r}:{_format(v)}" for k, v in d.items()) + "}",
}

_EXAMPLE = {
    ArraySpec: ArraySpec.zeros,
    tuple: lambda t: tuple(map(_example, t)),
    list: lambda xs: list(map(_example, xs)),
    dict: lambda d: {k: _example(v) for k, v in d.items()},
}


class ArgSpec:
    """A parsed argument spec: `value` (the tree of specs), whether it holds array specs
    (`has_arrays`) and whether it is `static`."""
    __slots__ = ("text", "value", "has_arrays", "static")

    def __init__(self, text, value, has_arrays, static):
        self.text = text
        self.value = value
        self.has_arrays = has_arrays
        self.static = static

    def example(self):
        """The example argument: the tree with each ArraySpec replaced by its zeros."""
        return _example(self.value)

    def __str__(self):
        """The spec in canonical form (no spaces); parsing it gives the same spec."""
        return _format(self.value)

    def __repr__(self):
        return f"ArgSpec({str(self)!r})"


# ------------------------------------------------------------------------------------ parser

_SPACE = re.compile(r"\s*")
_NAME = re.compile(r"[A-Za-z_]\w*")
_DIM = re.compile(r"\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STRING = {"'": re.compile(r"'(?:[^'\\\n]|\\.)*'"), '"': re.compile(r'"(?:[^"\\\n]|\\.)*"')}
_CONSTANTS = {"True": True, "False": False, "None": None}
_VALUE = ("a value: an array such as f32[3,4], a tuple (...), a list [...], a dict {...} "
          "or a Python literal")


class _Parser:
    """Recursive descent over the spec text; `pos` is the next unread character."""

    def __init__(self, text):
        self.text = text
        self.pos = 0
        self.arrays = 0
        self.literals = 0            # numbers, bools and strings (not None)
        self.first_container = None  # position of the first list or dict (unhashable)
        self.first_string = None     # position of the first string value (not a dict key)

    def error(self, message, pos=None, width=1):
        raise SpecError(message, self.text, self.pos if pos is None else pos, width)

    def peek(self):
        """The next non-blank character ('' at the end); skips the blanks."""
        self.pos = _SPACE.match(self.text, self.pos).end()
        return self.text[self.pos:self.pos + 1]

    def eat(self, char):
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def expect(self, char, where):
        if not self.eat(char):
            self.error(f"expected {char!r} {where}")

    # ----------------------------------------------------------------------------- values
    def value(self):
        char = self.peek()
        if char in _OPENERS:
            return _OPENERS[char](self)
        if char.isdigit() or (char and char in "+-."):
            return self.number()
        if char.isalpha() or char == "_":
            return self.name()
        self.error(f"expected {_VALUE}" if not char else f"unexpected {char!r}; expected {_VALUE}")

    def items(self, close, what):
        """Comma-separated values up to `close` (already past the opener); a trailing comma
        is allowed. Returns (items, whether a comma was seen)."""
        items, comma = [], False
        while not self.eat(close):
            items.append(self.value())
            if self.eat(","):
                comma = True
            elif self.peek() != close:
                self.error(f"expected ',' or {close!r} in the {what}")
        return items, comma

    def tuple_(self):
        self.pos += 1
        items, comma = self.items(")", "tuple")
        return items[0] if len(items) == 1 and not comma else tuple(items)

    def list_(self):
        self.note_container()
        self.pos += 1
        return self.items("]", "list")[0]

    def dict_(self):
        self.note_container()
        self.pos += 1
        out = {}
        while not self.eat("}"):
            start = self.pos
            key = self.key()
            if key in out:
                self.error(f"duplicate key {key!r} in the dict", start, self.pos - start)
            self.expect(":", "after the dict key")
            out[key] = self.value()
            if not self.eat(",") and self.peek() != "}":
                self.error("expected ',' or '}' in the dict")
        return out

    def key(self):
        if self.peek() in _STRING:
            return self.string_literal()
        match = _NAME.match(self.text, self.pos)
        if not match:
            self.error("expected a dict key: a quoted string or a name")
        self.pos = match.end()
        return match.group()

    def note_container(self):
        if self.first_container is None:
            self.first_container = self.pos

    def string(self):
        if self.first_string is None:
            self.first_string = self.pos
        self.literals += 1
        return self.string_literal()

    def string_literal(self):
        start = self.pos
        match = _STRING[self.text[start]].match(self.text, start)
        if not match:
            self.error("unterminated string", start)
        try:
            value = ast.literal_eval(match.group())
        except (ValueError, SyntaxError):
            self.error("invalid string literal", start, match.end() - start)
        self.pos = match.end()
        return value

    def number(self):
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            self.error("expected a number")
        self.pos = match.end()
        self.literals += 1
        text = match.group()
        return float(text) if any(c in text for c in ".eE") else int(text)

    def name(self):
        start = self.pos
        word = _NAME.match(self.text, start).group()
        self.pos += len(word)
        if word in _CONSTANTS:
            self.literals += word != "None"
            return _CONSTANTS[word]
        if word == "list":
            self.note_container()
            self.expect("[", "after 'list' (write list[item, item, ...])")
            return self.items("]", "list")[0]
        if word not in DTYPE_NAMES:
            self.error(f"unknown dtype {word!r}; expected one of {' '.join(DTYPE_NAMES)} "
                       f"(or list[...], True, False, None, or a quoted string)", start, len(word))
        return self.array(dtypes.from_short_name(word), word)

    def array(self, dtype, word):
        self.expect("[", f"after the dtype (write {word}[] for a scalar)")
        dims = []
        if not self.eat("]"):
            while True:
                dims.append(self.dim())
                if self.eat("]"):
                    break
                if not self.eat(","):
                    self.error("expected ']' after the dimensions")
                if self.eat("]"):
                    break
        self.arrays += 1
        return ArraySpec(dtype, dims)

    def dim(self):
        self.peek()
        match = _DIM.match(self.text, self.pos)
        if not match:
            self.error("expected a dimension (a non-negative integer)")
        self.pos = match.end()
        return int(match.group())


_OPENERS = {"(": _Parser.tuple_, "[": _Parser.list_, "{": _Parser.dict_,
            "'": _Parser.string, '"': _Parser.string}


def parse(text):
    """Parse one argument spec; raises `SpecError` with a caret when it is malformed."""
    p = _Parser(text)
    value = p.value()
    if p.peek():
        p.error(f"unexpected {p.peek()!r} after the end of the spec")
    static = p.arrays == 0 and p.literals > 0
    if static and p.first_container is not None:
        p.error("a static argument (one without array specs) must be hashable: write a tuple "
                "(...) instead of a list or dict", p.first_container)
    if not static and p.first_string is not None:
        p.error("a string can only be a static argument; it cannot sit in a container with "
                "array specs", p.first_string)
    return ArgSpec(text, value, p.arrays > 0, static)
