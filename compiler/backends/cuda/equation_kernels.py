"""The kernels of functions of one equation that have their own generator: primitive name ->
maker(fn) -> source.Kernel, indexing.py's (gathers, scatters, dynamic slices, concatenate),
scan.py's (the cumulative primitives) and windows.py's (window reductions, pooling's
derivatives, convolution). source.kernel_source and the executable's plan
look primitives up here."""
from . import indexing, scan, windows

KERNELS = {**indexing.KERNELS, **scan.KERNELS, **windows.KERNELS}
