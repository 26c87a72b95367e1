"""`kiln.export`: JAX's `jax.export`, on kiln's SSA form.

`export(jit(f))(*args, **kwargs)` specialises `f` for the arguments (arrays, numbers,
`ShapeDtypeStruct`s, pytrees of them; static arguments as `jit` declares them) and returns an
`Exported`: JAX's public attributes (`fun_name`, `in_tree`, `out_tree`, `in_avals`,
`out_avals`, `platforms`, `nr_devices`, ...), `mlir_module()` (kiln's StableHLO module of the
function, docs/stablehlo.md), `serialize(vjp_order)` and `call(*args)`.

What an `Exported` holds is the function's SSA form after the reference pipeline (printed,
as `kiln.make_ir` shows it), the arrays it closes over, and the StableHLO text of that SSA.
`call` checks the arguments against `in_tree` and `in_avals` (JAX's messages), then replays
the SSA: inside a function being compiled (`jit`, `grad`, `vmap`) its equations are emitted
into that function; outside, it runs compiled on kiln's default backend. As in JAX, `call` is
a custom VJP whose backward half calls `vjp()`, the exported VJP: kiln's reverse mode of the
SSA, exported in turn (its arguments are the primal arguments followed by one cotangent per
output; integer outputs take float0 cotangents, as JAX's). An `Exported` made by `export`
has every order of VJP; a deserialized one has the orders its blob was serialized with, and
differentiating past them is JAX's `ValueError` ("No VJP is available").

The blob (`serialize`) is kiln's own format: the line `kiln.export <version>`, the SHA-256 of
the rest, and a JSON document (sorted keys, so equal functions give equal bytes) with the
attributes, the pytree structures (built-in nodes; namedtuples and custom nodes through
`register_namedtuple_serialization` / `register_pytree_node_serialization`, as in JAX), the
SSA text, the constants (raw bytes, base64), the StableHLO text, and the VJP's document up to
`vjp_order`. `deserialize` checks the header, version and checksum, parses the SSA again
(type-checking it) and refuses anything else with `ExportFormatError`, naming JAX's own
FlatBuffer blobs, which kiln cannot read (export the function with kiln instead).

Functions that call host callbacks (`pure_callback`, `io_callback`) are refused, as JAX
refuses them: a blob cannot carry a Python callable. `debug.print` is exported.
Shape polymorphism (`symbolic_shape`, `symbolic_args_specs`) is not supported: kiln
specialises for concrete shapes, and these raise `NotImplementedError` saying so.
docs/export.md describes all of this.
"""
import base64
import contextlib
import hashlib
import json
import re
import struct
import weakref
from collections import OrderedDict

import numpy as np

from .compiler.ir import dtypes as _dtypes
from .compiler.ir.abstract import ShapedArray
from .compiler.ir import builder as _builder
from .compiler.ir.builder import current
from .compiler.ir.parser import SSASyntaxError, from_source
from .compiler.ir.ssa import Var
from .compiler.errors import BackendUnsupportedError
from .dispatch import is_traced
from .ad import float0
from .tree_util import tree_flatten, tree_structure, tree_unflatten
from . import staging, _tree_util

__all__ = ["DisabledSafetyCheck", "Exported", "export", "deserialize",
           "register_pytree_node_serialization", "register_namedtuple_serialization",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "default_export_platform",
           "SymbolicScope", "is_symbolic_dim", "symbolic_shape", "symbolic_args_specs",
           "ExportFormatError", "FORMAT_VERSION"]

# JAX 0.10.2's calling convention versions; kiln's Exported reports the newest.
minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10

FORMAT_VERSION = 1
_MAGIC = b"kiln.export"
_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


class ExportFormatError(ValueError):
    """A blob `deserialize` cannot read (the message says why and what to do)."""


class DisabledSafetyCheck:
    """A safety check to skip (JAX's): `platform()` lets an Exported run on a platform it was
    not exported for; `custom_call(name)` is accepted and recorded (kiln's SSA has no custom
    calls to check)."""

    def __init__(self, _impl):
        self._impl = _impl

    @classmethod
    def platform(cls):
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name):
        return cls(f"custom_call:{target_name}")

    def is_custom_call(self):
        m = re.match(r"custom_call:(.+)$", self._impl)
        return m.group(1) if m else None

    def __str__(self):
        return self._impl
    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self):
        return hash(self._impl)


def default_export_platform():
    """The platform `export` targets by default: kiln's default backend ('cpu', 'cuda' or,
    through a PJRT plug-in, its platform)."""
    from .devices import default_backend
    name = default_backend()
    return "cuda" if name == "gpu" else name


# ------------------------------------------------------------------------ shape polymorphism

_NO_SHAPE_POLY = ("kiln.export.{}: shape polymorphism is not supported. kiln specialises a "
                  "function for concrete shapes (its SSA form has no dimension variables), so "
                  "an Exported serves one shape per argument; export once per shape you need "
                  "(export(f)(jax.ShapeDtypeStruct((8, 4), jnp.float32)), ...).")


class SymbolicScope:
    """JAX's scope of symbolic dimensions; kiln has none (see `symbolic_shape`)."""

    def __init__(self, constraints_str=()):
        raise NotImplementedError(_NO_SHAPE_POLY.format("SymbolicScope"))


def is_symbolic_dim(p):
    """False: kiln's dimensions are always integers."""
    return False


def symbolic_shape(shape_spec, *, constraints=(), scope=None, like=None):
    raise NotImplementedError(_NO_SHAPE_POLY.format("symbolic_shape"))


def symbolic_args_specs(args, shapes_specs, constraints=(), scope=None):
    raise NotImplementedError(_NO_SHAPE_POLY.format("symbolic_args_specs"))


# ------------------------------------------------------------------ pytree node serialization

_SERIALIZERS = {}     # type -> (serialized_name, serialize_auxdata)
_DESERIALIZERS = {}   # serialized_name -> (type, deserialize_auxdata, from_children)


def _is_namedtuple(t):
    return isinstance(t, type) and issubclass(t, tuple) and \
        isinstance(getattr(t, "_fields", None), tuple) and all(isinstance(f, str)
                                                                for f in t._fields)


def register_pytree_node_serialization(nodetype, *, serialized_name, serialize_auxdata,
                                       deserialize_auxdata, from_children=None):
    """Let pytrees with `nodetype` nodes appear in an Exported's `in_tree`/`out_tree` when it
    is serialized (JAX's). `serialize_auxdata(aux) -> bytes` and `deserialize_auxdata(bytes)`
    carry the node's aux data; `from_children(aux, children)` builds a node (default: the
    `unflatten_func` given to `tree_util.register_pytree_node`). Returns `nodetype`."""
    if nodetype in _SERIALIZERS:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. "
                         f"Previous registration was with serialized_name "
                         f"`{_SERIALIZERS[nodetype][0]}`.")
    if serialized_name in _DESERIALIZERS:
        raise ValueError(f"Duplicate serialization registration for serialized_name "
                         f"`{serialized_name}`. Previous registration was for type "
                         f"`{_DESERIALIZERS[serialized_name][0]}`.")
    if from_children is None:
        registration = _tree_util._registry.get(nodetype)
        if registration is None:
            raise ValueError(f"If `from_children` is not present, you must call first "
                             f"`kiln.tree_util.register_pytree_node` for `{nodetype}`")
        from_children = registration.unflatten
    _SERIALIZERS[nodetype] = (serialized_name, serialize_auxdata)
    _DESERIALIZERS[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name):
    """Let a namedtuple type appear in serialized pytree structures (JAX's); its field names
    are stored, and must match the type's on deserialization. Returns `nodetype`."""
    if not _is_namedtuple(nodetype):
        raise ValueError("Use `kiln.export.register_pytree_node_serialization` for types "
                         "other than `collections.namedtuple`.")

    def from_children(fields, children):
        if list(fields) != list(nodetype._fields):
            raise ExportFormatError(f"the namedtuple {serialized_name!r} was serialized with "
                                    f"fields {list(fields)}, but {nodetype.__name__} now has "
                                    f"{list(nodetype._fields)}")
        return nodetype(*children)

    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name,
        serialize_auxdata=lambda _: json.dumps(list(nodetype._fields)).encode(),
        deserialize_auxdata=lambda b: json.loads(b.decode()),
        from_children=from_children)


register_pytree_node_serialization(
    OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=lambda keys: json.dumps(_string_keys(keys, "OrderedDict")).encode(),
    deserialize_auxdata=lambda b: json.loads(b.decode()),
    from_children=lambda keys, children: OrderedDict(zip(keys, children)))


def _string_keys(keys, what):
    keys = list(keys)
    for k in keys:
        if not isinstance(k, str):
            raise TypeError(f"Serialization is supported only for {what}s with string keys. "
                            f"Found key {k!r} of type {type(k)}.")
    return keys


def _tree_to_json(treedef):
    data = treedef.node_data()
    children = [_tree_to_json(c) for c in treedef.children()]
    if data is None:
        return "*"
    kind, aux = data
    if kind is type(None):
        return None
    if kind in (tuple, list):
        return {kind.__name__: children}
    if kind is dict:
        return {"dict": dict(zip(_string_keys(aux, "dictionarie"), children))}
    entry = _SERIALIZERS.get(kind)
    if entry is None:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type "
                         f"`{kind}`. Use `kiln.export.register_pytree_node_serialization` or "
                         f"`kiln.export.register_namedtuple_serialization`.")
    name, serialize_auxdata = entry
    blob = serialize_auxdata(aux)
    if not isinstance(blob, (bytes, bytearray)):
        raise ValueError(f"The custom serialization function for `{kind}` must return a "
                         f"`bytes` object. It returned a {type(blob)}.")
    return {"custom": name, "auxdata": base64.b64encode(bytes(blob)).decode(),
            "children": children}


_LEAF = object()


def _tree_from_json(node):
    """A pytree of `node`'s structure, with `_LEAF` leaves."""
    if node == "*":
        return _LEAF
    if node is None:
        return None
    if not isinstance(node, dict) or len(node) not in (1, 3):
        raise ExportFormatError(f"a pytree node {node!r} of the blob is malformed")
    if "tuple" in node:
        return tuple(_tree_from_json(c) for c in node["tuple"])
    if "list" in node:
        return [_tree_from_json(c) for c in node["list"]]
    if "dict" in node:
        return {k: _tree_from_json(c) for k, c in node["dict"].items()}
    entry = _DESERIALIZERS.get(node.get("custom"))
    if entry is None:
        raise ExportFormatError(
            f"the blob has a pytree node serialized as {node.get('custom')!r}, which is not "
            f"registered here; call kiln.export.register_pytree_node_serialization (or "
            f"register_namedtuple_serialization) with serialized_name={node.get('custom')!r} "
            f"before deserializing")
    _, deserialize_auxdata, from_children = entry
    aux = deserialize_auxdata(base64.b64decode(node["auxdata"]))
    return from_children(aux, [_tree_from_json(c) for c in node["children"]])


def _treedef_from_json(node):
    return tree_structure(_tree_from_json(node), is_leaf=lambda x: x is _LEAF)


# --------------------------------------------------------------------------------- Exported

class Exported:
    """A function exported by `kiln.export.export` or read back by `deserialize` (JAX's
    `jax.export.Exported`; module docstring)."""

    def __init__(self, *, fun_name, in_tree, in_avals, out_tree, out_avals, platforms,
                 disabled_safety_checks, ssa_text, consts, stablehlo, get_vjp,
                 in_kept=None, out_kept=None):
        self.fun_name = fun_name
        self.in_tree, self.in_avals = in_tree, tuple(in_avals)
        self.out_tree, self.out_avals = out_tree, tuple(out_avals)
        self.in_shardings_hlo = (None,) * len(self.in_avals)
        self.out_shardings_hlo = (None,) * len(self.out_avals)
        self.nr_devices = 1
        self.platforms = tuple(platforms)
        self.ordered_effects = ()
        self.unordered_effects = ()
        self.disabled_safety_checks = tuple(disabled_safety_checks)
        self.calling_convention_version = maximum_supported_calling_convention_version
        # The inputs and outputs the SSA has: all but float0 ones (integers' cotangents in a
        # VJP), which carry no data.
        self.module_kept_var_idx = tuple(range(len(self.in_avals))) if in_kept is None \
            else tuple(in_kept)
        self._out_kept = tuple(range(len(self.out_avals))) if out_kept is None \
            else tuple(out_kept)
        self.uses_global_constants = False
        self._ssa_text = ssa_text
        self._consts = list(consts)
        self._stablehlo = stablehlo   # the text, or (None, why it could not be lowered)
        self._get_vjp = get_vjp
        self._executable = None
        self._vjp = None   # vjp(), once made
        self._flat_call = None   # the custom VJP `call` runs

    def __str__(self):
        return f"Exported(fun_name={self.fun_name}, ...)"

    def __repr__(self):
        return (f"Exported(fun_name={self.fun_name!r}, in_tree={self.in_tree}, "
                f"in_avals={self.in_avals}, out_tree={self.out_tree}, "
                f"out_avals={self.out_avals}, platforms={self.platforms})")

    # ------------------------------------------------------------------ inspection
    def mlir_module(self, serialized=True):
        """The StableHLO module of the function, as text (kiln's lowering of its SSA form,
        docs/stablehlo.md; the arrays it closes over are @main's last arguments)."""
        if isinstance(self._stablehlo, tuple):
            raise NotImplementedError(f"the exported function {self.fun_name!r} has no "
                                      f"StableHLO module: {self._stablehlo[1]}. It still runs "
                                      f"(Exported.call) and serializes.")
        return self._stablehlo

    @property
    def mlir_module_serialized(self):
        """`mlir_module()` as UTF-8 bytes (JAX's holds VHLO bytecode)."""
        return self.mlir_module().encode()

    def ssa_text(self):
        """The SSA form `call` runs (kiln's; JAX has no counterpart)."""
        return self._ssa_text

    def in_shardings_jax(self, mesh):
        """One sharding per input: None, as nothing was exported with a sharding."""
        return self.in_shardings_hlo

    def out_shardings_jax(self, mesh):
        """One sharding per output: None, as nothing was exported with a sharding."""
        return self.out_shardings_hlo

    def has_vjp(self):
        return self._get_vjp is not None

    def vjp(self):
        """The exported VJP: arguments the primal ones then one cotangent per output, result
        the tuple of the inputs' cotangents."""
        if self._vjp is not None:
            return self._vjp
        if self._get_vjp is None:
            raise ValueError(f"No VJP is available for the exported function "
                             f"{self.fun_name!r}: it was deserialized from a blob holding "
                             f"fewer orders of derivatives than asked for. Serialize it with "
                             f"a larger vjp_order (exp.serialize(vjp_order=N) allows N "
                             f"nested grads of the deserialized function).")
        self._vjp = self._get_vjp(self)
        return self._vjp

    # --------------------------------------------------------------- serialization
    def serialize(self, vjp_order=0):
        """The blob that `deserialize` reads, holding `vjp_order` orders of VJP (so that
        `grad` can be applied that many times to the deserialized function's `call`)."""
        payload = json.dumps(self._document(vjp_order), sort_keys=True,
                             separators=(",", ":")).encode()
        return bytearray(framed(_MAGIC, FORMAT_VERSION, payload))

    def _document(self, vjp_order):
        if vjp_order < 0 or int(vjp_order) != vjp_order:
            raise ValueError(f"serialize: vjp_order must be a non-negative int, got "
                             f"{vjp_order!r}")
        if vjp_order > 0 and not self.has_vjp():
            self.vjp()   # raises, saying which order is missing
        return {
            "fun_name": self.fun_name,
            "in_tree": _tree_to_json(self.in_tree),
            "out_tree": _tree_to_json(self.out_tree),
            "in_avals": [aval_json(a) for a in self.in_avals],
            "out_avals": [aval_json(a) for a in self.out_avals],
            "in_kept": list(self.module_kept_var_idx),
            "out_kept": list(self._out_kept),
            "platforms": list(self.platforms),
            "disabled_checks": [str(c) for c in self.disabled_safety_checks],
            "calling_convention_version": self.calling_convention_version,
            "ssa": self._ssa_text,
            "consts": [array_json(c) for c in self._consts],
            "stablehlo": self._stablehlo if isinstance(self._stablehlo, str) else None,
            "stablehlo_missing": self._stablehlo[1] if isinstance(self._stablehlo, tuple)
            else None,
            "vjp": self.vjp()._document(vjp_order - 1) if vjp_order > 0 else None,
        }

    # ---------------------------------------------------------------------- calling
    def call(self, *args, **kwargs):
        """Run the exported function on `args`/`kwargs` (pytrees of the structure, shapes and
        dtypes it was exported for), inside or outside `jit`; differentiable as the module
        docstring says."""
        leaves, in_tree = tree_flatten((args, kwargs))
        if in_tree != self.in_tree:
            raise ValueError(f"The invocation args and kwargs must have the same pytree "
                             f"structure as when the function '{self.fun_name}' was exported: "
                             f"it was exported for {self.in_tree} and is called with "
                             f"{in_tree}.")
        self._check_platform()
        for i, (x, expected) in enumerate(zip(leaves, self.in_avals)):
            _check_argument(x, expected, i, self)
            if isinstance(x, (bool, int, float, complex)) and not expected.weak_type:
                leaves[i] = np.asarray(x, expected.dtype)   # typed as it was exported
        kept = _differentiable_call(self)(*[leaves[i] for i in self.module_kept_var_idx])
        outs = [_zeros(a) for a in self.out_avals]
        for i, x in zip(self._out_kept, kept):
            outs[i] = x
        return tree_unflatten(self.out_tree, outs)

    def _check_platform(self):
        here = default_export_platform()
        if here not in self.platforms and \
                DisabledSafetyCheck.platform() not in self.disabled_safety_checks:
            raise ValueError(f"Function '{self.fun_name}' was exported for platforms "
                             f"'{self.platforms}' but it is used on '{(here,)}'. Export it "
                             f"with platforms=[..., {here!r}], or with disabled_checks="
                             f"[DisabledSafetyCheck.platform()] (kiln's SSA form runs on any "
                             f"of its backends).")

    def _run(self, leaves):
        """The outputs (flat) of the SSA on `leaves`: replayed into the function being
        compiled, or run compiled."""
        if current() is not None or any(is_traced(x) for x in leaves):
            return _replay(self, leaves)
        if self._executable is None:
            from .jit import jit
            self._executable = jit(lambda *xs: _replay(self, xs))
        return self._executable(*leaves)


def _zeros(aval):
    """The value of a float0 input or output (it carries no data)."""
    return np.zeros(aval.shape, aval.dtype)


def aval_json(a):
    """An abstract value as JSON: [dtype's short name, shape, weak type]."""
    return [_dtypes.short_name(a.dtype), list(a.shape), bool(a.weak_type)]


def aval_from_json(entry):
    """The abstract value `aval_json` wrote."""
    dtype, shape, weak = entry
    dtype = np.dtype(float0) if dtype == "float0" else _dtypes.from_short_name(dtype)
    return ShapedArray(tuple(int(d) for d in shape), dtype, bool(weak))


def array_json(x):
    """A NumPy array as JSON: dtype, shape and its C-ordered bytes in base64."""
    x = np.ascontiguousarray(x)
    return {"dtype": x.dtype.name, "shape": list(x.shape),
            "data": base64.b64encode(x.tobytes()).decode()}


def array_from_json(entry):
    """The NumPy array `array_json` wrote."""
    data = base64.b64decode(entry["data"])
    return np.frombuffer(data, np.dtype(entry["dtype"])).reshape(entry["shape"]).copy()


def _check_argument(x, expected, i, exp):
    """JAX's messages for an argument of another rank, dtype or shape."""
    where = f"args[{i}] of the exported function '{exp.fun_name}'"
    if expected.dtype == float0:   # an integer's cotangent: only its shape and type count
        if getattr(x, "dtype", None) != float0 or tuple(np.shape(x)) != expected.shape:
            raise ValueError(f"Dtype mismatch for {where}: expected a float0 array of shape "
                             f"{expected.shape} (the cotangent of an integer), got {x!r}")
        return
    aval = x.aval if is_traced(x) else staging.leaf_aval(x, f"argument {i}")[0]
    if len(aval.shape) != len(expected.shape):
        raise ValueError(f"Rank mismatch for {where}: expected {expected.shape} and called "
                         f"with {aval.shape}")
    if aval.dtype != expected.dtype:
        raise ValueError(f"Dtype mismatch for {where}: expected {expected.dtype} and called "
                         f"with {aval.dtype}")
    for d, (e, a) in enumerate(zip(expected.shape, aval.shape)):
        if e != a:
            raise ValueError(f"Shape mismatch for {where}.shape[{d}] (expected same "
                             f"constant): expected {expected.shape} and called with "
                             f"{aval.shape}")


def _replay(exp, leaves):
    """Emit the SSA of `exp` on `leaves` into the function being compiled; its outputs. The
    text is parsed afresh, and every name inside its regions renamed from the builder's name
    supply, so that nothing collides with the names around it."""
    from .numpy import asarray
    b = current()
    fn = from_source(exp._ssa_text)
    for eqn in fn.eqns:
        for region in eqn.regions():
            _rename(region, b.names)
    env = dict(zip(fn.invars, list(leaves) + [asarray(c) for c in exp._consts]))
    for eqn in fn.eqns:
        ins = [env[v] if type(v) is Var else v for v in eqn.invars]
        with b.naming(eqn.outvars[0].name if eqn.outvars else "t"):
            outs = b.bind(eqn.prim, ins, eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.prim.multiple_results else [outs]):
            env[v] = o
    return [env[v] if type(v) is Var else asarray(v.value) for v in fn.outvars]


def _rename(fn, names):
    fn.name = names.fresh(fn.name)
    for v in fn.invars:
        v.name = names.fresh(v.name)
    for eqn in fn.eqns:
        for v in eqn.outvars:
            v.name = names.fresh(v.name)
        for region in eqn.regions():
            _rename(region, names)


# The Exported objects whose calls exist, by id: the custom VJP of a call reaches its Exported
# through this table, so that its rules close over an int only and are specialised only when
# a derivative needs them (custom_derivatives.py, `_stands_alone`), as JAX's are.
_CALLED = weakref.WeakValueDictionary()


def _differentiable_call(exp):
    """`exp`'s flat call as a custom VJP (JAX's construction): the primal arguments are the
    residuals, and the backward half calls the exported VJP."""
    if exp._flat_call is not None:
        return exp._flat_call
    from .custom_derivatives import custom_vjp
    key = id(exp)
    _CALLED[key] = exp

    @custom_vjp
    def flat(*leaves):
        return tuple(_CALLED[key]._run(list(leaves)))

    def fwd(*leaves):
        return flat(*leaves), leaves

    def bwd(leaves, cts):
        exp = _CALLED[key]
        vjp_exp = exp.vjp()
        n = len(exp.in_avals)
        args = [_zeros(a) for a in vjp_exp.in_avals]
        for i, x in zip(exp.module_kept_var_idx, leaves):
            args[i] = x
        for j, ct in zip(exp._out_kept, cts):
            if vjp_exp.in_avals[n + j].dtype != float0:
                args[n + j] = ct
        in_cts = vjp_exp.call(*args)
        return tuple(None if in_cts[i].dtype == float0 else in_cts[i]
                     for i in exp.module_kept_var_idx)

    flat.defvjp(fwd, bwd)
    exp._flat_call = flat
    return flat


# ------------------------------------------------------------------------------- exporting

def export(fun_jit, *, platforms=None, disabled_checks=()):
    """JAX's `jax.export.export`: `export(jit(f))(*args, **kwargs)` is the `Exported` of `f`
    for arguments like these (arrays, numbers, `ShapeDtypeStruct`s; static arguments by
    value). `fun_jit` is a `kiln.jit` function, or one of kiln's own (`jnp.cos`), which JAX's
    are jitted already."""
    from .jit import Jitted, jit
    if not isinstance(fun_jit, Jitted) and callable(fun_jit) and \
            (getattr(fun_jit, "__module__", None) or "").startswith("kiln."):
        fun_jit = jit(fun_jit)   # JAX's jnp and lax functions are jitted; kiln's are not
    if not isinstance(fun_jit, Jitted):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: "
                         f"{fun_jit!r}. Pass kiln.jit(f) (with its static_argnums, if any).")
    platforms = tuple(platforms) if platforms is not None else (default_export_platform(),)
    for p in platforms:
        if p not in _PLATFORMS:
            raise ValueError(f"kiln.export.export: unknown platform {p!r}; the platforms are "
                             f"{', '.join(map(repr, _PLATFORMS))}")
    checks = tuple(disabled_checks)
    for c in checks:
        if not isinstance(c, DisabledSafetyCheck):
            raise TypeError(f"disabled_checks holds {c!r}; use DisabledSafetyCheck.platform() "
                            f"or DisabledSafetyCheck.custom_call(name)")

    def do_export(*args, **kwargs):
        from .introspection import stand_ins
        args, kwargs = stand_ins(args, kwargs)
        name = fun_jit.__name__
        with _top_level():
            st, in_tree, _ = staging.stage_call(fun_jit._fun, args, kwargs, fun_jit._static,
                                                shown=name)
        if st.writes or st.refs is not None:
            raise NotImplementedError(
                f"kiln.export: {name} {'assigns a global' if st.writes else 'uses a Ref'} "
                f"made outside it, which an exported function cannot carry; return the value "
                f"instead")
        fn = staging.run_pipeline(st.fn, "reference")
        in_avals = [v.aval for v in fn.invars[:in_tree.num_leaves]]
        return _exported(name, in_tree, in_avals, st.out_tree, fn, st.extra, platforms,
                         checks)
    return do_export


@contextlib.contextmanager
def _top_level():
    """Within: no function is being specialised in this thread, so that `export` called
    while one is (the VJP made for `grad` inside `jit`) stages a function of its own, its
    constants arrays rather than values of the enclosing function."""
    saved, _builder.STATE.stack = _builder.STATE.stack, []
    try:
        yield
    finally:
        _builder.STATE.stack = saved


def _host_calls(fn):
    """The primitives of `fn` (regions included) that call a Python function of this process
    (their `callback` parameter is a token of it)."""
    found = []
    for eqn in fn.eqns:
        if "callback" in eqn.params:
            found.append(eqn.prim.name)
        for region in eqn.regions():
            found += _host_calls(region)
    return found


def _exported(name, in_tree, in_avals, out_tree, fn, consts, platforms, checks):
    calls = _host_calls(fn)
    if calls:
        raise NotImplementedError(
            f"kiln.export: {name} cannot be exported: it calls Python functions of this "
            f"process ({', '.join(sorted(set(calls)))}), which a serialized function cannot "
            f"carry. Compute the callback's result with kiln.numpy/lax, or call the exported "
            f"function and the callback one after the other. (debug.print is fine.)")
    text = str(fn)
    try:
        from_source(text)
    except SSASyntaxError as e:
        raise NotImplementedError(f"kiln.export: {name} cannot be exported: its SSA form "
                                  f"holds what the SSA text cannot carry ({e}); host "
                                  f"callbacks (pure_callback, io_callback, debug.print) are "
                                  f"the usual cause") from None
    from .compiler.backends.stablehlo import lower_module
    try:
        stablehlo = lower_module(fn).text
    except BackendUnsupportedError as e:
        stablehlo = (None, e.bare_message)
    return Exported(fun_name=name, in_tree=in_tree, in_avals=in_avals, out_tree=out_tree,
                    out_avals=[v.aval for v in fn.outvars], platforms=platforms,
                    disabled_safety_checks=checks, ssa_text=text,
                    consts=[np.asarray(c) for c in consts], stablehlo=stablehlo,
                    get_vjp=_export_vjp)


def _tangent_aval(a):
    if a.dtype.kind in "fc":
        return ShapedArray(a.shape, a.dtype)
    return ShapedArray(a.shape, np.dtype(float0))


def _export_vjp(primal):
    """The Exported VJP of `primal`: kiln's reverse mode of its SSA, exported."""
    from .ad import vjp
    from .jit import jit
    from .introspection import ShapeDtypeStruct
    n = len(primal.in_avals)
    in_avals = list(primal.in_avals) + [_tangent_aval(a) for a in primal.out_avals]
    out_avals = [_tangent_aval(a) for a in primal.in_avals]
    in_kept = [i for i, a in enumerate(in_avals) if a.dtype != float0]
    out_kept = [i for i, a in enumerate(out_avals) if a.dtype != float0]

    def fun_vjp(*kept):
        args = [_zeros(a) for a in in_avals]
        for i, x in zip(in_kept, kept):
            args[i] = x
        _, pullback = vjp(lambda *xs: tuple(_replay(primal, xs)),
                          *[args[i] for i in primal.module_kept_var_idx])
        in_cts = [None] * n
        for i, ct in zip(primal.module_kept_var_idx,
                         pullback(tuple(args[n + j] for j in primal._out_kept))):
            in_cts[i] = ct
        return tuple(in_cts[i] for i in out_kept)

    specs = [ShapeDtypeStruct(in_avals[i].shape, in_avals[i].dtype,
                              weak_type=in_avals[i].weak_type) for i in in_kept]
    fun_vjp.__name__ = "fun_vjp"
    staged = export(jit(fun_vjp), platforms=primal.platforms,
                    disabled_checks=primal.disabled_safety_checks)(*specs)
    return Exported(fun_name=staged.fun_name,
                    in_tree=tree_structure((tuple(in_avals), {})), in_avals=in_avals,
                    out_tree=tree_structure(tuple(out_avals)), out_avals=out_avals,
                    platforms=staged.platforms,
                    disabled_safety_checks=staged.disabled_safety_checks,
                    ssa_text=staged._ssa_text, consts=staged._consts,
                    stablehlo=staged._stablehlo, get_vjp=_export_vjp, in_kept=in_kept,
                    out_kept=out_kept)


# ----------------------------------------------------------------------------- deserializing

def deserialize(blob):
    """The `Exported` that `Exported.serialize` wrote into `blob` (bytes or bytearray)."""
    payload = unframed(bytes(blob), _MAGIC, FORMAT_VERSION, ExportFormatError, _foreign,
                       "Export and serialize the function again", "the function")
    return _from_document(json.loads(payload))


def framed(magic, version, payload):
    """`payload` behind a line naming its format (`magic`) and `version` and a line with its
    SHA-256: how kiln's serialized blobs (this module's, serialize_executable's) begin."""
    digest = hashlib.sha256(payload).hexdigest().encode()
    return b"%s %d\n%s\n" % (magic, version, digest) + payload


def unframed(blob, magic, version, error, foreign, again, what):
    """The payload of a blob `framed(magic, version, ...)` wrote; else an `error` saying
    why: `foreign(blob)` for a blob of another format, `again` (what to do) for another
    version, and for a damaged header or payload that `what` must be serialized again."""
    header, _, rest = blob.partition(b"\n")
    if not header.startswith(magic + b" "):
        raise error(foreign(blob))
    try:
        found = int(header[len(magic) + 1:])
    except ValueError:
        raise error(f"the blob's header {header[:40]!r} is damaged; serialize {what} "
                    f"again") from None
    if found != version:
        raise error(f"the blob is in {magic.decode()} format version {found}; this kiln "
                    f"reads version {version}. {again} with this kiln.")
    digest, _, payload = rest.partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise error(f"the blob is corrupt (its SHA-256 does not match its contents: "
                    f"truncated or altered); serialize {what} again")
    return payload


def _from_document(doc):
    try:
        from_source(doc["ssa"])
    except SSASyntaxError as e:
        raise ExportFormatError(f"the blob's SSA form does not read back in this kiln ({e}); "
                                f"export and serialize the function again with it") from None
    vjp_doc = doc["vjp"]
    vjp_exp = _from_document(vjp_doc) if vjp_doc is not None else None
    stablehlo = doc["stablehlo"] if doc["stablehlo"] is not None else \
        (None, doc["stablehlo_missing"])
    return Exported(
        fun_name=doc["fun_name"], in_tree=_treedef_from_json(doc["in_tree"]),
        in_avals=[aval_from_json(a) for a in doc["in_avals"]],
        out_tree=_treedef_from_json(doc["out_tree"]),
        out_avals=[aval_from_json(a) for a in doc["out_avals"]],
        platforms=doc["platforms"],
        disabled_safety_checks=[DisabledSafetyCheck(c) for c in doc["disabled_checks"]],
        ssa_text=doc["ssa"], consts=[array_from_json(c) for c in doc["consts"]],
        stablehlo=stablehlo,
        get_vjp=None if vjp_exp is None else (lambda _: vjp_exp),
        in_kept=doc["in_kept"], out_kept=doc["out_kept"])


def _foreign(blob):
    """Why `blob` (not kiln's) cannot be read: JAX's FlatBuffer named as such."""
    jax_version = _jax_flatbuffer_version(blob)
    if jax_version is not None:
        return (f"the blob is in JAX's jax.export format (a FlatBuffer, serialization "
                f"version {jax_version}), which kiln cannot read: it holds XLA's VHLO "
                f"bytecode, not kiln's SSA form. Export the function with kiln "
                f"(kiln.export.export(kiln.jit(f))(...).serialize(), or the same code under "
                f"KILN_AS_JAX=1) and deserialize that blob.")
    return (f"the blob is not a kiln.export blob (it does not start with {_MAGIC!r}: "
            f"{blob[:16]!r}...); pass the bytes that Exported.serialize() returned")


def _jax_flatbuffer_version(blob):
    """The serialization version of JAX's FlatBuffer `blob`, or None if it is not one: its
    root table's first field (a uint16) and second (the function's name, a string) must read
    as JAX writes them."""
    try:
        root, = struct.unpack_from("<I", blob, 0)
        vtable = root - struct.unpack_from("<i", blob, root)[0]
        vt_size, = struct.unpack_from("<H", blob, vtable)
        if vt_size < 8:
            return None
        version_at, name_at = struct.unpack_from("<HH", blob, vtable + 4)
        if not (version_at and name_at):
            return None
        version, = struct.unpack_from("<H", blob, root + version_at)
        name = root + name_at + struct.unpack_from("<I", blob, root + name_at)[0]
        length, = struct.unpack_from("<I", blob, name)
        blob[name + 4:name + 4 + length].decode()
        if blob[name + 4 + length] != 0 or not 1 <= version < 100:
            return None
        return version
    except (struct.error, IndexError, UnicodeDecodeError):
        return None


def __dir__():
    return sorted(__all__)
