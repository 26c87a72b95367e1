"""`kiln.ffi`: JAX's foreign function interface. A handler written against XLA's FFI (the C API
in `xla/ffi/api/c_api.h`, or the C++ `xla::ffi` bindings over it), compiled into a shared
library, is registered once and called like a kiln function:

    lib = ctypes.cdll.LoadLibrary("./librms_norm.so")
    kiln.ffi.register_ffi_target("rms_norm", kiln.ffi.pycapsule(lib.RmsNorm), platform="cpu")
    y = kiln.ffi.ffi_call("rms_norm", kiln.ShapeDtypeStruct(x.shape, x.dtype))(x, eps=1e-5)

kiln is the runtime the handler talks to (compiler/primitives/xla_ffi.py): it builds the call
frame, answers the handler's API calls and runs its stages, eagerly and from compiled code
(the `ffi_call` primitive, a host call in the LLVM and CUDA backends). See docs/ffi.md.
"""
import ctypes
import importlib.util
import os
from collections.abc import Sequence

import numpy as np

from .array import to_array
from .callbacks import bind_host_call, stages_host_call
from .compiler.primitives import PRIMITIVES
from .compiler.primitives import xla_ffi
from .dispatch import is_traced

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable",
           "register_ffi_type", "register_ffi_type_id"]

VMAP_METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None]

# Own prototypes of the CPython capsule functions (`ctypes.pythonapi`'s are shared objects whose
# argtypes other libraries set to their own).
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def pycapsule(funcptr):
    """Wrap a ctypes function pointer (`lib.handler`) in a PyCapsule, as JAX's does."""
    return _capsule_new(ctypes.cast(funcptr, ctypes.c_void_p).value, None, None)


def _address(obj, what):
    """The native address a PyCapsule (or a ctypes function or an int) holds."""
    if type(obj).__name__ == "PyCapsule":
        return _capsule_pointer(obj, _capsule_name(obj))
    if isinstance(obj, ctypes._CFuncPtr):
        return ctypes.cast(obj, ctypes.c_void_p).value
    if isinstance(obj, int) and obj:
        return obj
    raise TypeError(f"{what} must be a PyCapsule holding a function pointer (made with "
                    f"kiln.ffi.pycapsule(lib.symbol) or by a nanobind/pybind11 module), got "
                    f"{type(obj).__name__}")


def register_ffi_target(name, fn, platform="cpu", api_version=1, **kwargs):
    """Register the FFI handler `fn` (a PyCapsule, or a dict from stage names "instantiate",
    "prepare", "initialize", "execute" to PyCapsules) as the target `name` of `platform`.
    kiln runs CPU handlers of the typed FFI (`api_version=1`)."""
    if api_version != 1:
        raise ValueError(f"register_ffi_target({name!r}): api_version={api_version} is XLA's "
                         f"untyped custom-call API, which kiln does not run; write the handler "
                         f"against XLA's typed FFI (xla/ffi/api/ffi.h) and register it with "
                         f"api_version=1")
    stages = fn if isinstance(fn, dict) else {"execute": fn}
    addresses = {stage: _address(f, f"the handler of stage {stage!r}")
                 for stage, f in stages.items()}
    if platform.lower() in ("cpu", "host"):
        xla_ffi.register_target(name, addresses, int(kwargs.get("traits", 0)))
    else:   # a GPU handler: noted, but kiln runs handlers on the CPU only (docs/ffi.md)
        xla_ffi.OTHER_PLATFORMS.setdefault(name, set()).add(platform.lower())


def register_ffi_type_id(name, obj, platform="cpu"):
    """Removed in JAX 0.10.2 (as there): use `register_ffi_type`."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def register_ffi_type(name, type_registration, platform="cpu"):
    """Register the user type `name`: `type_registration["type_id"]` is a PyCapsule holding
    a pointer to its `XLA_FFI_TypeId`, which kiln fills in (handlers' state types)."""
    xla_ffi.register_type(name, _address(type_registration["type_id"], "type_id"))


def register_ffi_target_as_batch_partitionable(name):
    """Accepted: kiln does not partition FFI calls (they run once, on the whole batch)."""
    return None


def include_dir():
    """The directory of XLA's FFI headers (`xla/ffi/api/ffi.h`). kiln does not ship them: they
    come with jaxlib, which this finds without importing it."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "include")
        if os.path.isdir(os.path.join(path, "xla", "ffi", "api")):
            return path
    raise FileNotFoundError("kiln.ffi.include_dir: XLA's FFI headers (xla/ffi/api/ffi.h) come "
                            "with jaxlib, which is not installed here; `pip install jaxlib` "
                            "(only its headers are used) or point your build at a copy of "
                            "XLA's xla/ffi/api directory")


def _result_specs(results):
    specs = []
    for idx, result in enumerate(results):
        if not hasattr(result, "shape") or not hasattr(result, "dtype"):
            raise ValueError(f"All elements of result_shape_dtypes must have 'shape' and "
                             f"'dtype' attributes. Got {result} at position {idx}.")
        specs.append((np.dtype(result.dtype).name, tuple(int(n) for n in result.shape)))
    return tuple(specs)


def _layouts(layouts, specs, what):
    """Major-to-minor axis orders (None: row-major), checked against the values' ranks."""
    if layouts is None:
        return None
    if len(layouts) != len(specs):
        raise ValueError(f"The number of {what[0]} ({len(specs)}) must equal the number of "
                         f"{what[1]} ({len(layouts)}).")
    out = []
    for layout, (_, shape) in zip(layouts, specs):
        if layout is None:
            out.append(None)
            continue
        layout = tuple(int(d) for d in getattr(layout, "major_to_minor", layout))
        if sorted(layout) != list(range(len(shape))):
            raise ValueError(f"the layout {layout} is not a permutation of the axes of a value "
                             f"of shape {shape}")
        out.append(None if layout == tuple(range(len(shape))) else layout)
    return tuple(out) if any(x is not None for x in out) else None


def ffi_call(target_name, result_shape_dtypes, *, has_side_effect=False, vmap_method=None,
             input_layouts=None, output_layouts=None, input_output_aliases=None,
             custom_call_api_version=4, legacy_backend_config=None):
    """A function calling the FFI target `target_name` with its positional arguments as
    operands and its keyword arguments as attributes, returning arrays shaped as
    `result_shape_dtypes` (one spec, or a sequence of them); JAX's signature and checks."""
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {VMAP_METHODS}, but "
                         f"got: {vmap_method}")
    multiple = isinstance(result_shape_dtypes, Sequence)
    specs = _result_specs(result_shape_dtypes if multiple else [result_shape_dtypes])
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError(f"The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")
    if custom_call_api_version < 4:
        raise ValueError(f"ffi_call({target_name!r}): custom_call_api_version="
                         f"{custom_call_api_version} is XLA's untyped custom-call API, which "
                         f"kiln does not run; use the typed FFI (custom_call_api_version=4)")
    out_layouts = _layouts(None if output_layouts is None else
                           (output_layouts if multiple else (output_layouts,)), specs,
                           ("outputs", "output layouts"))

    def wrapped(*args, **kwargs):
        operands = [x if is_traced(x) else to_array(x) for x in args]
        in_specs = tuple((np.dtype(x.dtype).name, tuple(x.shape)) for x in operands)
        in_layouts = _layouts(input_layouts, in_specs, ("input arguments", "input layouts"))
        aliases = _aliases(input_output_aliases, in_specs, specs, in_layouts, out_layouts)
        attributes = tuple(sorted((k, xla_ffi.encode_attribute(k, v))
                                  for k, v in kwargs.items()))
        params = dict(target_name=target_name, results=specs, attributes=attributes,
                      vmap_method=vmap_method)
        if in_layouts or out_layouts or aliases:
            params.update(layouts=(in_layouts, out_layouts), aliases=aliases)
        prim = PRIMITIVES["ffi_call_effect" if has_side_effect else "ffi_call"]
        if stages_host_call(operands):
            outs = list(bind_host_call(prim, operands, params))
        else:
            from .array import Array
            outs = [Array(o) for o in prim.impl(*[np.asarray(x) for x in operands], **params)]
        if multiple:
            return tuple(outs) if isinstance(result_shape_dtypes, tuple) else outs
        return outs[0]
    return wrapped


def _aliases(aliases, in_specs, out_specs, in_layouts, out_layouts):
    """`input_output_aliases` as sorted (input, output) pairs, checked as JAX checks them."""
    if not aliases:
        return ()
    pairs = []
    for i, o in sorted(aliases.items()):
        i, o = int(i), int(o)
        if i >= len(in_specs):
            raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with input "
                             f"index {i} outside the range [0, {len(in_specs)}).")
        if o >= len(out_specs):
            raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with output "
                             f"index {o} outside the range [0, {len(out_specs)}).")
        if in_specs[i] != out_specs[o]:
            raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring "
                             f"to an input with abstract value {_str(in_specs[i])} and an "
                             f"output with a different abstract value {_str(out_specs[o])}.")
        li = in_layouts[i] if in_layouts else None
        lo = out_layouts[o] if out_layouts else None
        if li != lo:
            raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring "
                             f"to an input with layout {li} and an output with a different "
                             f"layout {lo}.")
        pairs.append((i, o))
    return tuple(pairs)


def _str(spec):
    dtype, shape = spec
    return f"{dtype}[{','.join(map(str, shape))}]"


class FfiLowering:
    """What `ffi_lowering(name)` returns: JAX's MLIR lowering rule calling the FFI target
    `name`. kiln has no MLIR; a user primitive given one by
    `kiln.interpreters.mlir.register_lowering` is defined by a call of the target
    (kiln.extend.core), with the primitive's parameters as attributes."""

    def __init__(self, call_target_name, operand_layouts=None, result_layouts=None,
                 backend_config=None, **lowering_args):
        self.call_target_name = call_target_name
        self.operand_layouts, self.result_layouts = operand_layouts, result_layouts
        self.backend_config = backend_config
        self.has_side_effect = bool(lowering_args.get("has_side_effect", False))

    def call(self, args, result_shape_dtypes, **attributes):
        """The target's results on `args`, shaped as `result_shape_dtypes` (a sequence)."""
        attributes = dict(self.backend_config or {}, **attributes)
        return ffi_call(self.call_target_name, list(result_shape_dtypes),
                        has_side_effect=self.has_side_effect, input_layouts=self.operand_layouts,
                        output_layouts=self.result_layouts)(*args, **attributes)

    def __call__(self, ctx, *operands, **params):
        raise TypeError(f"the lowering rule of the FFI target {self.call_target_name!r} is "
                        f"JAX's MLIR lowering, which kiln does not build: register it with "
                        f"kiln.interpreters.mlir.register_lowering, or call "
                        f"kiln.ffi.ffi_call({self.call_target_name!r}, ...) directly")


def ffi_lowering(call_target_name, *, operand_layouts=None, result_layouts=None,
                 backend_config=None, skip_ffi_layout_processing=False, **lowering_args):
    """JAX's lowering rule for a primitive implemented by an FFI target (see FfiLowering)."""
    return FfiLowering(call_target_name, operand_layouts, result_layouts, backend_config,
                       **lowering_args)


build_ffi_lowering_function = ffi_lowering
