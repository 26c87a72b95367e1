"""The `kiln` command line (`main`): `kiln show`, `kiln compile`, `kiln doctor`,
`kiln cache info|clear`.

`kiln show TARGET --arg SPEC ... --stage STAGE` loads a function (`path/to/file.py:func`,
`package.module:func`, with a dotted attribute path such as `Class.method` after the colon),
builds example arguments from the argument specs of `kiln.compiler.argspec`, and prints the
function at one stage of the compiler: its source, the SSA form (as specialised, simplified,
differentiated, batched, fused), the LLVM backend's IR and assembly, the CUDA backend's
kernels, or the StableHLO module. `STAGES` maps each stage
name to what produces its text and the language of that text (which picks the highlighter of
`kiln.compiler.highlight` for `--color`), and lists only what this build has; the SSA stages
after specialisation are the pipeline's (`kiln.compiler.passes.STAGES`,
one per pass), and the native ones the LLVM backend's text levels. `kiln compile TARGET...
--arg SPEC ... -o DIR` builds a shared library with a C header and a manifest through
`kiln.cli.aot.compile_library`, every stage of every function written beside it. `kiln doctor`
prints `kiln.cli.doctor.report()`; `kiln cache` shows and clears the LLVM backend's disk cache.

Exit codes: 0 success; 1 an error in the user's code or environment (a located compile error
prints its message, which holds the file, line and caret, without a traceback); 2 a usage error
(argparse's convention), including a malformed spec, shown with a caret under the bad character.

The stages go through the runtime's public API (`kiln.make_ir`, `kiln.grad`, `kiln.jvp`,
`kiln.vmap`), the pipeline (`kiln.compiler.passes`) and the staging service (`kiln.staging`:
pipelines and backends by name); llvmlite is imported only by the stages and commands that
need the LLVM backend.
"""
import argparse
import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import tempfile
import textwrap
import traceback
from typing import Callable, NamedTuple

import numpy as np

from .. import __version__, staging
from ..ad import jvp
from ..jit import make_ir
from ..vmap import vmap
from ..compiler import argspec, passes
from ..compiler.aot import AOTError, AOTUsageError, Target
from ..compiler.errors import ConcretizationError, KilnError
from .aot import compile_cuda_library, compile_library, compile_stablehlo_library, dynamic_call, \
    python_function as _unjit
from .aot import specialise as specialise_target


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


def _parse_in_axes(text, option="--in-axes"):
    """`--in-axes` (and `kiln compile --vmap`): one axis for every argument (`1`), or one per
    dynamic argument (`0,None,1`)."""
    def axis(item):
        return None if item.strip() == "None" else int(item)
    return _parse_list(text, option, axis, "integers or None separated by commas, e.g. "
                                           f"{option} 0,None")


def _parse_argnums(text, option="--argnums"):
    """`--argnums ARGNUMS` (or `kiln compile --grad ARGNUMS`): `0` or `0,2` (non-negative
    integers), as kiln.grad's argnums."""
    def argnum(item):
        if not item.strip().isdigit():
            raise ValueError(item)
        return int(item)
    return _parse_list(text, option, argnum, "argument numbers separated by commas, e.g. "
                                             f"{option} 0,1 (write {option}=0,1 or put "
                                             f"{option} after the targets)")


def _argnums(ns):
    """The differentiated arguments: --argnums, or kiln compile's --grad ARGNUMS; 0 (as
    kiln.grad) by default."""
    given = getattr(ns, "grad", None)
    if given not in (None, "0") and ns.argnums is not None and \
            _parse_argnums(given, "--grad") != _parse_argnums(ns.argnums):
        raise UsageError(f"--grad {given} and --argnums {ns.argnums} disagree: give one")
    if ns.argnums is not None:
        return _parse_argnums(ns.argnums)
    return _parse_argnums(given if given is not None else "0", "--grad")


def _parse_list(text, option, parse, expected):
    """A comma-separated option value: one item, or a tuple of items when there is a comma;
    a UsageError with a caret under the first bad item."""
    items, pos = [], 0
    for item in text.split(","):
        try:
            items.append(parse(item))
        except ValueError:
            caret = argspec.SpecError(f"expected {expected}", text, pos, max(1, len(item)))
            raise UsageError(f"bad {option} {text!r}: {caret}") from None
        pos += len(item) + 1
    return items[0] if len(items) == 1 else tuple(items)


def _call(ns):
    specs = [_parse_spec(text, "--arg spec") for text in ns.arg]
    vmap_options = {"in_axes": ns.in_axes, "axis_name": ns.axis_name}
    if ns.stage != "vmap" and any(v is not None for v in vmap_options.values()):
        raise UsageError("--in-axes and --axis-name are options of --stage vmap")
    if ns.stage != "grad" and ns.argnums is not None:
        raise UsageError("--argnums is an option of --stage grad")
    in_axes = 0 if ns.in_axes is None else _parse_in_axes(ns.in_axes)
    call = Call(specs, [_parse_static(item) for item in ns.static], in_axes, ns.axis_name)
    call.argnums = _argnums(ns)
    return call


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


# ---------------------------------------------------------------------------------- stages

def _stage_source(fn, call):
    plain = _python_function(fn)
    try:
        return textwrap.dedent(inspect.getsource(plain))
    except (OSError, TypeError) as e:
        raise UserError(f"the source of {getattr(plain, '__qualname__', plain)!r} is not "
                        f"available: {e}") from None


def _specialised(fn, call):
    """The SSA function straight from specialisation (kiln.make_ir)."""
    make = make_ir(_unjit(fn), static_argnums=call.static_argnums,
                        static_argnames=call.static_argnames)
    return make(*call.args, **call.kwargs)


def _stage_ssa(fn, call):
    return str(_specialised(fn, call))


@contextlib.contextmanager
def _aot_errors():
    """AOTError (a bad target or transform) as the command's UserError."""
    try:
        yield
    except AOTError as e:
        raise UserError(str(e)) from None


def _dynamic_call(fn, call):
    """`(function of the dynamic arguments only, their values)`: static arguments are bound
    by keyword (the derivative stages differentiate every dynamic positional argument)."""
    try:
        return dynamic_call(_unjit(fn), call.args, call.static_argnums, call.kwargs)
    except AOTError as e:
        raise UserError(str(e)) from None


def _derivative_text(fn):
    return str(staging.run_pipeline(fn))


def _stage_grad(fn, call):
    """grad(f, argnums) exactly as `kiln compile --grad` specialises it (the gradients only)."""
    target = Target(_unjit(fn), tuple(call.args), call.kwargs, call.static_argnums,
                    (("grad", call.argnums),))
    with _aot_errors():
        return _derivative_text(specialise_target(target).function)


def _stage_jvp(fn, call):
    target, args = _dynamic_call(fn, call)
    tangents = tuple(np.ones(np.shape(a), np.asarray(a).dtype) for a in args)
    return _derivative_text(make_ir(lambda *primals: jvp(target, primals, tangents))(*args))


def _stage_vmap(fn, call):
    target, args = _dynamic_call(fn, call)
    batched = vmap(target, in_axes=call.in_axes, axis_name=call.axis_name)
    return _derivative_text(make_ir(batched)(*args))


def _pipeline_stage(stage):
    """The stage printing the SSA function after the LLVM pipeline's pass whose result is
    `stage` ("simplified": `jit(f).lower(...).as_text()` where nothing fuses)."""
    def run(fn, call):
        return str(passes.run_pipeline(_specialised(fn, call), pipeline=passes.through(stage)))
    return run


def _fused(fn, call):
    """The SSA function after the LLVM backend's whole pipeline."""
    return staging.run_pipeline(_specialised(fn, call), "llvm")


def _llvm_module(name):
    """`kiln.compiler.backends.llvm.<name>`; a UserError when llvmlite is not installed."""
    try:
        return importlib.import_module(f"{passes.__package__}.backends.llvm.{name}")
    except ImportError as e:
        if not (e.name or "").startswith("llvmlite"):
            raise  # a bug in kiln, not a missing llvmlite
        raise UserError(f"the LLVM backend is unavailable: {e} (pip install llvmlite; "
                        f"`kiln doctor` shows what is missing)") from None


def _native_stage(level):
    """The stage printing the LLVM backend's text at `level` (Executable.as_text)."""
    def run(fn, call):
        _llvm_module("executable")  # llvmlite is installed
        return staging.compile_function(_fused(fn, call), "llvm").as_text(level)
    return run


def _cuda_stage(level):
    """The stage printing the CUDA backend's kernel (`cuda`) or its PTX for sm_90 (`ptx`,
    through NVRTC; no GPU needed)."""
    def run(fn, call):
        from ..compiler.backends.cuda import program, nvrtc
        if level == "ptx" and not nvrtc.available()[0]:
            raise UserError(f"the ptx stage needs NVRTC: {nvrtc.available()[1]}")
        return program.text(staging.run_pipeline(_specialised(fn, call), "reference"), level)
    return run


def _stablehlo_stage(fn, call):
    """The StableHLO module of the SSA after the reference pipeline (docs/stablehlo.md)."""
    from ..compiler.backends.stablehlo import lower_module
    return lower_module(staging.run_pipeline(_specialised(fn, call), "reference")).text


class Stage(NamedTuple):
    run: Callable     # (target, Call) -> text
    language: str     # picks the highlighter (kiln.compiler.highlight)
    needs_args: bool  # whether the specs must match the function's signature
    help: str


STAGES = {
    "source": Stage(_stage_source, "python", False, "the function's Python source"),
    "ssa": Stage(_stage_ssa, "python", True,
                 "the SSA form straight from specialisation (kiln.make_ir)"),
    **{p.stage: Stage(_pipeline_stage(p.stage), "python", True,
                      f"the SSA form after the LLVM backend's pipeline through {p.name}: "
                      f"{p.doc}") for p in passes.LLVM_PIPELINE},
    "grad": Stage(_stage_grad, "python", True,
                  "reverse mode: grad(f, argnums) (--argnums, default 0: what kiln compile "
                  "--grad exports), simplified (forward section, then backward section); f "
                  "must return one scalar"),
    "jvp": Stage(_stage_jvp, "python", True,
                 "forward mode: f's JVP with tangents of ones for every dynamic argument, "
                 "simplified"),
    "vmap": Stage(_stage_vmap, "python", True,
                  "batching: vmap of f over axis 0 of every dynamic argument (the specs are "
                  "the batched arguments; see --in-axes, --axis-name), simplified"),
    "llvm": Stage(_native_stage("llvm"), "llvm", True,
                  "the LLVM IR the LLVM backend generates for the fused SSA, optimised (O3 "
                  "for the host CPU)"),
    "llvm-unoptimized": Stage(_native_stage("llvm-unoptimized"), "llvm", True,
                              "the same LLVM IR before LLVM's optimisations"),
    "asm": Stage(_native_stage("asm"), "asm", True,
                 "the host CPU's assembly of the optimised LLVM IR"),
    "cuda": Stage(_cuda_stage("cuda"), "cuda", True,
                  "the CUDA C kernel the CUDA backend generates (elementwise functions so far: "
                  "docs/cuda.md)"),
    "ptx": Stage(_cuda_stage("ptx"), "ptx", True,
                 "that kernel compiled by NVRTC to PTX for sm_90 (no GPU needed)"),
    "stablehlo": Stage(_stablehlo_stage, "mlir", True,
                       "the StableHLO module (MLIR text) of the simplified SSA, as PJRT "
                       "plug-ins take it (docs/stablehlo.md)"),
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
    NameError: "\nOn the command line, --axis-name NAME names the mapped axis (with kiln show "
               "--stage vmap, or kiln compile --vmap).",
}


def render(stage, fn, call):
    """The text of `stage` for `fn` called with `call`; user errors become `UserError`."""
    if stage.needs_args:
        _check_signature(fn, call)
    with _user_errors(lambda: getattr(fn, "__name__", fn)):
        return stage.run(fn, call)


@contextlib.contextmanager
def _user_errors(what):
    """Errors in the user's code become `UserError`s printed as the decorator prints them;
    any other exception is a bug in kiln, shown with its traceback under "compiling
    {what()} failed"."""
    try:
        yield
    except (UserError, UsageError):
        raise
    except Exception as e:
        if _is_user_error(e):
            note = _CLI_HINTS.get(type(e), "")
            raise UserError(f"{type(e).__name__}: {e}{note}") from None
        raise UserError(f"compiling {what()} failed:\n"
                        + "".join(traceback.format_exception(e)).rstrip("\n")) from None


def _is_user_error(e):
    """Whether `e` is an error in the user's code: a located kiln error (CompileError, a shape
    error with its caret, ...), or a TypeError/ValueError that kiln raised on purpose, from a
    `raise` statement in its own code (an API check such as grad's scalar-output rule). Any
    other exception is a bug in kiln and is shown with its traceback."""
    if isinstance(e, KilnError) or getattr(e, "_kiln_located", False):
        return True
    if not isinstance(e, (TypeError, ValueError)):
        return False
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return False
    roots = (os.path.dirname(os.path.dirname(__file__)) + os.sep,   # the runtime
             os.path.dirname(passes.__file__) + os.sep)                # the compiler
    last = frames[-1]
    return last.filename.startswith(roots) and (last.line or "").lstrip().startswith("raise ")


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
        from ..compiler.highlight import highlight
        text = highlight(text, stage.language)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _check_output_directory(path):
    """Make sure `-o PATH` is a directory kiln can write, before any compiling: a UserError
    saying why not otherwise (a file in the way, a read-only or missing parent, ...)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"-o {path}: it exists and is not a directory; pass a new or existing "
                        f"directory for the library's files")
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".kiln-write-test-")
        probe.close()
    except OSError as e:
        raise UserError(f"-o {path}: cannot write there ({e.strerror or e}); pass a directory "
                        f"you can write to") from None


def _compile(ns):
    _llvm_module("target")  # llvmlite is installed
    _check_output_directory(ns.output)
    specs = [_parse_spec(text, "--arg spec") for text in ns.arg]
    call = Call(specs, [_parse_static(item) for item in ns.static])
    transforms = _transforms(ns)
    targets = []
    for text in ns.targets:
        fn = _unjit(load_target(text))
        _check_signature(fn, call)
        targets.append(Target(fn, tuple(call.args), call.kwargs, call.static_argnums,
                              transforms, source=text))
    current = [ns.targets[0]]
    show = len(targets) > 1 or sys.stderr.isatty()

    def progress(index, total, name, stage):
        current[0] = name
        if show:
            line = f"link {name}" if stage == "link" else f"[{index}/{total}] {name}: {stage}"
            print(line, file=sys.stderr, flush=True)
    with _user_errors(lambda: current[0]):
        try:
            if ns.target == "cuda":
                manifest = compile_cuda_library(targets, ns.output, name=ns.name,
                                                archs=ns.arch.split(","), progress=progress)
            elif ns.target == "stablehlo":
                manifest = compile_stablehlo_library(targets, ns.output, name=ns.name,
                                                     progress=progress)
            else:
                manifest = compile_library(targets, ns.output, name=ns.name, cpu=ns.cpu,
                                           progress=progress, processes=ns.processes)
        except AOTUsageError as e:
            raise UsageError(str(e)) from None
        except AOTError as e:
            raise UserError(str(e)) from None
        except OSError as e:   # the disk filled, the directory vanished, ...
            raise UserError(f"-o {ns.output}: writing the library failed "
                            f"({e.strerror or e}: {e.filename or ns.output})") from None
    symbols = ", ".join(f["symbol"] for f in manifest["functions"])
    where = ns.output.rstrip(os.sep) or ns.output
    if ns.target == "stablehlo":
        modules = ", ".join(f["files"]["mlir"] for f in manifest["functions"])
        print(f"wrote StableHLO modules {modules} ({symbols}) and "
              f"{os.path.join(where, 'manifest.json')}")
        return 0
    if ns.target == "cuda":
        kernels = sum(len(f["kernels"]) for f in manifest["functions"])
        print(f"wrote {kernels} CUDA kernels for {', '.join(manifest['target']['archs'])} "
              f"({symbols}) and {os.path.join(where, 'manifest.json')}")
        return 0
    print(f"wrote {os.path.join(where, manifest['library'])} ({symbols}), "
          f"{os.path.join(where, manifest['header'])} and "
          f"{os.path.join(where, 'manifest.json')}")
    return 0


def _transforms(ns):
    """The (kind, option) transforms of --grad, --value-and-grad and --vmap, in the order
    they apply."""
    transforms = []
    if ns.argnums is not None and not (ns.value_and_grad or ns.grad is not None):
        raise UsageError("--argnums says what --grad or --value-and-grad differentiate: give "
                         "one of them too")
    if ns.value_and_grad or ns.grad is not None:
        kind = "value_and_grad" if ns.value_and_grad else "grad"
        transforms.append((kind, _argnums(ns)))
    if ns.axis_name is not None and ns.vmap is None:
        raise UsageError("--axis-name names the mapped axis of --vmap: give --vmap IN_AXES too")
    if ns.vmap is not None:
        transforms.append(("vmap", _parse_in_axes(ns.vmap, "--vmap"), ns.axis_name))
    return tuple(transforms)


def _doctor(ns):
    from .doctor import report
    sys.stdout.write(report())
    return 0


@contextlib.contextmanager
def _cache_dir(directory):
    """`--cache-dir`: KILN_CACHE_DIR for the duration of the command."""
    if directory is None:
        yield
        return
    before = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = directory
    try:
        yield
    finally:
        if before is None:
            del os.environ["KILN_CACHE_DIR"]
        else:
            os.environ["KILN_CACHE_DIR"] = before


def _cache(ns):
    from .doctor import format_bytes
    disk_cache = _llvm_module("disk_cache")
    with _cache_dir(ns.cache_dir):
        info = disk_cache.info()
        if not info["enabled"]:
            print(f"the disk cache is disabled (KILN_CACHE_DIR="
                  f"{os.environ.get('KILN_CACHE_DIR')!r})")
            return 0
        size = format_bytes(info["bytes"])
        if ns.action == "info":
            print(f"path     {info['path']}\nentries  {info['entries']}\nsize     {size}")
        else:
            removed = disk_cache.clear()
            print(f"removed {removed} entries ({size}) from {info['path']}")
    return 0


def _stage_lines():
    width = max(map(len, STAGES)) + 2
    rows = [(name, stage.help) for name, stage in STAGES.items()]
    return "\n".join(textwrap.fill(text, 94, initial_indent=f"  {name:<{width}}",
                                   subsequent_indent=" " * (width + 2)) for name, text in rows)


_SHOW_DESCRIPTION = """\
Print FUNC at one stage of kiln's compiler, specialised for the arguments that the --arg specs
describe. TARGET is path/to/file.py:FUNC (the file is imported as a module, with its directory
on sys.path) or package.module:FUNC; FUNC may be a dotted path such as Class.method.

stages:
""" + _stage_lines()


def _command(commands, name, run, help, description, **options):
    """The sub-parser of the command `name`, which `run(namespace)` carries out."""
    parser = commands.add_parser(name, help=help, description=description, **options)
    parser.set_defaults(run=run, parser=parser)
    return parser


def _add_show(commands):
    show = _command(commands, "show", _show, "print a function at one stage of the compiler",
                    _SHOW_DESCRIPTION, epilog=argspec.GRAMMAR,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("target", metavar="TARGET", help="FILE.py:FUNC or package.module:FUNC")
    _add_call_options(show, "")
    show.add_argument("--stage", choices=list(STAGES), default="simplified",
                      metavar="STAGE", help="the stage to print (default: simplified; the "
                                            "stages are listed above)")
    show.add_argument("--in-axes", metavar="AXES",
                      help="vmap stage: the mapped axis of every dynamic argument (0, the "
                           "default) or of each in turn (0,None,1)")
    show.add_argument("--axis-name", metavar="NAME",
                      help="vmap stage: the name of the mapped axis, for collectives such as "
                           "lax.psum(x, NAME)")
    show.add_argument("--argnums", metavar="ARGNUMS",
                      help="grad stage: the dynamic arguments to differentiate, as kiln.grad's "
                           "argnums (0, the default, or 0,2)")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="highlight the output (auto: when stdout is a terminal and NO_COLOR "
                           "is unset; uses Pygments when it is installed)")


def _add_call_options(parser, whose):
    """--arg and --static: the example arguments (Call)."""
    parser.add_argument("--arg", action="append", default=[], metavar="SPEC",
                        help=f"an argument spec for the next positional parameter{whose} "
                             f"(repeatable)")
    parser.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                        help="a static keyword argument; VALUE is a Python literal "
                             "(repeatable)")


_COMPILE_DESCRIPTION = """\
Compile functions ahead of time into a shared library with a C ABI, lib<NAME>.so, with its
header <NAME>.h and manifest.json, in DIR (created if missing); kiln.aot.load(DIR) calls it
from Python without the compiler, and C programs link it. TARGET is path/to/file.py:FUNC or
package.module:FUNC, as for kiln show. Several targets go into one library: the --arg and
--static specs and the transform options apply to every target, so they must share one
signature (compile functions with other signatures into other libraries, one kiln compile
each). Each function is exported as <NAME>_<fn>, where <fn> is its name, prefixed for a
transform: grad_<f>, value_and_grad_<f>, vmap_<f> (vmap_grad_<f> for --grad with --vmap).

DIR also receives every stage of every function: <fn>.ssa.py (specialised, after the
transform), <fn>.simplified.ssa.py, <fn>.fused.ssa.py, <fn>.ll (optimised LLVM IR), <fn>.s,
<fn>.o, and kiln_runtime.o and <NAME>_glue.c (the generated C functions); the library is
linked by $CC (default cc). A progress line per function and stage goes to stderr when
several functions are compiled or stderr is a terminal.

exit codes: 0 success; 1 an error in the function (printed with its file, line and caret),
an argument or result a C library cannot carry, no C compiler or a failed link; 2 a usage
error (a bad spec or option, two functions with one exported name).
"""


def _add_compile(commands):
    compile_ = _command(commands, "compile", _compile,
                        "compile functions into a shared library with a C header",
                        _COMPILE_DESCRIPTION, epilog=argspec.GRAMMAR,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    compile_.add_argument("targets", nargs="+", metavar="TARGET",
                          help="FILE.py:FUNC or package.module:FUNC (several: one library)")
    _add_call_options(compile_, " of every target")
    compile_.add_argument("--argnums", metavar="ARGNUMS",
                          help="with --grad or --value-and-grad: the arguments to "
                               "differentiate, as kiln.grad's argnums (default 0; 0,1 for several)")
    compile_.add_argument("--grad", nargs="?", const="0", metavar="ARGNUMS",
                          help="export grad(f, argnums=ARGNUMS) instead of f (default 0; "
                               "0,1 for several: a tuple of gradients), named grad_<f>")
    compile_.add_argument("--value-and-grad", action="store_true",
                          help="export value_and_grad(f) (with --grad's ARGNUMS if given), "
                               "named value_and_grad_<f>")
    compile_.add_argument("--vmap", metavar="IN_AXES",
                          help="export vmap(f, in_axes=IN_AXES): 0 maps axis 0 of every "
                               "dynamic argument, 0,None one axis per argument; the specs are "
                               "the batched arguments; named vmap_<f> (applied after --grad)")
    compile_.add_argument("--axis-name", metavar="NAME",
                          help="with --vmap: the mapped axis's name, for the collectives the "
                               "function calls (lax.psum(x, NAME))")
    compile_.add_argument("--name", metavar="NAME",
                          help="the library's name, a C identifier prefixing every symbol "
                               "(default: the first target's module: model for "
                               "model.py:f or pkg.model:f)")
    compile_.add_argument("--cpu", choices=("native", "generic"), default="native",
                          help="native: this CPU with every feature it has (default); "
                               "generic: x86-64-v2, for libraries run on other machines")
    compile_.add_argument("--processes", type=int, metavar="N",
                          help="with --target cpu: stage for a run of N MPI processes, so "
                               "that a pmap's collectives span them (the library then has "
                               "<NAME>_mpi_setup and is linked by mpicc; docs/aot.md)")
    compile_.add_argument("--target", choices=("cpu", "cuda", "stablehlo"), default="cpu",
                          help="cpu: a shared library with a C ABI (default); cuda: every "
                               "kernel's .cu, .ptx and .cubin and a manifest of steps that "
                               "kiln.aot.load runs on a GPU; stablehlo: each function's "
                               "StableHLO module (<fn>.mlir, for PJRT plug-ins) and a manifest")
    compile_.add_argument("--arch", default="sm_90", metavar="ARCHS",
                          help="with --target cuda: the comma-separated real architectures "
                               "to compile PTX and cubins for (default sm_90; e.g. "
                               "sm_80,sm_90)")
    compile_.add_argument("-o", "--output", required=True, metavar="DIR",
                          help="the output directory")


def _add_doctor(commands):
    _command(commands, "doctor", _doctor,
             "print the versions, CPU, BLAS, cache and backends kiln finds here",
             "Print kiln's, Python's, NumPy's, SciPy's, llvmlite's and LLVM's versions, the "
             "host CPU and the features LLVM targets, the BLAS compiled code calls, the thread "
             "counts, the disk cache, and which optional backends (CuPy and GPUs, NVRTC, nvcc, "
             "PJRT plug-ins, MPI) are usable here, with the reason when one is not.")


def _add_cache(commands):
    cache = _command(commands, "cache", _cache, "show or clear the on-disk compile cache",
                     "kiln keeps the LLVM backend's object code on disk, so that a new process "
                     "skips LLVM for a function compiled before. `info` shows where the cache "
                     "is, how many entries it holds and their size; `clear` deletes them.")
    cache.add_argument("action", choices=("info", "clear"), help="what to do")
    cache.add_argument("--cache-dir", metavar="DIR",
                       help="the cache directory (default: $KILN_CACHE_DIR, else "
                            "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln); the LLVM backend's "
                            "entries are in its llvm/ sub-directory, the path `info` prints")


def build_parser(version):
    parser = argparse.ArgumentParser(
        prog="kiln", description="kiln: JAX's API as a source-to-source compiler.")
    parser.add_argument("--version", action="version", version=f"kiln {version}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_show, _add_compile, _add_doctor, _add_cache):
        add(commands)
    return parser


def main(argv=None):
    """Run the `kiln` command with `argv` (default: sys.argv[1:]); returns the exit code."""
    parser = build_parser(__version__)
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
