"""`kiln.numpy` functions that map Python functions over arrays: vectorize, apply_along_axis,
apply_over_axes, piecewise, frompyfunc-free (JAX has no object arrays).

They are built on `kiln.vmap`, as JAX's are, so they compile under `jit` and differentiate.
`vectorize` broadcasts its arguments' loop dimensions (those before the core dimensions of a
`signature` such as "(n),(n)->()") and maps the function over them once per dimension.
`piecewise` evaluates every function on all of `x` and selects, per element, the one whose
condition holds (the last true condition wins; none: the default function or 0).
"""
import functools
import re

from .. import numpy as jnp

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes", "piecewise"]

_DIMS = re.compile(r"\(([^()]*)\)")


def _parse_signature(signature):
    ins, outs = signature.replace(" ", "").split("->")
    parse = lambda s: [tuple(d for d in g.split(",") if d) for g in _DIMS.findall(s)]  # noqa
    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """`pyfunc` applied elementwise (or over core dimensions, with `signature`) to its
    broadcast arguments; positions or names in `excluded` pass through unchanged."""
    from ..vmap import vmap

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        args = list(args)
        mapped = [i for i in range(len(args)) if i not in excluded]
        kw_mapped = [k for k in kwargs if k not in excluded]
        values = [jnp.asarray(args[i]) for i in mapped] + [jnp.asarray(kwargs[k])
                                                            for k in kw_mapped]
        core = _parse_signature(signature)[0] if signature else [()] * len(values)
        if len(core) != len(values):
            raise TypeError(f"wrong number of positional arguments: expected {len(core)}, "
                            f"got {len(values)}")
        loops = [v.shape[:v.ndim - len(c)] for v, c in zip(values, core)]
        loop = jnp.broadcast_shapes(*loops) if loops else ()
        values = [jnp.broadcast_to(v, loop + v.shape[v.ndim - len(c):])
                  for v, c in zip(values, core)]

        def call(*vs):
            full = list(args)
            for i, v in zip(mapped, vs):
                full[i] = v
            kw = dict(kwargs)
            kw.update(zip(kw_mapped, vs[len(mapped):]))
            return pyfunc(*full, **kw)
        f = call
        for _ in loop:
            f = vmap(f)
        return f(*values)
    return wrapped


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d` applied to the 1-D slices of `arr` along `axis`."""
    from ..vmap import vmap
    arr = jnp.asarray(arr)
    nd = arr.ndim
    axis = axis + nd if axis < 0 else axis
    func = lambda a: func1d(a, *args, **kwargs)   # noqa: E731
    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func, a, axes):
    """`func(a, axis)` for each axis in turn, the reduced axis kept (as length 1)."""
    a = jnp.asarray(a)
    for axis in axes:
        b = func(a, axis)
        if b.ndim == a.ndim - 1:
            b = jnp.expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ValueError("function is not returning an array of the correct shape")
        a = b
    return a


def piecewise(x, condlist, funclist, *args, **kw):
    """`funclist[i](x)` where `condlist[i]` holds (constants allowed for functions)."""
    x = jnp.asarray(x)
    conds = [jnp.asarray(c, dtype=bool) for c in (condlist if isinstance(condlist, (list, tuple))
                                                   else list(condlist))]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funcs = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funcs = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    stacked = jnp.stack([jnp.zeros_like(conds[0])] + conds) if conds else jnp.zeros((1,) +
                                                                                    x.shape)
    index = jnp.argmax(jnp.cumsum(stacked.astype(jnp.int32), axis=0), axis=0)
    out = jnp.zeros_like(x)
    for k, f in enumerate(funcs):
        value = f(x, *args, **kw) if callable(f) else f
        out = jnp.where(index == k, jnp.asarray(value, dtype=x.dtype), out)
    return out
