"""`kiln compile`'s Python side: staging the user's functions for an ahead-of-time library.

`compile_library(targets, out_dir, name=None, cpu="native", progress=None, cc=None,
processes=None)` builds the library that `kiln.compiler.aot` documents (files, C ABI, manifest) from `Target`s whose
`fn` may be a plain Python function or a `kiln.jit` one; `compile_cuda_library(targets,
out_dir, name=None, archs=("sm_90",), progress=None)` their CUDA kernels and step manifest
(`kiln.compiler.aot.cuda`); `compile_stablehlo_library(targets, out_dir, name=None,
progress=None)` their StableHLO modules (`kiln.compiler.aot.stablehlo`). It stages each target here, in the
runtime, and hands the SSA to `kiln.compiler.aot.library`, which never imports the runtime.

`specialise(target)` stages a target as `kiln.jit` does (`kiln.staging.stage_call`) after
applying its transforms (`kiln.grad`, `kiln.value_and_grad`, `kiln.vmap`, in order) and returns
its `Specialised` form. A transformed target is traced over its dynamic arguments only:
`dynamic_call` binds the static ones by keyword first (`kiln show`'s grad, jvp and vmap stages
do the same).
"""
import functools
import inspect

import numpy as np

from .. import __version__, staging
from ..ad import grad, value_and_grad
from ..jit import Jitted
from ..tree_util import tree_flatten, tree_flatten_with_path
from ..vmap import vmap
from ..compiler.aot.manifest import path_text
from ..distributed import compiling_for, process_layout
from ..compiler.aot.targets import (AOTError, AOTUsageError, Leaf, Specialised, Target,
                                    describe, exported_name, transforms_of)
from ..compiler.ir.ssa import Function

_APPLY = {   # Transform.kind -> the API applying it
    "grad": lambda f, t: grad(f, argnums=t.option),
    "value_and_grad": lambda f, t: value_and_grad(f, argnums=t.option),
    "vmap": lambda f, t: vmap(f, in_axes=t.option, axis_name=t.axis_name),
}


def compile_library(targets, out_dir, name=None, cpu="native", progress=None, cc=None,
                    processes=None):
    """Compile `targets` (`Target`s or tuples of its fields) into a shared library in
    `out_dir`; returns the manifest (see `kiln.compiler.aot`). `processes`: stage for a run of
    that many MPI processes (a pmap's collectives then span them; default: this process's
    layout, one process outside mpirun)."""
    from ..compiler.aot.library import compile_library as build
    targets = [t if isinstance(t, Target) else Target(*t) for t in targets]
    targets = [t._replace(fn=python_function(t.fn)) for t in targets]
    processes = process_layout()[1] if processes is None else processes
    if not (isinstance(processes, int) and processes >= 1):
        raise AOTUsageError(f"processes must be a whole number of at least 1, not {processes!r}")
    return build(targets, out_dir, specialise=_for_processes(processes), version=__version__,
                 name=name, cpu=cpu, progress=progress, cc=cc, processes=processes)


def _for_processes(processes):
    """`specialise` for a run of `processes` processes: a library serves every process, so the
    code staged for the first and the last must be the same (AOTError otherwise)."""
    if processes == 1 and process_layout()[1] == 1:
        return specialise

    def staged(target):
        with compiling_for(0, processes):
            first = specialise(target)
        with compiling_for(processes - 1, processes):
            last = specialise(target)
        if str(first.function) != str(last.function):
            raise AOTError(
                f"{describe(target)}: its code depends on the process index (axis_index or "
                f"all_gather over a pmap axis that spans the {processes} processes, or their "
                f"derivatives), and one library serves every process; compute the index "
                f"outside (pass it in as an argument) or use psum/pmean/pmax/pmin only")
        return first
    return staged


def compile_cuda_library(targets, out_dir, name=None, archs=("sm_90",), progress=None):
    """Compile `targets` for CUDA into `out_dir`: kernels (.cu, .ptx, .cubin per arch) and a
    manifest of steps that `kiln.aot.load` runs (see `kiln.compiler.aot.cuda`)."""
    from ..compiler.aot.cuda import compile_cuda_library as build
    return _build(build, targets, out_dir, name=name, archs=archs, progress=progress)


def compile_stablehlo_library(targets, out_dir, name=None, progress=None):
    """Compile `targets` to StableHLO modules (.mlir) with a manifest in `out_dir` (see
    `kiln.compiler.aot.stablehlo`)."""
    from ..compiler.aot.stablehlo import compile_stablehlo_library as build
    return _build(build, targets, out_dir, name=name, progress=progress)


def _build(build, targets, out_dir, **options):
    targets = [t if isinstance(t, Target) else Target(*t) for t in targets]
    targets = [t._replace(fn=python_function(t.fn)) for t in targets]
    return build(targets, out_dir, specialise=specialise, version=__version__, **options)


def python_function(fn):
    """The Python function under a `kiln.jit` wrapper."""
    return fn._fun if isinstance(fn, Jitted) else fn


def dynamic_call(fn, args, static_argnums, kwargs):
    """`(function of the dynamic arguments only, their values)`: static positional arguments
    are bound by keyword with the static keyword arguments (so static arguments must come
    after the dynamic ones)."""
    plain = python_function(fn)
    names = list(inspect.signature(plain).parameters)
    statics = dict(kwargs or {})
    dynamic = []
    for i, value in enumerate(args):
        if i in static_argnums:
            if any(j > i and j not in static_argnums for j in range(len(args))):
                raise AOTError("the derivative and vmap transforms need static arguments after "
                               "the dynamic ones (they transform every dynamic positional "
                               "argument)")
            statics[names[i]] = value
        else:
            dynamic.append(value)
    return (functools.partial(plain, **statics) if statics else plain), dynamic


def _transformed(target):
    """(traceable function, its positional arguments, static argnums, static kwargs)."""
    if not target.transforms:
        return python_function(target.fn), tuple(target.args), tuple(target.static_argnums), \
            dict(target.kwargs or {})
    fn, dynamic = dynamic_call(target.fn, target.args, target.static_argnums, target.kwargs)
    for t in transforms_of(target):
        fn = _APPLY[t.kind](fn, t)
    return fn, tuple(dynamic), (), {}


def specialise(target):
    """The Specialised form of `target` (see the module docstring)."""
    fn, args, static_argnums, kwargs = _transformed(target)
    st, _, _ = staging.stage_call(fn, args, kwargs,
                                  staging.StaticArgs(fn, static_argnums, tuple(kwargs)),
                                  api="compiled by kiln compile")
    traced, out_tree = st.fn, st.out_tree
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    names = _parameter_names(python_function(target.fn), target.args, target.static_argnums)
    in_leaves, in_tree = tree_flatten_with_path(dynamic)
    inputs = [Leaf(path_text(names[keys[0].idx], keys[1:]), v.aval)
              for (keys, _), v in zip(in_leaves, traced.invars)]
    out_paths = [path_text("out", keys) for keys, _ in tree_flatten_with_path(
        out_tree.unflatten([0] * out_tree.num_leaves))[0]]
    outputs = [Leaf(path, v.aval) for path, v in zip(out_paths, traced.outvars)]
    name = exported_name(target)
    return Specialised(name, Function(name, traced.invars, traced.eqns, traced.outvars),
                       inputs, outputs, tree_flatten(dynamic)[1], out_tree,
                       [np.asarray(c) for c in st.extra], dict(_statics(target)))


def _parameter_names(fn, args, static_argnums):
    """The name of each dynamic positional argument (`argN` beyond the named parameters)."""
    params = staging.positional_names(fn)
    return [params[i] if i < len(params) else f"arg{i}"
            for i in range(len(args)) if i not in static_argnums]


def _statics(target):
    fn = python_function(target.fn)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    for i in target.static_argnums:
        yield (params[i] if i < len(params) else f"arg{i}"), target.args[i]
    yield from (target.kwargs or {}).items()
