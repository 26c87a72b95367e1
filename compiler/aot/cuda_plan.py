"""A CUDA plan (backends/cuda/program.py: steps of every kind, control flow's regions as
plans of their own) as the JSON of a `kiln compile --target cuda` manifest, and back.

`encode(plan, kernel_files)` -> {"inputs": [names], "steps": [steps], "results": [values]};
`decode(data, directory)` -> the program.Plan it describes, its kernels' text read from
`directory`, ready for the CUDA executable's Program (the loader plans nothing). A value is a
program value's name, or {"literal", "dtype"}; decoded, a name is a Var without an abstract
value (the executable reads values by name only).

A kernel step is {"kind": "kernel", "kernel": NAME, "files": its manifest entry, "inputs",
"outputs", "input_dtypes", "output_dtypes", "output_shapes", "scalars", "sizes", "launch",
"launch_rule", "starts_from", "scratch"} (aot/cuda.py documents the fields). Any other step
is {"kind", then the fields of its program step class}: "inputs" and "outputs" as values,
plans (`body`, `test`, a cond's `branches`) encoded the same way, `params` as an object of
the primitive's parameters, and the other fields as JSON: tuples as lists (decoded as
tuples again), dtypes as {"dtype": name}, NumPy scalars as {"scalar", "dtype"}, the
NamedTuples SSA text can spell (ir/params.py: gather's dimension numbers, ...) as
{"type": name, "fields": {...}}. A parameter JSON cannot hold (a callback's Python
function) is an AOTError naming the primitive.
"""
import numpy as np

from ..backends.cuda import program
from ..backends.cuda.source import LAUNCH_RULES, Kernel
from ..ir.abstract import ShapedArray
from ..ir.params import PARAM_TYPES
from ..ir.ssa import Literal, Var
from .targets import AOTError

_SKIPPED = ("kind", "info")   # fields a manifest step does not carry (`info`: source lines)


def encode(plan, kernel_files):
    """The JSON of program.Plan `plan`; `kernel_files`: each kernel's files, by name."""
    return {"inputs": [v.name for v in plan.inputs],
            "steps": [_step(s, kernel_files) for s in plan.steps],
            "results": [_value(v) for v in plan.results]}


def _step(step, kernel_files):
    if step.kind == "kernel":
        return _kernel_step(step, kernel_files)
    out = {"kind": step.kind}
    for field, value in zip(step._fields, step):
        if field in _SKIPPED:
            continue
        if field == "inputs":
            out[field] = [_value(x) for x in value]
        elif field == "outputs":
            out[field] = [v.name for v in value]
        elif isinstance(value, program.Plan):
            out[field] = encode(value, kernel_files)
        elif field == "branches":
            out[field] = [encode(p, kernel_files) for p in value]
        elif field == "params":
            out[field] = {k: _json(x, step) for k, x in value.items()}
        else:
            out[field] = _json(value, step)
    return out


def _json(value, step):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return {"scalar": value.item(), "dtype": value.dtype.name}
    if isinstance(value, np.dtype):
        return {"dtype": value.name}
    if isinstance(value, tuple) and PARAM_TYPES.get(type(value).__name__) is type(value):
        return {"type": type(value).__name__,
                "fields": {f: _json(getattr(value, f), step) for f in value._fields}}
    if type(value) in (tuple, list):
        return [_json(x, step) for x in value]
    what = f"the primitive {step.primitive!r}" if hasattr(step, "primitive") else step.kind
    raise AOTError(f"kiln compile --target cuda cannot write {what}'s step: a parameter is a "
                   f"{type(value).__name__}, which a manifest cannot hold (callbacks need "
                   f"the Python process: call the function through kiln.jit instead)")


def _kernel_step(step, kernel_files):
    k = step.kernel
    return {"kind": "kernel", "kernel": k.name, "files": kernel_files[k.name],
            "inputs": [_value(x) for x in step.inputs],
            "outputs": [v.name for v in step.outputs],
            "input_dtypes": [str(np.dtype(d)) for d in k.inputs],
            "output_dtypes": [str(np.dtype(d)) for d in k.outputs],
            "output_shapes": [list(s) for s in k.out_shapes], "scalars": list(k.scalars),
            "sizes": [int(s) for s in k.sizes], "launch": k.launch,
            "launch_rule": LAUNCH_RULES[k.launch][0],
            "starts_from": [list(p) for p in k.starts_from],
            "scratch": [[str(np.dtype(d)), int(n)] for d, n in k.scratch]}


def _value(x):
    if isinstance(x, Literal):
        return {"literal": np.asarray(x.value).item(), "dtype": str(np.dtype(x.aval.dtype))}
    return x.name


# ----------------------------------------------------------------------------- decoding

def decode(data, directory):
    """The program.Plan of `encode`'s JSON `data`, kernels' text read from `directory`."""
    return program.Plan(tuple(Var(n, None) for n in data["inputs"]),
                        tuple(_decode_step(s, directory) for s in data["steps"]),
                        tuple(_decode_value(v) for v in data["results"]))


def _decode_step(s, directory):
    if s["kind"] == "kernel":
        return program.Step(kernel(s, directory),
                            tuple(_decode_value(v) for v in s["inputs"]),
                            tuple(Var(n, None) for n in s["outputs"]))
    cls = program.KINDS[s["kind"]]
    fields = {}
    for field in cls._fields:
        if field == "info":
            continue
        value = s[field]
        if field == "kind":
            fields[field] = value
        elif field == "inputs":
            fields[field] = tuple(_decode_value(v) for v in value)
        elif field == "outputs":
            fields[field] = tuple(Var(n, None) for n in value)
        elif field in ("body", "test"):
            fields[field] = decode(value, directory)
        elif field == "branches":
            fields[field] = tuple(decode(p, directory) for p in value)
        elif field == "params":
            fields[field] = {k: _from_json(x) for k, x in value.items()}
        else:
            fields[field] = _from_json(value)
    return cls(**fields)


def _from_json(value):
    if isinstance(value, list):
        return tuple(_from_json(x) for x in value)
    if isinstance(value, dict):
        if "type" in value:
            return PARAM_TYPES[value["type"]](**{f: _from_json(x)
                                                 for f, x in value["fields"].items()})
        dtype = np.dtype(value["dtype"])
        return np.asarray(value["scalar"], dtype)[()] if "scalar" in value else dtype
    return value


def _decode_value(v):
    if isinstance(v, dict):
        dtype = np.dtype(v["dtype"])
        return Literal(np.asarray(v["literal"], dtype)[()], ShapedArray((), dtype))
    return Var(v, None)


def kernel(s, directory):
    """The source.Kernel of kernel step `s` (its text from its `.cu` file)."""
    return Kernel(s["kernel"], (directory / s["files"]["cu"]).read_text(),
                  tuple(np.dtype(d) for d in s["input_dtypes"]),
                  tuple(np.dtype(d) for d in s["output_dtypes"]), tuple(s["scalars"]),
                  extents=len(s["sizes"]), sizes=tuple(s["sizes"]),
                  out_shapes=tuple(tuple(x) for x in s["output_shapes"]),
                  launch=s["launch"], starts_from=tuple(map(tuple, s["starts_from"])),
                  scratch=tuple((np.dtype(d), n) for d, n in s["scratch"]))
