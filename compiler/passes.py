"""The named pass pipelines that every specialised function goes through (Numba style).

`PIPELINE` is an ordered list of `Pass`es: a name, the `Function -> Function` it runs, the name
of the stage its result is (`kiln show --stage simplified`, `kiln compile`'s
`<fn>.simplified.ssa.py`: `STAGES`, the one definition of these names) and what it does; it is
what the reference backend runs. `PIPELINES` names the pipeline of each backend: the LLVM
backend's adds `fuse` after `simplify` (fused chains become one loop nest each).
`run_pipeline` runs them in order and can, after each one:
- verify the result (`verify_each=True`, the environment variable `KILN_VERIFY=1`, which
  the test suite sets, or the `enable_checks` option), so a broken pass is caught at the pass that broke the program;
- dump the printed SSA of every stage (`dump_dir=...`, or `KILN_DUMP_DIR=dir`) to
  `<dir>/<dump_name>.<NN>-<stage>.ssa.py`, where stage 00 is the input (`00-input`) and stage
  NN is the NN-th pass, so that a directory listing reads in pipeline order and repeated
  compilations of one function overwrite the same files.
"""
import os
from typing import Callable, NamedTuple

from .config import config
from .ir.printer import to_source
from .ir.verify import SSAVerificationError, verify
from .transforms import simplify, fuse



class Pass(NamedTuple):
    name: str                  # the pass: "simplify"
    run: Callable              # Function -> Function
    stage: str                 # the stage its result is: "simplified"
    doc: str                   # what it does, for `kiln show`'s list of stages


PIPELINE = [
    Pass("simplify", simplify.simplify, "simplified",
         "constant folding, common subexpressions and dead code removed"),
]

LLVM_PIPELINE = PIPELINE + [
    Pass("fuse", fuse.fuse, "fused",
         "chains of elementwise, broadcast and reduction equations become fusion(...) "
         "equations, one loop nest each"),
]

# "exact": no pass at all, so that the reference backend runs the specialised program as
# the eager operations ran it (runtime/eager_tiers.py's composite units give the eager bits:
# the identities change -0.0 + 0.0 and the operand order of some matrix products).
PIPELINES = {"reference": PIPELINE, "llvm": LLVM_PIPELINE, "exact": []}

# Every stage of the SSA form, in pipeline order: specialised ("ssa"), then each pass's result.
STAGES = ["ssa"] + [p.stage for p in LLVM_PIPELINE]


def through(stage, backend="llvm"):
    """`backend`'s pipeline up to the pass whose result is `stage`."""
    pipeline = PIPELINES[backend]
    ends = [i for i, p in enumerate(pipeline, 1) if p.stage == stage]
    if not ends:
        raise ValueError(f"no stage {stage!r} in the {backend} pipeline; its stages are "
                         + ", ".join(p.stage for p in pipeline))
    return pipeline[:ends[0]]


def _env_verify():
    return os.environ.get("KILN_VERIFY", "").strip().lower() in ("1", "true", "yes", "on") \
        or config.read("enable_checks")


def run_pipeline(fn, verify_each=None, dump_dir=None, dump_name=None, pipeline=None):
    """Run `pipeline` (default `PIPELINE`; `Pass`es or `(name, run)` pairs) on `fn` and return
    the final function.

    `verify_each` defaults to the `KILN_VERIFY` environment variable and `dump_dir` to
    `KILN_DUMP_DIR`, else the `dump_ir_to` option (JAX's `jax_dump_ir_to`, or
    `JAX_DUMP_IR_TO`); `dump_name` (default: the function's name) prefixes the dumped files.
    """
    if verify_each is None:
        verify_each = _env_verify()
    dump_dir = (dump_dir or os.environ.get("KILN_DUMP_DIR") or config.read("dump_ir_to")
                or os.environ.get("JAX_DUMP_IR_TO") or None)
    stages = PIPELINE if pipeline is None else pipeline
    dump = _Dumper(dump_dir, dump_name or fn.name) if dump_dir else None
    if verify_each:
        _verify(fn, "input")
    if dump:
        dump.write(0, "input", fn)
    for i, (name, run, *_) in enumerate(stages, 1):   # Passes, or (name, run) pairs
        fn = run(fn)
        if verify_each:
            _verify(fn, name)
        if dump:
            dump.write(i, name, fn)
    return fn


def _verify(fn, stage):
    """`verify`, with the stage that produced the malformed function named in the error."""
    try:
        verify(fn)
    except SSAVerificationError as e:
        raise SSAVerificationError(f"after stage {stage!r}: {e}") from None


class _Dumper:
    def __init__(self, directory, name):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.name = name

    def write(self, index, stage, fn):
        path = os.path.join(self.directory, f"{self.name}.{index:02d}-{stage}.ssa.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_source(fn))
        return path
