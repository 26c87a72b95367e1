"""Terminal colours for the text `kiln show` prints: Python (source and SSA), LLVM IR, assembly.

`highlight(text, language)` returns `text` with ANSI escape sequences added and nothing else
changed (removing the escapes gives back `text` exactly). When Pygments is installed it does the
lexing (`pygments.highlight` with a terminal formatter); otherwise a small built-in highlighter
colours what matters most in each language:
- Python (`highlight_python`, built on `tokenize`): keywords, calls of kiln primitives, the
  SSA's type comments (`# f32[3,4]`) and annotations (`x: 'f32[3,4]'`). Text that does not
  tokenize as Python is returned as it is.
- LLVM IR and assembly (`RegexHighlighter` over the tables `LLVM_RULES` and `ASM_RULES`):
  comments, labels, names/registers, types, keywords/mnemonics, directives and numbers.
Pygments is optional: kiln never depends on it.
"""
import io
import keyword
import re
import tokenize

RESET = "\x1b[0m"
STYLES = {
    "keyword": "\x1b[1;35m", "primitive": "\x1b[1;36m", "comment": "\x1b[32m",
    "string": "\x1b[33m", "name": "\x1b[34m", "type": "\x1b[36m", "number": "\x1b[33m",
    "label": "\x1b[1;33m", "directive": "\x1b[35m",
}


def _paint(text, spans):
    """`text` with each (start, end, style) span wrapped in its colour (spans in order)."""
    out, last = [], 0
    for a, b, style in spans:
        out += [text[last:a], STYLES[style], text[a:b], RESET]
        last = b
    out.append(text[last:])
    return "".join(out)


# ----------------------------------------------------------------------------------- Python

def _python_style(tokens, i, primitives):
    tok = tokens[i]
    if tok.type == tokenize.COMMENT:
        return "comment"  # the SSA's type comments: `# f32[3,4]`
    if tok.type == tokenize.STRING:
        return "string"   # the SSA's type annotations: `x: 'f32[3,4]'`
    if tok.type != tokenize.NAME:
        return None
    if keyword.iskeyword(tok.string):
        return "keyword"
    called = i + 1 < len(tokens) and tokens[i + 1].string == "("
    attribute = i > 0 and tokens[i - 1].string == "."
    return "primitive" if called and not attribute and tok.string in primitives else None


def highlight_python(text):
    """`text` with ANSI colours on keywords, primitive calls, type comments and annotations;
    text that does not tokenize as Python is returned as it is."""
    from .ir.registry import PRIMITIVES
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    spans = []
    for i, tok in enumerate(tokens):
        style = _python_style(tokens, i, PRIMITIVES)
        if style is not None:
            spans.append((starts[tok.start[0] - 1] + tok.start[1],
                          starts[tok.end[0] - 1] + tok.end[1], style))
    return _paint(text, spans)


# ------------------------------------------------------------------------ LLVM IR, assembly

# (style, pattern) in priority order: the first pattern that matches at a position wins.
LLVM_RULES = [
    ("comment", r";[^\n]*"),
    ("string", r'c?"[^"\n]*"'),
    ("label", r"^[-\w.$]+:"),
    ("name", r"[%@](?:[-\w.$]+|\"[^\"\n]*\")"),
    ("comment", r"![\w.]+"),                     # metadata: !0, !alias.scope
    ("type", r"\b(?:i\d+|half|bfloat|float|double|x86_fp80|fp128|ptr|void|label|metadata)\b"),
    ("number", r"-?\b(?:0x[0-9A-Fa-f]+|\d+(?:\.\d+)?(?:e[-+]?\d+)?)\b"),
    ("keyword", r"\b[a-z_][a-z0-9_]*\b"),        # every other bare word is a keyword
]

# MLIR text (StableHLO): operation names such as stablehlo.add are the keywords.
MLIR_RULES = [
    ("comment", r"//[^\n]*"),
    ("string", r'"[^"\n]*"'),
    ("label", r"\^\w+"),
    ("name", r"[%@][\w.$#]+"),
    ("type", r"\b(?:tensor|complex|array|i\d+|ui\d+|f\d+|bf16)\b"),
    ("number", r"-?\b(?:0x[0-9A-Fa-f]+|\d+(?:\.\d+)?(?:e[-+]?\d+)?)\b"),
    ("keyword", r"\b[a-z_][\w.]*\b"),
]

ASM_RULES = [
    ("comment", r"(?:#(?![-\d:])|//|;)[^\n]*"),  # `#` starts aarch64 immediates, not comments
    ("label", r"^[^\s:#]+:"),
    ("directive", r"^\s*\.[\w.]+"),
    ("keyword", r"^\s+[a-z][\w.]*"),             # the mnemonic
    ("string", r'"[^"\n]*"'),
    ("name", r"%[a-z][a-z0-9]*"),                # AT&T registers
    ("number", r"[$#]?-?\b(?:0x[0-9A-Fa-f]+|\d+)\b"),
]


class RegexHighlighter:
    """Colours text by a table of (style, pattern) rules such as LLVM_RULES and ASM_RULES."""

    def __init__(self, rules):
        self.styles = [style for style, _ in rules]
        self.regex = re.compile("|".join(f"({pattern})" for _, pattern in rules), re.M)

    def __call__(self, text):
        return _paint(text, [(m.start(), m.end(), self.styles[m.lastindex - 1])
                             for m in self.regex.finditer(text) if m.end() > m.start()])


CUDA_RULES = [
    ("comment", r"//[^\n]*"),
    ("string", r'"[^"\n]*"'),
    ("type", r"\b(?:void|bool|char|short|int|long|unsigned|signed|float|double|const|"
             r"__restrict__)\b"),
    ("keyword", r"\b(?:extern|__global__|__device__|for|if|else|return)\b"),
    ("name", r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b"),
    ("number", r"-?\b(?:0x[0-9A-Fa-f]+|\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?:[fFuUlL]+)?\b"),
]

BUILTIN = {
    "python": highlight_python,
    "llvm": RegexHighlighter(LLVM_RULES),
    "asm": RegexHighlighter(ASM_RULES),
    "cuda": RegexHighlighter(CUDA_RULES),
    "ptx": RegexHighlighter(ASM_RULES),
    "mlir": RegexHighlighter(MLIR_RULES),
}

_PYGMENTS_LEXERS = {"python": "PythonLexer", "llvm": "LlvmLexer", "asm": "GasLexer",
                    "cuda": "CudaLexer", "ptx": "GasLexer"}


def highlight_pygments(text, language):
    """`text` highlighted by Pygments, or None when Pygments is not installed."""
    try:
        import pygments
        from pygments import lexers
        from pygments.formatters import TerminalFormatter
    except ImportError:
        return None
    lexer = getattr(lexers, _PYGMENTS_LEXERS[language])(stripnl=False, ensurenl=False)
    return pygments.highlight(text, lexer, TerminalFormatter())


def highlight(text, language):
    """`text` (in `language`: "python", "llvm", "asm", "cuda", "ptx" or "mlir") with ANSI
    colours (Pygments' where it has a lexer for the language)."""
    coloured = highlight_pygments(text, language) if language in _PYGMENTS_LEXERS else None
    return BUILTIN[language](text) if coloured is None else coloured
