"""Finding the BLAS routines generated code calls, in this process (no llvmlite needed).

Two providers, both OpenBLAS's Fortran interface, differing in the width of their INTEGER
arguments:
- "numpy-openblas64": the ILP64 OpenBLAS that NumPy's wheels bundle (64-bit integers). It is loaded
  with NumPy already, so finding a routine costs a dlsym (~0.1 ms).
- "scipy-cython_blas": `scipy.linalg.cython_blas` (and `cython_lapack`, for LAPACK's routines)
  export each routine as a PyCapsule in `__pyx_capi__` (32-bit integers); opening one with ctypes costs importing scipy.linalg and loading
  its OpenBLAS, about 0.2-0.5 s in a fresh process.
`library()` picks the first available (`KILN_BLAS=scipy` forces SciPy's); `address(name)` gives a
routine's address in it, `thread_setter()` its `openblas_set_num_threads` (blas.py sets the
library to one thread: kiln's thread pool splits large products itself) and `openblas_threads()` its
current count. `with_int_bits(bits)` finds the provider with a given integer width: the
loader of ahead-of-time compiled libraries (kiln.aot) binds their BLAS calls with it, without
importing llvmlite, which blas.py (the IR emitters) needs.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np


# the routines generated code may call: BLAS's, and the LAPACK routines of lower_decompositions.py
# (the same OpenBLAS exports both; SciPy's through cython_lapack)
ROUTINES = ("sgemm", "dgemm", "sgemv", "dgemv", "cgemm", "zgemm", "cgemv", "zgemv",
            "strsm", "dtrsm", "ctrsm", "ztrsm", "spotrf", "dpotrf", "cpotrf", "zpotrf",
            "sgetrf", "dgetrf", "cgetrf", "zgetrf", "sgeqrf", "dgeqrf", "cgeqrf", "zgeqrf",
            "sorgqr", "dorgqr", "cungqr", "zungqr", "ssyevd", "dsyevd", "cheevd", "zheevd",
            "sgesdd", "dgesdd", "cgesdd", "zgesdd", "sgeev", "dgeev", "cgeev", "zgeev",
            "sgees", "dgees", "cgees", "zgees", "sgehrd", "dgehrd", "cgehrd", "zgehrd")
# OpenBLAS's thread count setter (its Fortran form: a pointer to an INTEGER)
THREAD_SETTER = "openblas_set_num_threads"


class Library(NamedTuple):
    name: str
    int_bits: int
    lookup: Callable[[str], int | None]  # routine name -> address, None if absent


def _numpy_openblas() -> Library | None:
    """NumPy's bundled ILP64 OpenBLAS (wheels put it in numpy.libs/ or numpy/.dylibs/), if any."""
    package = Path(np.__file__).parent
    for path in sorted([*package.parent.glob("numpy.libs/*openblas64*"), *package.glob(".dylibs/*openblas64*")]):
        handle = ctypes.CDLL(str(path))
        for pattern in ("scipy_{}_64_", "{}_64_"):
            if hasattr(handle, pattern.format("sgemm")):
                return Library("numpy-openblas64", 64, lambda name, h=handle, p=pattern: _symbol(h, p.format(name)))
    return None


def _symbol(handle: ctypes.CDLL, symbol: str) -> int | None:
    function = getattr(handle, symbol, None)
    return None if function is None else ctypes.cast(function, ctypes.c_void_p).value


def _scipy_cython_blas() -> Library:
    return Library("scipy-cython_blas", 32, _capsule_address)


def _capsule_address(name: str) -> int | None:
    from scipy.linalg import cython_blas, cython_lapack
    capsule = cython_blas.__pyx_capi__.get(name) or cython_lapack.__pyx_capi__.get(name)
    if capsule is None:
        return None
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))


@functools.cache
def library() -> Library:
    """The BLAS generated code calls in this process (see the module docstring)."""
    choice = os.environ.get("KILN_BLAS", "").strip().lower()
    if choice not in ("", "numpy", "scipy"):
        raise ValueError(f"KILN_BLAS={choice!r}: use 'numpy' (NumPy's bundled OpenBLAS, the default when "
                         f"present) or 'scipy' (scipy.linalg.cython_blas)")
    return (choice != "scipy" and _numpy_openblas()) or _scipy_cython_blas()


@functools.cache
def address(name: str) -> int:
    """Address of the BLAS routine `name` ('sgemm', 'dgemv', ...) in `library()`."""
    found = library().lookup(name)
    if not found:
        raise ValueError(f"the BLAS library {library().name} has no routine {name!r}")
    return found


def openblas_address(routine: str) -> int | None:
    """The address of OpenBLAS's own function `routine` ('openblas_set_num_threads',
    'openblas_get_num_threads': their Fortran forms, integers by pointer) in `library()`, None
    when the library has none. SciPy's cython_blas exports no such capsule: it is looked up in
    SciPy's bundled OpenBLAS."""
    found = library().lookup(routine)
    if not found and library().name == "scipy-cython_blas":
        import scipy.linalg.cython_blas  # noqa: F401  (loads SciPy's OpenBLAS into the process)
        paths = Path(np.__file__).parent.parent.glob("scipy.libs/*openblas*")
        found = next(filter(None, (_symbol(ctypes.CDLL(str(p)), f"scipy_{routine}_")
                                   for p in sorted(paths))), None)
    return found or None


@functools.cache
def thread_setter() -> Callable[[int], None] | None:
    """OpenBLAS's `openblas_set_num_threads` in `library()` as a Python callable, or None when
    the library has none (it is then left to its own settings)."""
    found = openblas_address(THREAD_SETTER)
    if not found:
        return None
    integer = ctypes.c_int64 if library().int_bits == 64 else ctypes.c_int32
    function = ctypes.CFUNCTYPE(None, ctypes.POINTER(integer))(found)
    return lambda count: function(ctypes.byref(integer(count)))


def openblas_threads() -> int | None:
    """OpenBLAS's thread count as `openblas_get_num_threads` reports it now, None when the
    library has no such function."""
    found = openblas_address("openblas_get_num_threads")
    return None if not found else ctypes.CFUNCTYPE(ctypes.c_int)(found)()


@functools.cache
def with_int_bits(bits: int) -> Library | None:
    """A BLAS of this process whose INTEGER arguments have `bits` bits (64: NumPy's OpenBLAS,
    32: SciPy's), `library()` first; None if there is none (SciPy missing, say)."""
    current = library()
    if current.int_bits == bits:
        return current
    if bits == 64:
        return _numpy_openblas()
    if bits == 32:
        try:
            import scipy.linalg.cython_blas  # noqa: F401
        except ImportError:
            return None
        return _scipy_cython_blas()
    return None
