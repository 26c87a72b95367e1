"""`kiln.extend.linear_util`: JAX's wrapped functions (`jax.extend.linear_util`), which
libraries hand to `kiln.api_util.flatten_fun` and `kiln.interpreters.partial_eval`.

`wrap_init(f, params=None, *, debug_info=None)` is a `WrappedFun`: `f` with keyword
parameters, and a stack of transformations applied when `call_wrapped(*args)` calls it.
`transformation_with_aux(gen)` makes a transformation out of a generator that receives the
arguments, yields `(args, kwargs)` for the function it wraps, receives its result and yields
`(result, aux)`; the transformation returns the wrapped function and a thunk that gives the
last `aux` (after a call). kiln never traces these functions itself: they are called with
whatever the caller passes (concrete arrays, or the tracers of a specialisation).
"""
__all__ = ["WrappedFun", "transformation", "transformation_with_aux", "wrap_init"]


class WrappedFun:
    """`f` with fixed keyword `params` and `transforms` (generator functions with their extra
    arguments, innermost first) around it."""

    def __init__(self, f, transforms, params, debug_info):
        self.f = f
        self.transforms = transforms
        self.params = params
        self.debug_info = debug_info

    @property
    def __name__(self):
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, gen, gen_static_args, out_store):
        """This function with one more transformation around it."""
        return WrappedFun(self.f, ((gen, gen_static_args, out_store),) + self.transforms,
                          self.params, self.debug_info)

    def call_wrapped(self, *args, **kwargs):
        """Call `f` through the transformations, outermost first."""
        stack = []
        for gen, gen_static_args, out_store in self.transforms:
            gen = gen(*gen_static_args, *args, **kwargs)
            args, kwargs = next(gen)
            stack.append((gen, out_store))
        ans = self.f(*args, **dict(self.params, **kwargs))
        for gen, out_store in reversed(stack):
            if out_store is None:
                ans = gen.send(ans)
            else:
                ans, aux = gen.send(ans)
                out_store.store(aux)
            gen.close()
        return ans

    def __repr__(self):
        return f"Wrapped function: {self.__name__}"


class Store:
    """The `aux` value a transformation produced at the last call."""
    _EMPTY = object()

    def __init__(self):
        self.val = self._EMPTY

    def store(self, val):
        self.val = val

    def __call__(self):
        if self.val is self._EMPTY:
            raise ValueError("the auxiliary output of a wrapped function is read before the "
                             "function was called: call it first")
        return self.val


def wrap_init(f, params=None, *, debug_info=None):
    """`f` as a WrappedFun, with keyword parameters `params`."""
    return WrappedFun(f, (), dict(params or {}), debug_info)


def transformation(gen, fun, *gen_static_args):
    """`fun` transformed by the generator function `gen` (see the module docstring; `gen`
    yields the result alone)."""
    return fun.wrap(gen, gen_static_args, None)


def transformation_with_aux(gen, fun, *gen_static_args):
    """(`fun` transformed by `gen`, a thunk giving the `aux` of its last call)."""
    out_store = Store()
    return fun.wrap(gen, gen_static_args, out_store), out_store


def __dir__():
    return sorted(__all__)
