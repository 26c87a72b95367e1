"""`kiln.aot`: call the libraries that `kiln compile` builds, without the compiler.

`kiln compile ... -o DIR` writes a shared library `lib<NAME>.so` with one C entry point per
compiled function, its header, and `manifest.json` (docs/aot.md). `load(DIR)` checks the
directory and returns a `Library`: one callable per function, by attribute (`lib.forward`) or
by key (`lib["forward"]`). Importing and using this module needs NumPy and the library only:
neither the frontend (`gast`, `astor`) nor LLVM (`llvmlite`) is imported.

Before the library is opened (so none of its code runs, not even its constructor), `load`
refuses with `AOTLoadError`:
- a missing or malformed manifest, another manifest format or version;
- a library compiled by another kiln major.minor version;
- a file whose SHA-256 differs from the manifest's (tampered, or copied incompletely);
- another architecture or operating system, or a CPU lacking a feature the code requires
  (read from /proc/cpuinfo; where that file is absent, `--cpu native` builds are refused
  because nothing can vouch for the CPU, while `--cpu generic` builds load).
Once open, the library's BLAS routines are bound to the BLAS this process uses (NumPy's
OpenBLAS, as the JIT does) and `debug_print` to Python's printing.

A `kiln compile --target cuda` directory runs on the CUDA device layer (aot_cuda.py); a
`--target stablehlo` one through the default PJRT plug-in (`PjrtFunction`: each `.mlir` module
compiled for the plug-in's first device when the directory is loaded, its results left there).

A call checks every argument against the manifest (pytree structure, then each leaf's exact
shape and dtype; Python scalars convert to the expected dtype), passes contiguous buffers and
freshly allocated outputs to the entry point through ctypes (which releases the GIL, so calls
from several threads run in parallel), raises `RuntimeError` with the library's message when
the entry returns an error code, and returns the outputs as kiln Arrays in the output pytree,
as `kiln.jit` would.
"""
import ctypes
import json
import os
import platform
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .array import Array
from .compiler.aot.manifest import (BLAS_UNBOUND, FORMAT, MANIFEST_VERSION, file_sha256,
                                    tree_from_json)
from .staging import wrap_outputs

__all__ = ["load", "Library", "Function", "AOTLoadError", "MANIFEST_VERSION"]
MANIFEST = "manifest.json"
_CPUINFO = "/proc/cpuinfo"
_RECOMPILE = "recompile it with `kiln compile` on this machine"


class AOTLoadError(RuntimeError):
    """A compiled library that `load` refuses to open (the message says why and what to do)."""


# ----------------------------------------------------------------------------- load-time checks

def _kiln_version():
    from . import __version__
    return __version__


def _read_manifest(directory):
    path = directory / MANIFEST
    if not directory.is_dir():
        raise AOTLoadError(f"{directory} is not a directory: pass the directory that "
                           f"`kiln compile -o DIR` wrote")
    if not path.is_file():
        raise AOTLoadError(f"{directory} has no {MANIFEST}: it is not the output directory of "
                           f"`kiln compile`, or the manifest was not copied with the library")
    try:
        manifest = json.loads(path.read_text())
    except RecursionError:
        raise AOTLoadError(f"{path} nests deeper than any kiln manifest; {_RECOMPILE}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise AOTLoadError(f"{path} is not valid JSON ({e}); {_RECOMPILE}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise AOTLoadError(f"{path} is not a kiln AOT manifest (its \"format\" is not "
                           f"{FORMAT!r}); {_RECOMPILE}")
    problem = _shape_problem(manifest)
    if problem:
        raise AOTLoadError(f"{path} is malformed ({problem}); {_RECOMPILE}")
    return manifest


# The manifest's fields that are read before the functions' specs (Function checks those), with
# the JSON types they must have (`files` and `target` have their own messages when missing).
_FIELDS = {"name": str, "library": str, "kiln_version": str, "functions": list, "target": dict}
_TARGET_FIELDS = {"triple": str, "machine": (str, type(None)), "cpu": (str, type(None)),
                  "mode": (str, type(None)), "features": (list, type(None))}
_MAX_DEPTH = 64


def _shape_problem(manifest):
    """What is wrong with the shape of a parsed manifest (types, text), or ""."""
    bad_text = _bad_text(manifest, 0)
    if bad_text:
        return bad_text
    for field, kind in _FIELDS.items():
        if field == "library" and _kind(manifest) in _NO_LIBRARY:
            continue   # (kernels and steps, or StableHLO modules: no shared library)
        if not isinstance(manifest.get(field), kind):
            return f"{field!r} is not a JSON {_JSON_NAMES[kind]}"
    if not manifest["name"].isidentifier():
        return f"the library name {manifest['name']!r} is not a C identifier"
    if isinstance(manifest.get("files"), dict) and \
            not all(isinstance(v, str) for v in manifest["files"].values()):
        return "'files' maps names to something other than hashes"
    target = manifest["target"]
    for field, kinds in _TARGET_FIELDS.items():
        if field in target and not isinstance(target[field], kinds):
            return f"target {field!r} has the wrong type"
    if not all(isinstance(f, str) for f in target.get("features") or ()):
        return "target 'features' is not a list of names"
    blas = manifest.get("blas")
    if blas is not None and not (isinstance(blas, dict) and type(blas.get("int_bits", 0)) is int
                                 and blas.get("int_bits", 0) in (0, 32, 64)):
        return "'blas' does not give an integer width of 32 or 64 bits"
    for spec in manifest["functions"]:
        if not isinstance(spec, dict):
            return "'functions' holds something other than function specs"
        if not (isinstance(spec.get("symbol"), str) and spec["symbol"].isidentifier()):
            return f"a function's symbol {spec.get('symbol')!r} is not a C identifier"
        uses = spec.get("uses")
        if uses is not None and not (isinstance(uses, list)
                                     and all(isinstance(u, str) for u in uses)):
            return f"function {spec['symbol']!r} lists its uses as {uses!r}"
    return ""


_JSON_NAMES = {str: "string", dict: "object", list: "array"}


def _bad_text(value, depth):
    """A description of the first string in `value` that is not valid Unicode text (a lone
    surrogate, which cannot name a C symbol or a file), or of nesting deeper than _MAX_DEPTH."""
    if depth > _MAX_DEPTH:
        return f"nested deeper than {_MAX_DEPTH} levels"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"the text {value!r} is not valid Unicode"
        return ""
    items = (value.items() if isinstance(value, dict) else
             enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        problem = _bad_text(key, depth + 1) or _bad_text(item, depth + 1)
        if problem:
            return problem
    return ""


def _major_minor(version):
    return tuple(str(version).split(".")[:2])


def _check_versions(manifest, path):
    found = manifest.get("manifest_version")
    if found != MANIFEST_VERSION:
        raise AOTLoadError(f"{path} has manifest version {found!r}, but this kiln "
                           f"({_kiln_version()}) reads version {MANIFEST_VERSION}: {_RECOMPILE}")
    built, running = manifest.get("kiln_version"), _kiln_version()
    if _major_minor(built) != _major_minor(running):
        raise AOTLoadError(f"{path.parent} was compiled by kiln {built}, this is kiln {running}: "
                           f"{_RECOMPILE} (the library ABI may change between minor versions)")


def _member(directory, name):
    """`directory/name` for a file name from the manifest, which must stay inside `directory`."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise AOTLoadError(f"{directory / MANIFEST} names the file {name!r}, which is not a plain "
                           f"file name in that directory; {_RECOMPILE}")
    return directory / name


def _kind(manifest):
    """The target kind of a manifest: "cuda", "stablehlo", or None (a CPU library)."""
    return manifest["target"].get("kind") if isinstance(manifest.get("target"), dict) else None


_NO_LIBRARY = ("cuda", "stablehlo")   # the kinds of directory without a shared library


def _check_files(directory, manifest):
    files = manifest.get("files")
    if not isinstance(files, dict) or (manifest.get("library") not in files
                                       and _kind(manifest) not in _NO_LIBRARY):
        raise AOTLoadError(f"{directory / MANIFEST} lists no content hash for the library; "
                           f"{_RECOMPILE}")
    for name, expected in files.items():
        path = _member(directory, name)
        if not path.is_file():
            raise AOTLoadError(f"{directory} lacks {name}, which the manifest lists: copy the "
                               f"whole directory that `kiln compile` wrote, or {_RECOMPILE}")
        if file_sha256(path) != expected:
            raise AOTLoadError(f"{path} does not match the SHA-256 recorded in the manifest: the "
                               f"file was modified after `kiln compile` wrote it (tampered or "
                               f"corrupted); refusing to load it: {_RECOMPILE}")


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "i686": "i386",
                 "i586": "i386", "x86": "i386"}
_SYSTEMS = (("linux", "linux"), ("darwin", "darwin"), ("apple", "darwin"),
            ("macos", "darwin"), ("windows", "win32"), ("win32", "win32"), ("freebsd", "freebsd"))


def _arch(name):
    name = name.lower()
    return _ARCH_ALIASES.get(name, name)


def _system(triple):
    """The `sys.platform` prefix of a target triple's operating system, or None if unknown."""
    lowered = triple.lower()
    return next((system for word, system in _SYSTEMS if word in lowered), None)


def host_features():
    """The CPU feature flags of this machine in /proc/cpuinfo's spelling (`avx2`, `sse4_2`), or
    None where /proc/cpuinfo is absent or lists no flags."""
    try:
        text = Path(_CPUINFO).read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def _check_target(manifest, directory):
    target = manifest.get("target")
    if not isinstance(target, dict) or not isinstance(target.get("triple"), str):
        raise AOTLoadError(f"{directory / MANIFEST} does not say which target the library was "
                           f"compiled for; {_RECOMPILE}")
    triple = target["triple"]
    machine, built_arch = platform.machine(), target.get("machine") or triple.split("-")[0]
    system = _system(triple)
    if _arch(built_arch) != _arch(machine) or (system and not sys.platform.startswith(system)):
        raise AOTLoadError(f"{directory} was compiled for {triple}; this machine is {machine} "
                           f"{sys.platform}: {_RECOMPILE}")
    required = list(target.get("features") or [])
    flags = host_features()
    cpu = target.get("cpu", "?")
    if flags is None:
        if target.get("mode") != "generic":
            raise AOTLoadError(f"{directory} was compiled for the CPU {cpu} with --cpu native, and "
                               f"this machine's CPU features cannot be read ({_CPUINFO} is "
                               f"absent): compile it with --cpu generic to ship it, or "
                               f"{_RECOMPILE}")
        return
    missing = [f for f in required if f not in flags]
    if missing:
        raise AOTLoadError(f"{directory} was compiled for the CPU {cpu}, and this CPU lacks the "
                           f"features it requires: {', '.join(missing)}. Compile it with --cpu "
                           f"generic to run it on other machines, or {_RECOMPILE}")


# ------------------------------------------------------------------------------ pytree specs

def _short(dtype):
    """A dtype as the argument-spec grammar spells it: f32, i64, bool, c64."""
    dtype = np.dtype(dtype)
    return "bool" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize * 8}"


class _Leaf:
    """One flattened input or output: where it sits (`path`), its dtype and shape."""
    __slots__ = ("path", "dtype", "shape", "weak")

    def __init__(self, entry):
        self.path = str(entry["path"])
        self.dtype = np.dtype(entry["dtype"])
        self.shape = tuple(int(d) for d in entry["shape"])
        self.weak = bool(entry.get("weak_type", False))

    def __str__(self):
        return f"{_short(self.dtype)}[{','.join(map(str, self.shape))}]"


def _child_path(node, path, k):
    if node.kind == "dict":
        return f"{path}[{node.keys[k]!r}]"
    if node.kind == "namedtuple":
        return f"{path}.{node.keys[k]}"
    return f"{path}[{k}]"


def _describe(node):
    if node.kind == "dict":
        return f"a dict with keys {list(node.keys)}"
    if node.kind == "namedtuple":
        return f"a {node.cls.__name__} (a tuple of {len(node.children)}: {', '.join(node.keys)})"
    if node.kind == "none":
        return "None"
    return f"a {node.kind} of {len(node.children)}"


def _children(node, value):
    """The children of `value` as `node` lays them out, or None if `value` does not fit it.
    Tuples and lists stand in for each other (the leaves come out in the same order)."""
    kind = node.kind
    if kind == "none":
        return () if value is None else None
    if kind == "dict":
        keys = node.keys
        if isinstance(value, dict) and len(value) == len(keys) and all(k in value for k in keys):
            return [value[k] for k in keys]
        return None
    if isinstance(value, (tuple, list)) and len(value) == len(node.children):
        return value
    return None


def _flatten(node, value, path, out, function):
    """Append the leaves of `value` (shaped like `node`) to `out`; TypeError naming the path."""
    if node.kind == "leaf":
        out.append(value)
        return
    children = _children(node, value)
    if children is None:
        raise TypeError(f"{function}: argument {path}: expected {_describe(node)}, got "
                        f"{_value_repr(value)}")
    for k, (child, item) in enumerate(zip(node.children, children)):
        _flatten(child, item, _child_path(node, path, k), out, function)


def _unflatten(node, leaves):
    """The pytree `node` describes, its leaves taken in order from the iterator `leaves`."""
    kind = node.kind
    if kind == "leaf":
        return next(leaves)
    if kind == "none":
        return None
    items = [_unflatten(child, leaves) for child in node.children]
    if kind == "dict":
        return dict(zip(node.keys, items))
    if kind == "namedtuple":
        return node.cls(*items)
    return tuple(items) if kind == "tuple" else items


def _render(node, leaves):
    """A signature's text for `node` with its leaves taken from the iterator `leaves`."""
    kind = node.kind
    if kind == "leaf":
        return str(next(leaves))
    if kind == "none":
        return "None"
    items = [_render(child, leaves) for child in node.children]
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(node.keys, items)) + "}"
    if kind == "namedtuple":
        fields = ", ".join(f"{k}={v}" for k, v in zip(node.keys, items))
        return f"{node.cls.__name__}({fields})"
    if kind == "list":
        return "[" + ", ".join(items) + "]"
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _value_repr(value):
    if isinstance(value, (np.ndarray, np.generic, Array)):
        return f"{_short(value.dtype)}[{','.join(map(str, np.shape(value)))}]"
    if isinstance(value, dict):
        return f"a dict with keys {list(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ------------------------------------------------------------------------------ argument leaves

# Python scalar type -> the dtype kinds it may become (a float never silently becomes an int).
_SCALAR_KINDS = {bool: "b", int: "iufc", float: "fc", complex: "c"}


def _scalar(value, leaf):
    kinds = _SCALAR_KINDS.get(type(value))
    if kinds is None or leaf.dtype.kind not in kinds or leaf.shape:
        return None
    if leaf.dtype.kind in "iu":
        info = np.iinfo(leaf.dtype)
        if not info.min <= value <= info.max:
            return None
    return np.asarray(value, leaf.dtype)


def _argument(value, leaf, function):
    """`value` as the contiguous, aligned ndarray that `leaf` expects; TypeError otherwise."""
    if type(value) is Array:
        value = value._value
    elif isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype == leaf.dtype and value.shape == leaf.shape:
            return value if value.flags.carray else np.require(value, requirements="CA")
    else:
        converted = _scalar(value, leaf)
        if converted is not None:
            return converted
    raise TypeError(f"{function}: argument {leaf.path}: expected {leaf}, got "
                    f"{_value_repr(value)}")


# ------------------------------------------------------------------------------ the library

class Function:
    """One compiled function of a loaded library: call it like the Python function it was
    compiled from (dynamic arguments only; static ones are baked in)."""

    def __init__(self, spec):
        self.name = str(spec["name"])
        self.symbol = spec["symbol"]
        self.source = spec.get("source")
        self.transform = spec.get("transform")
        self.inputs = [_Leaf(e) for e in spec["inputs"]]
        self.outputs = [_Leaf(e) for e in spec["outputs"]]
        self._in_tree, self._out_tree = tree_from_json(spec["in_tree"]), tree_from_json(spec["out_tree"])
        if self._in_tree.kind != "tuple":
            raise ValueError("in_tree must be the tuple of the dynamic arguments")
        if (self._in_tree.leaves, self._out_tree.leaves) != (len(self.inputs), len(self.outputs)):
            raise ValueError(f"the trees of {self.name} do not match its input and output lists")
        self.arg_names = self._names()
        self._flat_args = all(c.kind == "leaf" for c in self._in_tree.children)
        self._weak = [o.weak for o in self.outputs]
        self._library = self._entry = None

    def _attach(self, library):
        """Bind to the entry point in the opened `library` (AttributeError if it lacks it)."""
        entry = getattr(library._dll, self.symbol)
        entry.restype = ctypes.c_int
        entry.argtypes = [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs))
        self._library, self._entry = library, entry

    def _names(self):
        """The dynamic arguments' names: the leading name of each argument's first leaf path
        (`params` of `params[0]['W']`), else argN (an argument without leaves)."""
        names, start = [], 0
        for k, child in enumerate(self._in_tree.children):
            path = self.inputs[start].path if child.leaves else ""
            head = path.split("[")[0].split(".")[0]
            names.append(head if head.isidentifier() else f"arg{k}")
            start += child.leaves
        return names

    @property
    def signature(self):
        leaves = iter(self.inputs)
        params = [f"{n}: {_render(c, leaves)}"
                  for n, c in zip(self.arg_names, self._in_tree.children)]
        result = _render(self._out_tree, iter(self.outputs))
        return f"{self.name}({', '.join(params)}) -> {result}"

    def __repr__(self):
        return f"<kiln.aot function {self.signature}>"

    def _bind(self, args, kwargs):
        """The arguments in order, from positional and keyword ones; TypeError as Python's."""
        names = self.arg_names
        if len(args) > len(names):
            raise TypeError(f"{self.name}() takes {len(names)} argument{'s' * (len(names) != 1)} "
                            f"({', '.join(names)}), got {len(args)}")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}; "
                                f"its arguments are {', '.join(names) or 'none'}")
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            bound[key] = value
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.name}() missing {len(missing)} argument"
                            f"{'s' * (len(missing) != 1)}: {', '.join(missing)} (it takes "
                            f"{', '.join(names)})")
        return [bound[n] for n in names]

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self.arg_names):
            args = self._bind(args, kwargs)
        if self._flat_args:
            values = args
        else:
            values = []
            for name, child, value in zip(self.arg_names, self._in_tree.children, args):
                _flatten(child, value, name, values, self.name)
        inputs = [self._argument(v, leaf) for v, leaf in zip(values, self.inputs)]
        return _unflatten(self._out_tree, iter(wrap_outputs(self._run(inputs), self._weak)))

    def _argument(self, value, leaf):
        return _argument(value, leaf, self.name)

    def _run(self, inputs):
        """The outputs of the entry point for the checked, contiguous `inputs`."""
        outputs = [np.empty(o.shape, o.dtype) for o in self.outputs]
        code = self._entry(*[a.ctypes.data for a in inputs], *[o.ctypes.data for o in outputs])
        if code:
            raise RuntimeError(f"{self.name} (in {self._library.path}) failed with error {code}: "
                               f"{self._library.strerror(code)}")
        return outputs


class CudaFunction(Function):
    """A function of a `--target cuda` directory: its steps on the CUDA device layer
    (aot_cuda.py); results are arrays on the GPU."""

    def __init__(self, spec, directory, layer):
        super().__init__(spec)
        from . import aot_cuda
        self._steps = aot_cuda.Steps(directory, spec, layer)

    def _run(self, inputs):
        from . import aot_cuda
        return aot_cuda.run_function(self._steps, inputs)


class PjrtFunction(Function):
    """A function of a `--target stablehlo` directory: its `.mlir` module compiled by the
    default PJRT plug-in for its first device (kiln.pjrt), its constants put on that device
    once; arguments already on the device are passed as they are, results stay there."""

    def __init__(self, spec, directory, device):
        super().__init__(spec)
        from . import pjrt
        text = _member(directory, spec["files"]["mlir"]).read_text()
        with np.load(_member(directory, spec["files"]["constants"])) as saved:
            constants = [saved[f"arr_{k}"] for k in range(len(saved.files))]
        avals = lambda entries: [_Aval(tuple(e["shape"]), np.dtype(e["dtype"]))  # noqa: E731
                                 for e in entries]
        self._executable = pjrt.executable(text, avals(spec["main_inputs"]),
                                           avals(spec["main_outputs"]), device)
        self._constants = [pjrt.DeviceBuffer(device.layer.to_device(c), device.layer)
                           for c in constants]

    def _argument(self, value, leaf):
        from .pjrt import DeviceBuffer
        held = value._value if type(value) is Array else None
        if type(held) is DeviceBuffer and (held.shape, held.dtype) == (leaf.shape, leaf.dtype):
            return held
        return _argument(value, leaf, self.name)

    def _run(self, inputs):
        return self._executable.buffers(*inputs, *self._constants)


class _Aval(NamedTuple):
    shape: tuple
    dtype: np.dtype


class Library:
    """A loaded library: `lib.NAME` / `lib["NAME"]` is its function NAME (`Function`);
    iterate for the names; `manifest` is the parsed manifest.json."""

    def __init__(self, directory, manifest, functions, dll):
        self.path = directory
        self.manifest = manifest
        self.name = manifest["name"]
        self._dll = dll
        self._functions = {f.name: f for f in functions}
        if dll is None:   # (a --target cuda directory: no shared library)
            return
        self._strerror = getattr(dll, f"{self.name}_strerror")
        self._strerror.restype = ctypes.c_char_p
        self._strerror.argtypes = [ctypes.c_int]
        for function in functions:
            function._attach(self)

    def strerror(self, code):
        text = self._strerror(code)
        return text.decode(errors="replace") if text else f"unknown error code {code}"

    def __getattr__(self, name):
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"library {self.__dict__.get('name')!r} has no function {name!r}; it "
                             f"has {', '.join(functions) or 'none'}")

    def __getitem__(self, name):
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"library {self.name!r} has no function {name!r}; it has "
                           f"{', '.join(self._functions) or 'none'}") from None

    def __contains__(self, name):
        return name in self._functions

    def __iter__(self):
        return iter(self._functions)

    def __len__(self):
        return len(self._functions)

    def keys(self):
        return self._functions.keys()

    def __dir__(self):
        return [*super().__dir__(), *self._functions]

    def __repr__(self):
        lines = [f"<kiln.aot library {self.name!r} from {self.path}:"]
        lines += [f"  {f.signature}" for f in self._functions.values()]
        return "\n".join(lines) + ">"


# ------------------------------------------------------------------------------ binding externs

def _bind_externs(dll, manifest, strerror):
    """Point the library's BLAS routines at this process's BLAS (the one the JIT calls, with the
    integer width the code was compiled for), `debug_print` at Python's printing, and its
    collectives across processes at kiln.distributed's communicator (`strerror(code)`: the
    library's messages)."""
    bind = getattr(dll, f"{manifest['name']}_bind_extern")
    bind.restype = None
    bind.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    uses = {use for spec in manifest["functions"] for use in spec.get("uses") or ()}
    if "blas" in uses:
        from .compiler.backends.llvm import blas_lookup
        library = blas_lookup.with_int_bits(int((manifest.get("blas") or {}).get("int_bits", 0)))
        for routine in blas_lookup.ROUTINES if library else ():
            address = library.lookup(routine)
            if address:
                bind(f"kiln_{routine}".encode(), address)
    if "debug_print" in uses:
        from .compiler.backends.llvm import host_callbacks
        bind(b"kiln_debug_print", host_callbacks.callback_address())
    if "mpi" in uses:
        _set_up_mpi(dll, manifest, strerror)


def _set_up_mpi(dll, manifest, strerror):
    """Give a library whose functions call collectives across processes kiln.distributed's
    communicator (its `<NAME>_mpi_setup`); AOTLoadError outside a run of as many processes as
    it was compiled for."""
    from . import distributed
    from .compiler.backends import mpi_engine
    processes, comm = manifest.get("processes"), distributed.communicator()
    if comm is None or distributed.process_layout()[1] != processes:
        raise AOTLoadError(
            f"{manifest['name']}'s functions call collectives across {processes} processes: "
            f"load it in each process of an `mpirun -np {processes}` run, after "
            f"kiln.distributed.initialize() (this process is one of "
            f"{distributed.process_layout()[1]})")
    from mpi4py import MPI
    handle = ctypes.c_uint64 if mpi_engine.handle_size() == 8 else ctypes.c_uint32
    setup = getattr(dll, f"{manifest['name']}_mpi_setup")
    setup.restype, setup.argtypes = ctypes.c_int, [handle, ctypes.c_double]
    code = setup(MPI._handleof(comm), distributed.timeout())
    if code:
        raise AOTLoadError(f"{manifest['name']}_mpi_setup failed (error {code}: "
                           f"{strerror(code)})")


def _functions(directory, manifest):
    """The manifest's functions, checked (AOTLoadError if malformed), before anything is opened."""
    try:
        if not isinstance(manifest.get("name"), str):
            raise ValueError("no library name")
        return [Function(spec) for spec in manifest["functions"]]
    except (KeyError, TypeError, ValueError) as e:
        raise AOTLoadError(f"{directory / MANIFEST} is malformed ({type(e).__name__}: {e}); "
                           f"{_RECOMPILE}") from None


def _open(directory, manifest, functions):
    path = _member(directory, manifest["library"])
    try:
        dll = ctypes.CDLL(str(path.resolve()))
    except OSError as e:
        raise AOTLoadError(f"could not open {path}: {e}") from None
    try:
        init = getattr(dll, f"{manifest['name']}_init")
        library = Library(directory, manifest, functions, dll)
    except AttributeError as e:
        raise AOTLoadError(f"{path} does not export what its manifest describes ({e}); "
                           f"{_RECOMPILE}") from None
    init.restype = ctypes.c_int
    code = init()   # (already run by the library's constructor: this reads its status)
    _bind_externs(dll, manifest, library.strerror)
    if code not in (0, BLAS_UNBOUND):   # (functions calling unbound BLAS report it themselves)
        raise AOTLoadError(f"{path} failed to initialise (error {code}: {library.strerror(code)})")
    return library


def _without_library(directory, manifest, make):
    """A Library of a directory without a shared library: `make(spec)` per function (an
    AOTLoadError for a malformed spec)."""
    try:
        functions = [make(spec) for spec in manifest["functions"]]
    except (KeyError, TypeError, ValueError) as e:
        raise AOTLoadError(f"{directory / MANIFEST} is malformed ({type(e).__name__}: {e}); "
                           f"{_RECOMPILE}") from None
    return Library(directory, manifest, functions, None)


def _open_cuda(directory, manifest):
    """A `--target cuda` directory's Library: its functions on the CUDA device layer (a
    DeviceUnavailableError saying why when there is none)."""
    from .compiler.backends.cuda import device
    layer = device.current()
    return _without_library(directory, manifest, lambda s: CudaFunction(s, directory, layer))


def _open_stablehlo(directory, manifest):
    """A `--target stablehlo` directory's Library: its functions compiled by the default PJRT
    plug-in (a RuntimeError saying why when there is none)."""
    from . import pjrt
    device = pjrt.devices("pjrt")[0]
    return _without_library(directory, manifest, lambda s: PjrtFunction(s, directory, device))


def load(directory):
    """Check and open the library that `kiln compile -o DIRECTORY` wrote; a `Library` whose
    functions are called like the compiled Python functions. Raises `AOTLoadError` without
    running any of the library's code if the directory is incomplete, was modified, comes from
    an incompatible kiln, or was compiled for a CPU this machine does not have."""
    directory = Path(os.fspath(directory)).absolute()
    manifest = _read_manifest(directory)
    _check_versions(manifest, directory / MANIFEST)
    _check_files(directory, manifest)
    if _kind(manifest) == "cuda":
        return _open_cuda(directory, manifest)
    if _kind(manifest) == "stablehlo":
        return _open_stablehlo(directory, manifest)
    _check_target(manifest, directory)
    return _open(directory, manifest, _functions(directory, manifest))
