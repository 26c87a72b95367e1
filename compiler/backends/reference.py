"""The reference backend: the SSA form executed as Python over NumPy.

`compile_function(fn)` is an `Executable` of primitives/interpret.py: the SSA function's
canonical AST compiled as Python under a namespace binding each primitive's spelling to its
NumPy implementation (the machinery lives with the primitives because control flow's NumPy
implementations run their regions with it). So the program that runs is exactly the program
that `kiln show --stage ssa` prints; every pass is tested by running its input and its output
here.
"""
from ..primitives.interpret import Executable


def compile_function(fn):
    return Executable(fn)
