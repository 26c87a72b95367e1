"""The StableHLO backend: an SSA function as a StableHLO module in MLIR text, for PJRT
plug-ins (XLA's CPU plug-in, libtpu, JAX's CUDA plug-in) and any consumer of StableHLO.

    lower_module(fn, name=None) -> StableHloModule(text, name, in_avals, out_avals)

`fn` is the SSA function after the reference pipeline (`passes.PIPELINES["reference"]`:
simplify; XLA fuses on its own). `emitter` writes the module (names, operations, regions);
`lower_*` modules hold the rules of the `STABLEHLO` table, one family each, registered when
this package is imported; `module` assembles `@main`. docs/stablehlo.md lists what lowers and
what does not.
"""
from . import (lower_elementwise, lower_structural, lower_reductions, lower_indexing,  # noqa: F401
               lower_linalg, lower_sorting, lower_control, lower_fft, lower_convolution,
               lower_windows, lower_decompositions, lower_lu, lower_qr,
               lower_jacobi, lower_svd, lower_collectives, lower_schur, lower_eig,
               lower_ffi, lower_unsupported, lower_manual, lower_processes)
from .module import StableHloModule, lower_module

__all__ = ["StableHloModule", "lower_module"]
