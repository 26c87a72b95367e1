"""`kiln.Array`: the immutable array users hold.

An Array owns a device buffer (a NumPy array on the CPU) and a `weak_type` flag. It is
immutable: item assignment raises with the `.at[]` rewrite, and NumPy views handed out by
`__array__` are read-only. Operators and methods are thin forwards to `kiln.numpy`, so eager
code and compiled code share one definition of every operation. Arrays are unhashable, like
JAX's.

Eager operations may leave an Array's buffer strided: `jnp.zeros`/`ones`/`full` and
`broadcast_to` hold stride-0 broadcasts of one element, transposes and slices hold views.
An Array may carry a sharding (`placed_on`: `device_put` onto devices, pmap's and shard_map's
results): metadata over its one host buffer, which every CPU device shares. An Array spread
over several PJRT devices holds one buffer per device instead (pjrt_spread.py); its layer
answers its sharding, shards and `x[i]`. An array spanning
several processes is the subclass `GlobalArray` (global_arrays.py).

Compiled code reads C-contiguous buffers; `Array._dense()` gives it one, copying a strided buffer the
first time and keeping the copy in its place (the Array is immutable, so only memory can tell:
a broadcast `jnp.ones((n, n))` grows to n*n elements, as JAX's always has them). The copy is
made under one lock, so threads passing the same fresh Array at once copy it once.
"""
import threading
import weakref

import numpy as np

from . import dispatch
from .compiler.ir import dtypes
from .compiler.primitives.quiet import ignore as _quiet, restore as _restore
from .compiler.backends.cuda.device import DeviceBuffer

_SCALARS = (int, float, complex, bool, np.generic)
_SHARDINGS = {}   # id(array) -> its sharding, for arrays given one (placed_on); others: device 0
# ids of the placed arrays split over an Explicit mesh axis (sharding_types), placed over a
# mesh of Auto axes, or committed to a shape-free sharding (one device, a whole-array
# NamedSharding): the results of operations on them are placed by sharding_propagation.py
TYPED = set()
_DENSE_LOCK = threading.Lock()   # Array._dense: one copy of an array whatever the threads


def placed_on(array, sharding):
    """`array`, now reporting `sharding` (kept beside it until it is collected: arrays that
    were never placed pay nothing). Returns `array`."""
    from .sharding_types import type_sharding
    from .sharding_propagation import auto_mesh, shape_free
    key = id(array)
    if key not in _SHARDINGS:
        weakref.finalize(array, _forget, key)
    _SHARDINGS[key] = sharding
    if shape_free(sharding) or type_sharding(sharding, len(array.shape)) is not None or \
            auto_mesh(sharding) is not None:
        TYPED.add(key)
    else:
        TYPED.discard(key)
    return array


def placed_sharding(array):
    """The sharding `placed_on` gave `array`, or None."""
    return _SHARDINGS.get(id(array))


def _forget(key):
    _SHARDINGS.pop(key, None)
    TYPED.discard(key)


def dense_copy(value):
    """A C-contiguous, aligned, writable copy of ndarray `value` (Array._dense's one copy)."""
    return np.array(value, order="C")


def _jnp():
    from . import numpy as jnp
    return jnp


class ArrayMethods:
    """What kiln arrays and the compiler's traced values share: NumPy-style operators and
    methods, all forwarding to `kiln.numpy` (installed below), and immutability."""

    __slots__ = ()
    __array_priority__ = 100
    __hash__ = None

    @property
    def T(self):
        return _jnp().transpose(self)

    @property
    def mT(self):
        return _jnp().matrix_transpose(self)

    @property
    def real(self):
        return _jnp().real(self)

    @property
    def imag(self):
        return _jnp().imag(self)

    @property
    def at(self):
        return _AtIndexer(self)

    def __setitem__(self, idx, value):
        raise TypeError("kiln arrays are immutable and do not support in-place item "
                        "assignment. Instead of x[idx] = y, use x = x.at[idx].set(y) or another "
                        ".at[] method (add, multiply, min, max, ...).")

    def __getitem__(self, idx):
        from .numpy import _indexing
        return _indexing.getitem(self, idx)

    # ------------------------------------------------------------------ array methods
    def astype(self, dtype, copy=False, device=None):
        return _jnp().astype(self, dtype)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return _jnp().reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = axes[0]
        return _jnp().transpose(self, axes or None)

    def view(self, dtype=None):
        """Reinterpret the bits as `dtype` (same item size), as `ndarray.view`."""
        if dtype is None:
            return self
        from . import lax
        target = _jnp().dtype(dtype)
        if target.itemsize != self.dtype.itemsize:
            raise ValueError(f"view: kiln supports only views with the same item size, got "
                             f"{self.dtype} -> {target}; use lax.bitcast_convert_type")
        return lax.bitcast_convert_type(self, target)

    def __abs__(self):
        return _jnp().abs(self)

    def __neg__(self):
        return _jnp().negative(self)

    def __pos__(self):
        return _jnp().positive(self)

    def __invert__(self):
        return _jnp().invert(self)

    def __round__(self, ndigits=None):
        out = _jnp().round(self, ndigits or 0)
        return out.astype(int) if ndigits is None else out


class Array(ArrayMethods):
    """An immutable n-dimensional array (JAX's `jax.Array`)."""

    __slots__ = ("_value", "weak_type", "__weakref__")

    # --------------------------------------------------------------------- construction
    def __init__(self, value, weak_type=False):
        self._value = value if type(value) is DeviceBuffer else np.asarray(value)
        self.weak_type = bool(weak_type)

    def __getitem__(self, idx):
        v = self._value
        if type(v) is DeviceBuffer and hasattr(v.layer, "getitem"):   # pjrt_spread.py
            block = v.layer.getitem(v.data, idx, self.weak_type)
            if block is not None:
                return block
        return ArrayMethods.__getitem__(self, idx)

    # ------------------------------------------------------------------------ metadata
    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def ndim(self):
        return self._value.ndim

    @property
    def size(self):
        return self._value.size

    @property
    def itemsize(self):
        return self._value.itemsize

    @property
    def nbytes(self):
        return self._value.nbytes

    @property
    def aval(self):
        from .compiler.ir.abstract import ShapedArray
        return ShapedArray(self._value.shape, self._value.dtype, self.weak_type)

    @property
    def flat(self):
        return iter(_jnp().ravel(self))

    # ------------------------------------------------------------ devices and sharding
    @property
    def sharding(self):
        """Where this array's blocks live (kiln.sharding): what device_put, pmap, shard_map or
        jit's out_shardings gave it, else the SingleDeviceSharding of its GPU (a device
        buffer), of the default device in force when that is a CPU device
        (kiln.default_device), or of CPU device 0."""
        placed = _SHARDINGS.get(id(self))
        if placed is not None:
            return placed
        from .sharding import SingleDeviceSharding
        from .devices import devices, gpu_device
        from . import _default_device as default_device
        if type(self._value) is DeviceBuffer:
            layer = self._value.layer
            spread = getattr(layer, "sharding_of", None)   # several PJRT devices (pjrt_spread)
            if spread is not None:
                return spread(self._value.data)
            # a PJRT device's layer knows its device (pjrt.py)
            return SingleDeviceSharding(getattr(layer, "kiln_device", None) or gpu_device(layer))
        default = default_device.current()
        if default is not None and default.platform == "cpu":
            return SingleDeviceSharding(default)
        return SingleDeviceSharding(devices("cpu")[0])

    def devices(self):
        return self.sharding.device_set

    @property
    def format(self):
        """This array's layout (row-major, the only one kiln has) and sharding, as a
        `kiln.experimental.layout.Format`."""
        from .layouts import Format, row_major
        return Format(row_major(self.ndim), self.sharding)

    @property
    def committed(self):
        """Whether this array is committed to its devices, as JAX says: placed there by
        `device_put` onto a device or sharding (or pmap, shard_map, jit's `out_shardings`), or
        computed from such an array (whose results keep its sharding). Operations on
        arrays committed to different devices are a ValueError; uncommitted arrays go where
        the committed operands are."""
        return id(self) in _SHARDINGS

    @property
    def device(self):
        placed = self.sharding
        if placed.num_devices != 1:
            raise ValueError(f"Array.device is ambiguous for an array on {placed.num_devices} "
                             f"devices ({placed}); use .devices() or .sharding")
        return next(iter(placed.device_set))

    @property
    def addressable_shards(self):
        """This process's devices' blocks (Shard objects; their data are views of this
        array)."""
        v = self._value
        if type(v) is DeviceBuffer and hasattr(v.layer, "shards"):   # pjrt_spread.py
            return v.layer.shards(v.data, self.weak_type)
        from .sharding import shards
        return shards(self, self.sharding)

    @property
    def global_shards(self):
        """Every device's block; other processes' devices' `data` is None (JAX's)."""
        from .sharding import shards
        return shards(self, self.sharding, addressable=False)

    @property
    def is_fully_replicated(self):
        return self.sharding.is_fully_replicated

    @property
    def is_fully_addressable(self):
        return self.sharding.is_fully_addressable

    # -------------------------------------------------------------------- conversions
    def __array__(self, dtype=None, copy=None):
        v = self._value
        if type(v) is DeviceBuffer:   # a copy to the host: already a fresh array
            v = v.to_host()
            return v.astype(dtype) if dtype is not None and np.dtype(dtype) != v.dtype else v
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        view = v.view()
        view.flags.writeable = False
        return view

    def _host(self):
        """The value as a NumPy array: the buffer itself on the host, a copy of a device
        buffer (Python conversions: bool(), int(), repr(), item(), iteration ...)."""
        v = self._value
        return v.to_host() if type(v) is DeviceBuffer else v

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        v = self._value
        v = v.data if type(v) is DeviceBuffer else np.ascontiguousarray(v)
        if max_version is None:
            return v.__dlpack__(stream=stream)
        return v.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        v = self._value
        return (v.data if type(v) is DeviceBuffer else v).__dlpack_device__()

    def block_until_ready(self):
        v = self._value
        if type(v) is DeviceBuffer:
            ready = getattr(v.data, "block_until_ready", None)   # a PJRT buffer's ready event
            if ready is not None:
                ready()
            else:
                v.layer.synchronize()
        return self

    def _dense(self):
        """This array's buffer as a C-contiguous, aligned ndarray: the buffer itself when it
        is one, else a copy made once and kept as the buffer from then on (see the module
        docstring). What jitted code is handed; a deleted array raises."""
        v = self._value
        flags = v.flags
        if flags.c_contiguous and flags.aligned:
            return v
        with _DENSE_LOCK:
            v = self._value
            if not (v.flags.c_contiguous and v.flags.aligned):
                v = self._value = dense_copy(v)
        return v

    def delete(self):
        """Release this array's buffer (JAX's `Array.delete`); any later use raises. A jitted
        function deletes the arguments whose buffers it took over (`donate_argnums`)."""
        if not self.is_deleted():
            self._value = _Deleted(self._value)

    def is_deleted(self):
        return type(self._value) is _Deleted

    def copy_to_host_async(self):
        return None

    def item(self, *args):
        return self._host().item(*args)

    def tolist(self):
        return self._host().tolist()

    def __bool__(self):
        if self._value.size == 0:
            raise ValueError("The truth value of an empty array is ambiguous. Use "
                             "`array.size > 0` to check that an array is not empty.")
        if self._value.size != 1:
            raise ValueError(f"The truth value of an array with more than one element is "
                             f"ambiguous (shape {self.shape}). Use a.any() or a.all()")
        return bool(self._host())

    def __int__(self):
        return int(self._scalar("int"))

    def __float__(self):
        return float(self._scalar("float"))

    def __complex__(self):
        return complex(self._scalar("complex"))

    def __index__(self):
        if self._value.dtype.kind not in "iu" or self._value.ndim:
            raise TypeError(f"only integer scalar arrays can be converted to a scalar index, "
                            f"got {self.aval.str_short()}")
        return int(self._host())

    def _scalar(self, what):
        if self._value.ndim:
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got "
                            f"arr.ndim={self.ndim} (shape {self.shape}) for {what}(); "
                            f"index or reshape to a 0-d array first")
        return self._host()[()]

    def __len__(self):
        if not self._value.ndim:
            raise TypeError("len() of unsized object")
        return self._value.shape[0]

    def __iter__(self):
        if not self._value.ndim:
            raise TypeError("iteration over a 0-d array")
        return (_wrap(np.asarray(row), self.weak_type) for row in self._host())

    def __reversed__(self):
        return iter(self[::-1])

    def __format__(self, spec):
        if self._unreduced() is not None:
            return repr(self)
        v = self._host()
        return format(v if v.ndim else v[()], spec)

    def _unreduced(self):
        """Its sharding when that is unreduced over some mesh axes, else None."""
        placed = _SHARDINGS.get(id(self))
        return placed if getattr(getattr(placed, "spec", None), "unreduced", None) else None

    def __repr__(self):
        v = self._value
        if type(v) is _Deleted:
            return f"Array(<deleted: {v.what}>)"
        dtype_str = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        unreduced = self._unreduced()
        if unreduced is not None:   # as JAX: the parts are not the value, so no value shown
            return f"Array(shape={self.shape}, {dtype_str}, sharding={unreduced})"
        v = self._host()
        width = np.get_printoptions()["linewidth"]
        if v.size == 0:
            body = f"[], shape={v.shape}"
        else:
            body = np.array2string(v, prefix="Array(", suffix=",", separator=", ",
                                   max_line_width=width)
        last_line = len(body) - body.rfind("\n") + 1
        sep = " " * len("Array(") if last_line + len(dtype_str) + 2 > width else " "
        return f"Array({body},{sep}{dtype_str})"

    def __str__(self):
        return repr(self) if self._unreduced() is not None else str(self._host())

    def __reduce__(self):
        return (_rebuild, (self._host(), self.weak_type))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

class _Deleted:
    """The `_value` of a deleted Array: reading anything of it raises JAX's error."""
    __slots__ = ("what",)

    def __init__(self, value):
        self.what = f"{value.dtype.name}[{','.join(map(str, value.shape))}]"

    def __getattr__(self, name):
        raise RuntimeError(f"Array has been deleted with shape={self.what}. It was donated to "
                           f"a jitted function (donate_argnums / donate_argnames), which "
                           f"reused its buffer: use that function's result instead.")

    def __array__(self, *args, **kwargs):
        return self.__getattr__("__array__")


def _rebuild(value, weak):
    return _wrap(value, weak)


def _wrap(value, weak_type=False):
    arr = object.__new__(Array)
    arr._value = value
    arr.weak_type = weak_type
    return arr


dispatch.Array = Array
dispatch.TYPED = TYPED


# ------------------------------------------------------------------ operators as forwards

def _binop(name, reflected=False):
    fn = None

    def op(self, other):
        nonlocal fn
        if fn is None:
            fn = getattr(_jnp(), name)
            fn = getattr(fn, "_call", None) or fn  # a ufunc's function: one call less
        t = type(other)
        if t is not Array and not isinstance(other, (np.ndarray,) + _SCALARS) and \
                getattr(t, "_kiln_trace", None) is None:
            if t in (list, tuple, set, dict):  # as JAX: never let list * array repeat the list
                raise TypeError(f"unsupported operand type(s) for {name}: 'Array' and "
                                f"{t.__name__!r}")
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)
    op.__name__ = name
    return op


_BINOPS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift", "divmod": "divmod",
}
for _dunder, _fn in _BINOPS.items():
    setattr(ArrayMethods, f"__{_dunder}__", _binop(_fn))
    setattr(ArrayMethods, f"__r{_dunder}__", _binop(_fn, reflected=True))
for _dunder, _fn in {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                     "gt": "greater", "ge": "greater_equal"}.items():
    setattr(ArrayMethods, f"__{_dunder}__", _binop(_fn))


def _method(name):
    def method(self, *args, **kwargs):
        return getattr(_jnp(), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "all",
              "any", "cumsum", "cumprod", "ravel", "squeeze", "clip", "round", "dot", "conj",
              "conjugate", "swapaxes", "take", "repeat", "sort", "argsort", "nonzero", "trace",
              "diagonal", "flatten", "ptp", "searchsorted", "argpartition", "compress", "copy",
              "nansum", "nanmean"):
    if _name == "flatten":
        setattr(ArrayMethods, _name, _method("ravel"))
    else:
        setattr(ArrayMethods, _name, _method(_name))


# ------------------------------------------------------------------------------- .at[]

class _AtIndexer:
    """`x.at[idx]`: functional updates. Out-of-bounds updates are dropped, reads clamp."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx)


class _IndexUpdateRef:
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def _update(self, op, values, **kw):
        from .numpy import _indexing
        return _indexing.update(self.array, self.index, values, op, **kw)

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
        from .numpy import _indexing
        return _indexing.getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, **kw):
        return self._update("set", values, **kw)

    def add(self, values, **kw):
        return self._update("add", values, **kw)

    def subtract(self, values, **kw):
        return self._update("subtract", values, **kw)

    def multiply(self, values, **kw):
        return self._update("multiply", values, **kw)

    mul = multiply

    def divide(self, values, **kw):
        return self._update("divide", values, **kw)

    def power(self, values, **kw):
        return self._update("power", values, **kw)

    def min(self, values, **kw):
        return self._update("min", values, **kw)

    def max(self, values, **kw):
        return self._update("max", values, **kw)

    def apply(self, func, **kw):
        return self._update("apply", func, **kw)


# ------------------------------------------------------------------------------ conversion

def to_array(x, what="argument"):
    """Convert a value to an Array (or pass a traced value through), JAX style.

    Python scalars become weakly typed arrays of the default dtype (bool stays strong);
    NumPy arrays and scalars keep their dtype, narrowed when x64 is off.
    """
    t = type(x)
    if t is Array or getattr(t, "_kiln_trace", None) is not None:
        return x
    if t in (int, float, complex, bool):
        dtype, weak = dtypes.python_scalar_dtype(x)
        if t is int:
            _check_int_range(x, dtype)
            return _wrap(np.asarray(x, dtype), weak)
        token = _quiet()   # a float beyond float32's range becomes inf without NumPy's warning
        try:
            value = np.asarray(x, dtype)
        finally:
            _restore(token)
        return _wrap(value, weak)
    if isinstance(x, (np.ndarray, np.generic)):
        v = np.asarray(x)
        if v.dtype.kind not in "biufc":
            raise TypeError(f"{what}: NumPy arrays of dtype {v.dtype} are not valid kiln arrays")
        cd = dtypes.canonicalize(v.dtype)
        return _wrap(v.astype(cd) if cd != v.dtype else v, False)
    if hasattr(x, "__jax_array__"):
        return to_array(x.__jax_array__(), what)
    if isinstance(x, Array):   # a GlobalArray (global_arrays.py): no value in one process
        from .global_arrays import spanning_error
        raise spanning_error(x.shape, x.dtype)
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{what}: expected an array or scalar, got a {t.__name__}; convert it "
                        f"with kiln.numpy.asarray first")
    raise TypeError(f"{what}: value of type {t.__name__} is not a valid kiln array type")


def _check_int_range(x, dtype):
    info = np.iinfo(dtype)
    if not info.min <= x <= info.max:
        raise OverflowError(f"Python int {x} too large to convert to {dtype}")
