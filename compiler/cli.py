"""The `kiln` command line (`main`): `kiln show TARGET --arg SPEC ... --stage STAGE`.

`kiln show` loads a function (`path/to/file.py:func`, `package.module:func`, with a dotted
attribute path such as `Class.method` after the colon), builds example arguments from the
argument specs of `kiln.compiler.argspec`, and prints the function at one stage of the compiler.
`STAGES` maps each stage name to what produces its text and the language of that text (which
picks the highlighter for `--color`); later stages (vmap, llvm, asm, ...) are new rows.

Exit codes: 0 success; 1 an error in the user's code (a located compile error prints its
message, which holds the file, line and caret, without a traceback); 2 a usage error (argparse's
convention), including a malformed spec, shown with a caret under the bad character.

This module drives the user-facing runtime, so it imports `kiln` only inside the functions
that need it: the compiler never imports the runtime at import time.
"""
import argparse
import importlib
import importlib.util
import inspect
import io
import keyword
import os
import sys
import textwrap
import tokenize
import traceback
from typing import Callable, NamedTuple

from . import argspec
from .errors import ConcretizationError, KilnError


class UsageError(Exception):
    """A bad command line: printed by argparse with the usage, exit code 2."""


class UserError(Exception):
    """An error in the user's code or environment: printed as it is, exit code 1."""


# ------------------------------------------------------------------------------- arguments

class Call:
    """The example arguments that `--arg` and `--static` describe, and which are static;
    `in_axes` and `axis_name` are the vmap stage's options."""

    def __init__(self, specs, statics, in_axes=0, axis_name=None):
        self.args = [s.example() for s in specs]
        self.static_argnums = tuple(i for i, s in enumerate(specs) if s.static)
        self.kwargs = {name: s.example() for name, s in statics}
        self.static_argnames = tuple(self.kwargs)
        self.in_axes = in_axes
        self.axis_name = axis_name


def _parse_spec(text, what):
    try:
        return argspec.parse(text)
    except argspec.SpecError as e:
        raise UsageError(f"bad {what}: {e}") from None


def _parse_static(item):
    name, eq, text = item.partition("=")
    name = name.strip()
    if not eq or not name.isidentifier():
        raise UsageError(f"bad --static {item!r}: expected NAME=VALUE, e.g. --static n=3")
    spec = _parse_spec(text, f"--static value for {name}")
    if spec.has_arrays:
        raise UsageError(f"bad --static value for {name}: {text!r} holds array specs; a "
                         f"static value is a Python literal (pass arrays with --arg)")
    try:
        hash(spec.value)
    except TypeError:
        raise UsageError(f"bad --static value for {name}: {text!r} is not hashable; write a "
                         f"tuple instead") from None
    return name, spec


def _parse_in_axes(text):
    """`--in-axes`: one axis for every argument (`1`), or one per dynamic argument
    (`0,None,1`)."""
    def axis(item):
        item = item.strip()
        if item == "None":
            return None
        try:
            return int(item)
        except ValueError:
            raise UsageError(f"bad --in-axes {text!r}: expected integers or None separated by "
                             f"commas, e.g. --in-axes 0,None") from None
    items = [axis(item) for item in text.split(",")]
    return items[0] if len(items) == 1 and "," not in text else tuple(items)


def _call(ns):
    specs = [_parse_spec(text, "--arg spec") for text in ns.arg]
    vmap_options = {"in_axes": ns.in_axes, "axis_name": ns.axis_name}
    if ns.stage != "vmap" and any(v is not None for v in vmap_options.values()):
        raise UsageError("--in-axes and --axis-name are options of --stage vmap")
    in_axes = 0 if ns.in_axes is None else _parse_in_axes(ns.in_axes)
    return Call(specs, [_parse_static(item) for item in ns.static], in_axes, ns.axis_name)


# --------------------------------------------------------------------------------- targets

def load_target(target):
    """The callable that TARGET (`file.py:attr.path` or `package.module:attr.path`) names."""
    where, colon, path = target.rpartition(":")
    if not colon or not where or not path:
        raise UsageError(f"bad target {target!r}: expected FILE.py:FUNC or package.module:FUNC")
    is_file = where.endswith(".py") or "/" in where or os.sep in where
    obj = _load_file(where) if is_file else _load_module(where)
    parts = path.split(".")
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"bad target {target!r}: {where} has no attribute "
                             f"{'.'.join(parts[:i + 1])!r}") from None
    if not callable(obj):
        raise UsageError(f"bad target {target!r}: {path} is a {type(obj).__name__}, "
                         f"not a function")
    return obj


def _load_file(where):
    path = os.path.abspath(where)
    if not os.path.isfile(path):
        raise UsageError(f"bad target: no such file {where!r}")
    directory = os.path.dirname(path)
    if directory not in sys.path:  # so that the file's own imports work
        sys.path.insert(0, directory)
    name = _free_module_name(os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise UserError(f"importing {where} failed:\n{_user_traceback(e)}") from None
    return module


def _free_module_name(stem):
    base = stem if stem.isidentifier() else "kiln_target"
    name, n = base, 1
    while name in sys.modules:
        name, n = f"{base}_{n}", n + 1
    return name


def _load_module(name):
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:  # as `python -m` does
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise UsageError(f"bad target: no module named {e.name!r}") from None
        raise UserError(f"importing {name} failed:\n{_user_traceback(e)}") from None
    except Exception as e:
        raise UserError(f"importing {name} failed:\n{_user_traceback(e)}") from None


def _user_traceback(e):
    """The traceback of `e` from the first frame that is neither this module's nor importlib's."""
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb)).rstrip("\n")


def _python_function(fn):
    """The Python function under kiln.jit, functools.partial and bound-method wrappers."""
    for attr in ("_fun", "func", "__func__"):
        inner = getattr(fn, attr, None)
        if callable(inner):
            return _python_function(inner)
    return fn


def _unjit(fn):
    """A `kiln.jit`-decorated target is shown through its Python function: the specs say which
    arguments are static."""
    from kiln.jit import Jitted
    return fn._fun if isinstance(fn, Jitted) else fn


# ---------------------------------------------------------------------------------- stages

def _stage_source(fn, call):
    plain = _python_function(fn)
    try:
        return textwrap.dedent(inspect.getsource(plain))
    except (OSError, TypeError) as e:
        raise UserError(f"the source of {getattr(plain, '__qualname__', plain)!r} is not "
                        f"available: {e}") from None


def _stage_ssa(fn, call):
    import kiln
    make = kiln.make_ir(_unjit(fn), static_argnums=call.static_argnums,
                        static_argnames=call.static_argnames)
    return str(make(*call.args, **call.kwargs))


def _stage_simplified(fn, call):
    import kiln
    jitted = kiln.jit(_unjit(fn), static_argnums=call.static_argnums,
                      static_argnames=call.static_argnames)
    return jitted.lower(*call.args, **call.kwargs).as_text()


def _dynamic_call(fn, call):
    """`(function of the dynamic arguments only, their values)`: static arguments are bound
    by keyword (the derivative stages differentiate every dynamic positional argument)."""
    import functools
    plain = _unjit(fn)
    names = list(inspect.signature(plain).parameters)
    statics = dict(call.kwargs)
    dynamic = []
    for i, value in enumerate(call.args):
        if i in call.static_argnums:
            if any(j > i and j not in call.static_argnums for j in range(len(call.args))):
                raise UserError("the derivative and vmap stages need static arguments after "
                                "the dynamic ones (they transform every dynamic positional "
                                "argument)")
            statics[names[i]] = value
        else:
            dynamic.append(value)
    return (functools.partial(plain, **statics) if statics else plain), dynamic


def _derivative_text(fn):
    from kiln.compiler import passes
    return str(passes.run_pipeline(fn))


def _stage_grad(fn, call):
    import kiln
    target, args = _dynamic_call(fn, call)
    nums = tuple(range(len(args)))
    return _derivative_text(kiln.make_ir(kiln.grad(target, argnums=nums))(*args))


def _stage_jvp(fn, call):
    import kiln
    import numpy as np
    target, args = _dynamic_call(fn, call)
    tangents = tuple(np.ones(np.shape(a), np.asarray(a).dtype) for a in args)
    return _derivative_text(kiln.make_ir(
        lambda *primals: kiln.jvp(target, primals, tangents))(*args))


def _stage_vmap(fn, call):
    import kiln
    target, args = _dynamic_call(fn, call)
    batched = kiln.vmap(target, in_axes=call.in_axes, axis_name=call.axis_name)
    return _derivative_text(kiln.make_ir(batched)(*args))


class Stage(NamedTuple):
    run: Callable     # (target, Call) -> text
    language: str     # picks the highlighter
    needs_args: bool  # whether the specs must match the function's signature
    help: str


STAGES = {
    "source": Stage(_stage_source, "python", False, "the function's Python source"),
    "ssa": Stage(_stage_ssa, "python", True,
                 "the SSA form straight from specialisation (kiln.make_ir)"),
    "simplified": Stage(_stage_simplified, "python", True,
                        "the SSA form after the pass pipeline (jit(f).lower(...).as_text())"),
    "grad": Stage(_stage_grad, "python", True,
                  "reverse mode: grad of f with respect to every dynamic argument, simplified "
                  "(forward section, then backward section)"),
    "jvp": Stage(_stage_jvp, "python", True,
                 "forward mode: f's JVP with tangents of ones for every dynamic argument, "
                 "simplified"),
    "vmap": Stage(_stage_vmap, "python", True,
                  "batching: vmap of f over axis 0 of every dynamic argument (the specs are "
                  "the batched arguments; see --in-axes, --axis-name), simplified"),
}


def _check_signature(fn, call):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*call.args, **call.kwargs)
    except TypeError as e:
        name = getattr(fn, "__name__", "the function")
        raise UsageError(f"{name}{sig}: {e}; give one --arg per positional parameter and "
                         f"--static NAME=VALUE for keyword ones") from None


_CLI_HINTS = {
    ConcretizationError: "\nOn the command line, a static argument is a literal spec "
                         "(--arg 3) or --static NAME=VALUE.",
    NameError: "\nOn the command line, --stage vmap --axis-name NAME names the mapped axis.",
}


def render(stage, fn, call):
    """The text of `stage` for `fn` called with `call`; user errors become `UserError`."""
    if stage.needs_args:
        _check_signature(fn, call)
    try:
        return stage.run(fn, call)
    except UserError:
        raise
    except Exception as e:
        if isinstance(e, KilnError) or getattr(e, "_kiln_located", False):
            note = _CLI_HINTS.get(type(e), "")
            raise UserError(f"{type(e).__name__}: {e}{note}") from None
        raise UserError(f"compiling {getattr(fn, '__name__', fn)} failed:\n"
                        + "".join(traceback.format_exception(e)).rstrip("\n")) from None


# ------------------------------------------------------------------------------ highlighting

_RESET = "\x1b[0m"
_STYLES = {"keyword": "\x1b[1;35m", "primitive": "\x1b[1;36m", "comment": "\x1b[32m",
           "string": "\x1b[33m"}


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
    from .primitives import PRIMITIVES
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    out, last = [], 0
    for i, tok in enumerate(tokens):
        style = _python_style(tokens, i, PRIMITIVES)
        if style is None:
            continue
        a = starts[tok.start[0] - 1] + tok.start[1]
        b = starts[tok.end[0] - 1] + tok.end[1]
        out += [text[last:a], _STYLES[style], text[a:b], _RESET]
        last = b
    out.append(text[last:])
    return "".join(out)


HIGHLIGHTERS = {"python": highlight_python}


def _use_color(mode):
    if mode == "auto":
        return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return mode == "always"


# ---------------------------------------------------------------------------------- commands

def _show(ns):
    call = _call(ns)
    fn = load_target(ns.target)
    stage = STAGES[ns.stage]
    text = render(stage, fn, call)
    if _use_color(ns.color):
        text = HIGHLIGHTERS.get(stage.language, str)(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


_SHOW_DESCRIPTION = """\
Print FUNC at one stage of kiln's compiler, specialised for the arguments that the --arg specs
describe. TARGET is path/to/file.py:FUNC (the file is imported as a module, with its directory
on sys.path) or package.module:FUNC; FUNC may be a dotted path such as Class.method.

stages:
""" + "\n".join(f"  {name:<12}{stage.help}" for name, stage in STAGES.items())


def build_parser(version):
    parser = argparse.ArgumentParser(
        prog="kiln", description="kiln: JAX's API as a source-to-source compiler.")
    parser.add_argument("--version", action="version", version=f"kiln {version}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    show = commands.add_parser(
        "show", help="print a function at one stage of the compiler",
        description=_SHOW_DESCRIPTION, epilog=argspec.GRAMMAR,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("target", metavar="TARGET", help="FILE.py:FUNC or package.module:FUNC")
    show.add_argument("--arg", action="append", default=[], metavar="SPEC",
                      help="an argument spec for the next positional parameter (repeatable)")
    show.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                      help="a static keyword argument; VALUE is a Python literal (repeatable)")
    show.add_argument("--stage", choices=list(STAGES), default="simplified",
                      help="the stage to print (default: simplified)")
    show.add_argument("--in-axes", metavar="AXES",
                      help="vmap stage: the mapped axis of every dynamic argument (0, the "
                           "default) or of each in turn (0,None,1)")
    show.add_argument("--axis-name", metavar="NAME",
                      help="vmap stage: the name of the mapped axis, for collectives such as "
                           "lax.psum(x, NAME)")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="highlight the output (auto: when stdout is a terminal)")
    show.set_defaults(run=_show, parser=show)
    return parser


def main(argv=None):
    """Run the `kiln` command with `argv` (default: sys.argv[1:]); returns the exit code."""
    import kiln
    parser = build_parser(kiln.__version__)
    try:
        ns = parser.parse_args(argv)
        try:
            return ns.run(ns)
        except UsageError as e:
            ns.parser.error(str(e))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except UserError as e:
        sys.stdout.flush()
        print(f"kiln {ns.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
