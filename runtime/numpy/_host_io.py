"""`kiln.numpy` names that work on the host, outside compiled code: printing
(array_repr, array_str, printoptions, get_printoptions, set_printoptions), reading and
writing (frombuffer, fromstring, fromiter, fromfile, load, save, savez), einsum_path, and the
NumPy scalar classes and warning JAX re-exports (object_, character, flexible,
ComplexWarning; `bool` is `bool_`).

Each is NumPy's function on the array's values, the result made a kiln array. Called inside
a compiled function they run while kiln specialises it (on static values), as any Python
code does. `fromiter` and `fromfile` exist here (JAX refuses them: they consume an iterator
or a file, which a traced function could repeat); kiln runs them once, eagerly.
"""
import contextlib

import numpy as np

from ..array import Array
from ._dtypes import bool_
from .. import numpy as jnp

__all__ = ["array_repr", "array_str", "printoptions", "get_printoptions", "set_printoptions",
           "frombuffer", "fromstring", "fromiter", "fromfile", "load", "save", "savez",
           "einsum_path", "object_", "character", "flexible", "ComplexWarning", "bool"]

object_, character, flexible = np.object_, np.character, np.flexible
ComplexWarning = np.exceptions.ComplexWarning
bool = bool_   # noqa: A001  (jnp.bool, the array API's name)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    """`repr` of an array's values, as NumPy formats it."""
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    """`str` of an array's values, as NumPy formats it."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions


@contextlib.contextmanager
def printoptions(*args, **kwargs):
    """NumPy's print options inside a `with` block (kiln arrays print through NumPy)."""
    with np.printoptions(*args, **kwargs) as opts:
        yield opts


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """A 1-D array of the bytes in `buffer` read as `dtype`."""
    return jnp.asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    """A 1-D array of the numbers in the text `string`, separated by `sep`."""
    return jnp.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(iterable, dtype, count=-1, *, like=None):
    """A 1-D array of the values `iterable` yields (consumed once, eagerly)."""
    return jnp.asarray(np.fromiter(iterable, dtype=dtype, count=count))


def fromfile(file, dtype=float, count=-1, sep="", offset=0, *, like=None):
    """A 1-D array read from a binary or text file (read once, eagerly)."""
    return jnp.asarray(np.fromfile(file, dtype=dtype, count=count, sep=sep, offset=offset))


def load(file, *args, **kwargs):
    """`np.load`, with a single array made a kiln array (an `.npz` archive stays NumPy's)."""
    out = np.load(file, *args, **kwargs)
    return jnp.asarray(out) if isinstance(out, np.ndarray) else out


def _host(x):
    return np.asarray(x) if isinstance(x, Array) else x


def save(file, arr, allow_pickle=True):
    """`np.save` of the array's values."""
    np.save(file, _host(arr), allow_pickle=allow_pickle)


def savez(file, *args, allow_pickle=True, **kwds):
    """`np.savez` of the arrays' values."""
    np.savez(file, *[_host(a) for a in args], allow_pickle=allow_pickle,
             **{k: _host(v) for k, v in kwds.items()})


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """NumPy's contraction order for `einsum(subscripts, *operands)` (from the shapes)."""
    arrays = [np.broadcast_to(np.zeros((), np.asarray(o).dtype if not hasattr(o, "dtype")
                                       else o.dtype), np.shape(o)) for o in operands]
    return np.einsum_path(subscripts, *arrays,
                          optimize="greedy" if optimize == "auto" else optimize)
