"""Primitives the StableHLO backend refuses, each with a located BackendUnsupportedError that
says why and what to do (`UNSUPPORTED` lists them; docs/stablehlo.md explains):

- `debug_print`, `pure_callback`, `io_callback`, `debug_callback`: host callbacks; a PJRT module has no way back into this
  Python process.
- reverse mode's tapes (`tape_new`, `tape_push`, `tape_pop`, `tape_add`): a tape grows by one
  record per iteration of a loop whose trip count is data, and StableHLO has only static
  shapes.
- collectives across processes (`process_allreduce`, `process_allgather`, `process_sendrecv`: a
  pmap traced under several MPI processes, a function partitioned over them): they call the MPI engine, which a PJRT module cannot reach.

- `check` (checkify): one that no checkify discharged (`jit` refuses it before any backend sees
  it, with JAX's error); a `debug_check` lowers to nothing.

The collectives over named axes (psum, all_gather, ppermute, ...) lower in a module replicated
over a pmap's or shard_map's devices (lower_collectives.py), and refuse there only what needs
several processes or a module that is not replicated.
"""
from ...primitives import PRIMITIVES
from ...primitives.core import STABLEHLO
from ...primitives.checks import FUNCTIONALIZATION

_WHY = {
    "debug_print": ("is a host callback (print or kiln.debug.print), which a StableHLO module "
                    "cannot make", "remove the print from the compiled function, or run it "
                    "with the llvm or reference backend"),
    "pure_callback": ("calls a Python function on the host (kiln.pure_callback or "
                      "kiln.debug.callback or io_callback), which a "
                      "StableHLO module cannot do", "compute the value outside the compiled "
                      "function and pass it in, or use the llvm or reference backend"),
    "tape": ("records a data-dependent number of loop iterations for reverse mode, and "
             "StableHLO has only static shapes", "differentiate a loop with a static trip "
             "count (lax.fori_loop with static bounds, lax.scan), or use the llvm backend"),
    "process": ("exchanges values with the other MPI processes (kiln.distributed), which a "
                "StableHLO module cannot reach", "run it with the llvm backend"),
}
UNSUPPORTED = {
    "debug_print": "debug_print",
    "pure_callback": "pure_callback",
    "debug_callback": "pure_callback",
    "io_callback": "pure_callback",
    **{name: "tape" for name in ("tape_new", "tape_push", "tape_pop", "tape_add")},
    **{name: "process" for name in ("process_allreduce", "process_allgather",
                                           "process_sendrecv")},
}


def _refuse(reason):
    why, what = _WHY[reason]

    def rule(ctx, args, **params):
        name = ctx.eqn.prim.name
        raise ctx.error(f"the StableHLO backend cannot lower {name!r}: it {why}; {what}")
    return rule


for _name, _reason in UNSUPPORTED.items():
    STABLEHLO[PRIMITIVES[_name]] = _refuse(_reason)


def _check(ctx, args, *, slots, debug=False):
    if debug:
        return []
    raise ctx.error(f"the StableHLO backend cannot lower 'check': {FUNCTIONALIZATION}")


STABLEHLO[PRIMITIVES["check"]] = _check
