"""The kernels of functions of one equation that have their own generator: primitive name ->
maker(fn) -> source.Kernel, indexing.py's (gathers, scatters, dynamic slices, concatenate)
and scan.py's (the cumulative primitives). source.kernel_source and the executable's plan
look primitives up here."""
from . import indexing, scan

KERNELS = {**indexing.KERNELS, **scan.KERNELS}
