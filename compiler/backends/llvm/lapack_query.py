"""LAPACK workspace queries at compile time (`lwork = -1`), so generated code calls each
routine with a workspace of a size fixed in the code: one query per routine and shape, made
in this process through the routine's function pointer (blas_lookup.address) with ctypes.

`workspace(name, args, work, minimum)`: the optimal workspace length (in elements) that routine
`name` reports for `args`, a tuple of `Int(v)`, `Char(c)` and `Array(dtype, length)` (scratch
arrays for the query; LAPACK reads none of their values then). The `lwork` argument is
`Int(-1)` in `args`, the query's work array `Array(dtype, 1)` at index `work`. The result is at
least `minimum` (LAPACK's documented minimum): a library that answers less for the same shape
(an AOT library loaded beside another LAPACK) is still given a valid size. Routines with
several workspaces (syevd's work and iwork) answer in each: `work` and `minimum` are then
tuples, and so is the result.
"""
from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import numpy as np

from . import blas_lookup


class Int(NamedTuple):
    value: int


class Char(NamedTuple):
    value: str


class Array(NamedTuple):
    dtype: str
    length: int


@functools.cache
def workspace(name: str, args: tuple, work: int, minimum: int) -> int:
    integer = np.int64 if blas_lookup.library().int_bits == 64 else np.int32
    keep, pointers = [], []
    for arg in args:
        if isinstance(arg, Int):
            value = np.array([arg.value], integer)
        elif isinstance(arg, Char):
            value = np.array([ord(arg.value)], np.uint8)
        else:
            value = np.zeros(max(1, arg.length), arg.dtype)
        keep.append(value)
        pointers.append(value.ctypes.data_as(ctypes.c_void_p))
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(args))(
        blas_lookup.address(name))
    function(*pointers)
    if isinstance(work, tuple):
        return tuple(max(int(keep[i][0].real), least, 1) for i, least in zip(work, minimum))
    return max(int(keep[work][0].real), minimum, 1)
