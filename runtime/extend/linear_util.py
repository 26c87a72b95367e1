"""`kiln.extend.linear_util`: JAX's wrapped functions (`jax.extend.linear_util`), the form in
which libraries hand a function and transformations of it to `jax.api_util`.

`wrap_init(f, params, debug_info=...)` makes a `WrappedFun`; a transformation adds a layer
around it, and `call_wrapped(*args)` calls the outermost layer, which calls the next, down to
`f` (with `params` as keywords). A transformation with an auxiliary output (`flatten_fun`'s
output tree) writes it to a `Store` when the wrapped function is called; the thunk the
transformation returned reads it then (`StoreException` before that, and on a second write).
kiln has no tracing of its own to apply to a WrappedFun: `call_wrapped` is an ordinary Python
callable, which `kiln.jit`, `make_jaxpr` and the other transformations take like any other.
While kiln specialises it, the function and the transformations' own functions are called as
the user's code is (their source walked, so that Python `if` and `isinstance` on traced values
behave as they do in a jitted function).

`transformation2`, `transformation_with_aux2` and their older generator forms
`transformation` and `transformation_with_aux` are JAX's. `cache` and `merge_linear_aux`
(JAX's memoisation of its traces and its linearisation helper) are not here.
"""
import functools
import inspect
from typing import Any, NamedTuple

from ..compiler.ir.builder import current

__all__ = ["StoreException", "WrappedFun", "transformation", "transformation_with_aux",
           "transformation2", "transformation_with_aux2", "wrap_init"]


def _call(fn, fixed, *args, **kwargs):
    """`fn(*fixed, *args, **kwargs)`, walked by kiln's specialiser while it specialises."""
    if current() is None:
        return fn(*fixed, *args, **kwargs)
    from ..compiler.frontend.specialise import call_function
    return call_function(fn, [*fixed, *args], kwargs)


class StoreException(Exception):
    """A Store read before a value was written, or written twice."""


class Store:
    """Holds one auxiliary output of a transformation, written once per call."""
    __slots__ = ("_val",)
    _EMPTY = object()

    def __init__(self):
        self._val = Store._EMPTY

    def store(self, val):
        if self._val is not Store._EMPTY:
            raise StoreException("Store occupied")
        self._val = val

    def reset(self):
        self._val = Store._EMPTY

    @property
    def val(self):
        if self._val is Store._EMPTY:
            raise StoreException("Store empty")
        return self._val


class EqualStore(Store):
    """A Store that also accepts a second write of a value equal to the one it holds (JAX's
    `use_eq_store=True`: the same function run twice, say by two branches, writes its
    auxiliary output twice)."""
    __slots__ = ()

    def store(self, val):
        if self._val is not Store._EMPTY:
            try:
                same = bool(val == self._val)
            except Exception:   # arrays, or values whose == is not a truth value
                same = False
            if not same:
                raise StoreException("Store occupied with not-equal value")
            return
        self._val = val


class DebugInfo(NamedTuple):
    """What a transformation knows of the function it was given: `traced_for` (the
    transformation's name), `func_src_info` (`'name at file:line'`), `arg_names` (the paths of
    the flattened arguments, or None) and `result_paths` (of the flattened results, or None,
    or a thunk giving them)."""
    traced_for: str
    func_src_info: str
    arg_names: Any
    result_paths: Any

    @property
    def func_name(self):
        return self.func_src_info.split(" ")[0]

    def resolve_result_paths(self):
        """This DebugInfo with a thunk for `result_paths` replaced by its value."""
        if callable(self.result_paths):
            return self._replace(result_paths=tuple(self.result_paths()))
        return self

    def replace_func_name(self, name):
        return self._replace(func_src_info=" ".join([name] + self.func_src_info.split(" ")[1:]))

    def with_unknown_names(self):
        return self._replace(arg_names=None, result_paths=None)


class WrappedFun:
    """`f` under a stack of transformations (`transforms`, innermost last); `call_wrapped`
    calls the outermost. `stores` hold the auxiliary outputs of the transformations."""
    __slots__ = ("f", "f_transformed", "transforms", "stores", "params", "in_type",
                 "debug_info")

    def __init__(self, f, f_transformed, transforms, stores, params, in_type, debug_info):
        self.f = f
        self.f_transformed = f_transformed
        self.transforms = transforms
        self.stores = stores
        self.params = params
        self.in_type = in_type
        self.debug_info = debug_info

    @property
    def __name__(self):
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, gen, gen_static_args, out_store):
        """This function with the transformation `gen` added on the outside: `gen(inner,
        [out_store,] *gen_static_args, *args, **kwargs)`."""
        store_arg = () if out_store is None else (out_store,)
        return WrappedFun(self.f,
                          functools.partial(_call, gen, (self.f_transformed, *store_arg,
                                                         *gen_static_args)),
                          ((gen, gen_static_args),) + self.transforms,
                          (out_store,) + self.stores, self.params, None, self.debug_info)

    def populate_stores(self, stores):
        """Copy the values of `stores` (another WrappedFun's, after a call) into this one's."""
        for mine, other in zip(self.stores, stores):
            if mine is not None:
                mine.store(other.val)

    def call_wrapped(self, *args, **kwargs):
        """Call the transformed function."""
        return self.f_transformed(*args, **kwargs)

    def replace_debug_info(self, debug_info):
        return WrappedFun(self.f, self.f_transformed, self.transforms, self.stores,
                          self.params, self.in_type, debug_info)

    def with_unknown_names(self):
        return self.replace_debug_info(self.debug_info.with_unknown_names())

    def __repr__(self):
        layers = "".join(f"{i}   : {getattr(gen, '__name__', gen)}   {args}\n"
                         for i, (gen, args) in enumerate(self.transforms))
        return f"Wrapped function:\n{layers}Core: {self.__name__}\n"

    def __hash__(self):
        return hash((self.f, self.transforms, self.params, self.in_type, self.debug_info))

    def __eq__(self, other):
        return isinstance(other, WrappedFun) and \
            (self.f, self.transforms, self.params, self.in_type, self.debug_info) == \
            (other.f, other.transforms, other.params, other.in_type, other.debug_info)


def _curried(transform):
    """JAX's currying of the transformations: `transformation2(gen)` (as a decorator) is
    `partial(transform, gen)`, so `t(fun, *static)` applies it, and `transformation2(gen, fun,
    *static)` is a partial to call with no arguments."""
    return functools.partial(functools.partial, transform)


@_curried
def transformation2(gen, fun, *gen_static_args):
    """`fun` with `gen(inner, *gen_static_args, *args, **kwargs)` around it."""
    return fun.wrap(gen, gen_static_args, None)


@_curried
def transformation_with_aux2(gen, fun, *gen_static_args, use_eq_store=False,
                             unk_names=False):
    """`(fun with gen around it, thunk)`: `gen(inner, store, *gen_static_args, *args,
    **kwargs)` writes an auxiliary output to `store`, which `thunk()` returns after a call
    (with `use_eq_store`, an `EqualStore`: a second write of an equal value is accepted)."""
    store = EqualStore() if use_eq_store else Store()
    fun = fun.wrap(gen, gen_static_args, store)
    return (fun.with_unknown_names() if unk_names else fun), (lambda: store.val)


@_curried
def transformation(gen, fun, *gen_static_args):
    """The older form: `gen(*gen_static_args, *args)` is a generator that yields the inner
    call's `(args, kwargs)`, is sent its result and yields the transformed result."""
    def layer(f, *args, **kwargs):
        it = gen(*args, **kwargs)
        inner_args, inner_kwargs = next(it)
        return it.send(f(*inner_args, **inner_kwargs))
    layer.__name__ = getattr(gen, "__name__", "transformation")
    return transformation2(layer, fun, *gen_static_args)()


@_curried
def transformation_with_aux(gen, fun, *gen_static_args):
    """The older form of `transformation_with_aux2`: the generator yields `(result, aux)`."""
    def layer(f, store, *args, **kwargs):
        it = gen(*args, **kwargs)
        inner_args, inner_kwargs = next(it)
        ans, aux = it.send(f(*inner_args, **inner_kwargs))
        store.store(aux)
        return ans
    layer.__name__ = getattr(gen, "__name__", "transformation_with_aux")
    return transformation_with_aux2(layer, fun, *gen_static_args)()


def wrap_init(f, params=None, *, debug_info=None):
    """`f` as a WrappedFun with no transformations; `params` (a dict) are passed to it as
    keywords. Without `debug_info`, a DeprecationWarning (as in JAX) and a placeholder one."""
    if debug_info is None:
        import warnings
        warnings.warn("linear_util.wrap_init is missing a DebugInfo object. This behavior is "
                      "deprecated, use api_util.debug_info() to construct a proper DebugInfo "
                      "object and propagate it to this function.", DeprecationWarning,
                      stacklevel=2)
        debug_info = DebugInfo("missing_debug_info", "<missing_debug_info>", None, None)
    params_dict = dict(params or {})
    return WrappedFun(f, functools.partial(_call, functools.partial(f, **params_dict), ()),
                      (), (),
                      tuple(sorted(params_dict.items())), None,
                      debug_info._replace(result_paths=None))


def fun_sourceinfo(fun):
    """`'name at file:line'` for a Python function (through partials and wrappers), else the
    name of a builtin, else `'<unknown>'`."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    fun = inspect.unwrap(fun)
    code = getattr(fun, "__code__", None)
    if code is not None:
        return f"{fun.__name__} at {code.co_filename}:{code.co_firstlineno}"
    text = str(fun)
    if text.startswith("<built-in function ") and text.endswith(">"):
        return text[len("<built-in function "):-1]
    return "<unknown>"


def __dir__():
    return sorted(__all__)
