"""`kiln.experimental.hijax`, as far as kiln has JAX's `jax.experimental.hijax`:
`VJPHiPrimitive`, JAX's class-based custom derivatives, with `Zero`, `instantiate_zeros` and
`ShapedArray`.

A subclass sets `in_avals`, `out_aval` (pytrees of types) and `params` in its `__init__`,
implements `expand(*args)` (the function) and optionally `vjp_fwd(nzs_in, *args) -> (out,
residuals)` with `vjp_bwd_retval(residuals, ct) -> (ct per argument, None for zero)` for
reverse mode, and `jvp(primals, tangents) -> (out, tangent)` (or `lin(nzs_in, *primals) ->
(out, residuals)` with `linearized(residuals, *tangents) -> tangent`) for forward mode.
Each instance is one `kiln.custom_vjp` (or, where it defines `jvp` or `lin`, one
`kiln.custom_jvp`) of `expand`, whose rules are always deferred (specialised only when a
derivative needs them, as JAX traces them, even when they reach functions defined inside
the traced function); its calls inside its own rules are calls of the same custom function.
Differences from JAX (docs/differences.md): with `jvp` or `lin` defined, reverse mode
transposes it (as for `custom_jvp`) instead of calling `vjp_fwd`/`vjp_bwd_retval`; `nzs_in`
is all True (kiln does not tell the rule which arguments have nonzero tangents); cotangents
reach `vjp_bwd_retval` as arrays, never `Zero`; `vmap` batches `expand` and the rules
themselves, so `batch_dim_rule` and `batch` are not called; `vjp_bwd` with gradient
accumulators, `transpose`, `dce` and `remat` are not supported."""
from ..compiler.frontend.specialise import call_function
from ..compiler.ir.abstract import ShapedArray
from ..compiler.ir.builder import current
from ..custom_derivatives import custom_jvp, custom_vjp

__all__ = ["VJPHiPrimitive", "Zero", "instantiate_zeros", "ShapedArray"]


def _user(method, *args):
    """Call a user's method: walked by kiln's specialiser (so Python `if` on traced values
    compiles) while kiln specialises, else called."""
    if current() is None:
        return method(*args)
    return call_function(method, list(args), {})


class Zero:
    """JAX's symbolic zero cotangent of type `aval`; kiln's rules never receive one (their
    zero cotangents are arrays), so `instantiate_zeros` gives arrays back unchanged."""

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval})"


def instantiate_zeros(x):
    """`x` with a `Zero` made an array of zeros of its type."""
    if isinstance(x, Zero):
        from ..numpy import zeros
        return zeros(x.aval.shape, x.aval.dtype)
    return x


class VJPHiPrimitive:
    """Base class of a primitive with user rules (see the module docstring)."""
    _kiln_rule_owner = True   # custom_derivatives looks for traced values in its params

    def __init__(self):
        for name in ("in_avals", "out_aval", "params"):
            if name not in self.__dict__:
                raise AttributeError(f"subclass __init__ should set `self.{name}` before "
                                     f"calling super().__init__()")
        has = {name: getattr(type(self), name) is not getattr(VJPHiPrimitive, name)
               for name in ("jvp", "lin")}
        # plain functions over `self`, so that custom_derivatives can defer them; they call
        # the user's methods through `_user`, so that kiln walks their source
        def expand(*args):
            return _user(self.expand, *args)
        expand.__name__ = expand.__qualname__ = type(self).__name__

        def jvp(primals, tangents):
            if has["jvp"]:
                return _user(self.jvp, primals, tangents)
            out, residuals = _user(self.lin, tuple(True for _ in primals), *primals)
            return out, _user(self.linearized, residuals, *tangents)

        def fwd(*args):
            return _user(self.vjp_fwd, tuple(True for _ in args), *args)

        def bwd(residuals, ct):
            return tuple(_user(self.vjp_bwd_retval, residuals, ct))
        if has["jvp"] or has["lin"]:
            self._custom = custom_jvp(expand)
            self._custom.defjvp(jvp)
        else:
            self._custom = custom_vjp(expand)
            self._custom.defvjp(fwd, bwd)
        self._custom._defer_rules = True   # as JAX traces a rule only when it is needed

    def __getattr__(self, name):
        params = self.__dict__.get("params")
        if params is not None and name in params:
            return params[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def expand(self, *args):
        raise NotImplementedError(f"subclass {type(self).__name__} must implement `expand`")

    def vjp_fwd(self, nzs_in, *args):
        raise NotImplementedError(f"for grad support, subclass {type(self).__name__} must "
                                  f"implement `vjp_fwd` and `vjp_bwd_retval`")

    def vjp_bwd_retval(self, residuals, ct):
        raise NotImplementedError(f"for grad support, subclass {type(self).__name__} must "
                                  f"implement `vjp_fwd` and `vjp_bwd_retval`")

    def jvp(self, primals, tangents):
        raise NotImplementedError(f"for jvp support, subclass {type(self).__name__} must "
                                  f"implement `jvp`")

    def lin(self, nzs_in, *primals):
        raise NotImplementedError(f"for linearize support, subclass {type(self).__name__} "
                                  f"must implement `lin` and `linearized`")

    def linearized(self, residuals, *tangents):
        raise NotImplementedError(f"for linearize support, subclass {type(self).__name__} "
                                  f"must implement `lin` and `linearized`")

    def __call__(self, *args):
        if len(args) != len(self.in_avals):
            raise TypeError(f"{type(self).__name__} takes {len(self.in_avals)} arguments "
                            f"(its in_avals), got {len(args)}")
        return self._custom(*args)

    def __repr__(self):
        return f"{type(self).__name__}[{self.params}]"
