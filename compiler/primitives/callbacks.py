"""Host callbacks: `debug_print`, the primitive behind `print` and `kiln.debug.print` in
compiled code, and `pure_callback`, a call of a Python function on the host.

`debug_print` It has no results and an effect (the `effect` flag), so simplification never
removes or merges it; it prints at every execution with the runtime values of its operands.
It has zero derivative: a derivative's forward sweep prints it once.

  debug_print(*operands, fmt=..., template=(...), sep=' ', end='\\n')
    template: one entry per piece: ("v", i) is operand i, ("s", text) static text, and
    ("kv", name, i) / ("ks", name, text) the same for keyword pieces. Python's `print` at
    the top level of a shard_map body (runtime/debug.py) prints once, as JAX's eager
    shard_map does: ("m", i, headers) is operand i gathered from every device (one block per
    header, in mesh order), printed as a block under each header, and ("first", i) prints
    only where the boolean operand i is True (the device at mesh coordinate 0).
    fmt None: print the pieces like Python's print (sep/end); otherwise
    fmt.format(*pieces, **keyword_pieces) (kiln.debug.print's form).

  pure_callback(*operands, callback=token, results=((dtype, shape), ...), vmap_method=...)
    calls the host function registered under the int `token` (`register_host_function`)
    with the operands as NumPy arrays; it returns one array per `results` entry, of that
    dtype and shape (it checks them). It is pure: no effect flag, so an unused call is
    removed. It has no derivative (JVP and VJP raise JAX's error). Under vmap,
    `vmap_method` says how: "sequential"/"sequential_unrolled" loop over the examples;
    "expand_dims" calls once with batched operands' batch axis first and the others given a
    leading axis of 1; "broadcast_all" broadcasts every operand to the batch; and
    "legacy_vectorized" moves batched operands' axis first and leaves the others alone. The
    function must then return results with the batch axis first.

  io_callback(*operands, callback=token, results=..., ordered=False)
    pure_callback's call with the `effect` flag (kiln.experimental.io_callback): never
    removed or merged, run in program order. It has no derivative (JAX's "IO callbacks do
    not support JVP."); under vmap an unordered call runs once per example and an ordered
    one is refused, as in JAX.

  debug_callback(*operands, callback=token)
    calls the registered host function for its effect (kiln.debug.callback): no results, the
    `effect` flag, a zero derivative (it runs in the forward sweep, with the primal values),
    and once per example under vmap, as debug_print.
"""
import sys

import numpy as np

from ..ir.abstract import ShapedArray
from .core import register, BATCH, JVP, VJP
from . import batching as B
from . import emit as E


def _eval(*operands, fmt=None, template=(), sep=" ", end="\n"):
    return ()


class _Blocks:
    """A value gathered from every device of a shard_map, shown as JAX shows one: a block
    per device under its header."""
    __slots__ = ("value", "headers")

    def __init__(self, value, headers):
        self.value, self.headers = value, headers

    def __str__(self):
        return "\n".join(f"{h}\n{block}\n" for h, block in zip(self.headers, self.value))

    def __format__(self, spec):
        return format(str(self), spec)


def render(operands, fmt, template, sep, end):
    """The text of one print; None when a ("first", i) piece's operand i is False."""
    pos, kw = [], {}
    for kind, *rest in template:
        if kind == "v":
            pos.append(operands[rest[0]])
        elif kind == "m":
            pos.append(_Blocks(operands[rest[0]], rest[1]))
        elif kind == "first":
            if not operands[rest[0]]:
                return None
        elif kind == "s":
            pos.append(rest[0])
        elif kind == "kv":
            kw[rest[0]] = operands[rest[1]]
        else:
            kw[rest[0]] = rest[1]
    if fmt is None:
        return sep.join(str(p) for p in pos) + end
    return fmt.format(*pos, **kw) + end


def _impl(*operands, fmt=None, template=(), sep=" ", end="\n"):
    text = render([np.asarray(o) for o in operands], fmt, template, sep, end)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
    return ()


debug_print = register("debug_print", _eval, _impl, multiple_results=True)
debug_print.effect = True
# No results, so nothing to differentiate; transforms keep it in the forward sweep only, so it
# prints once per evaluation of a derivative, with the primal values.
debug_print.zero_derivative = True
# Under vmap it prints once per example, in order (JAX's debug callbacks do the same): a loop
# over the examples, not a vectorised print.
BATCH[debug_print] = B.loop_rule(debug_print)


# ---------------------------------------------------------------------------- pure_callback

# Host functions by token: a token is an index, given in registration order, so it is the same
# for the same function within a process; compiled code carries only the token and finds the
# function of the process that runs it (a disk-cached object is keyed by the SSA text, token
# included, and the token is registered again when the SSA is built again).
_HOST_FUNCTIONS = []
_TOKENS = {}


def register_host_function(key, fn):
    """The token of `fn`, registered under the hashable `key` (the same key, the same token)."""
    token = _TOKENS.get(key)
    if token is None:
        token = _TOKENS[key] = len(_HOST_FUNCTIONS)
        _HOST_FUNCTIONS.append(fn)
    return token


def _callback_eval(*operands, callback, results, vmap_method=None):
    return tuple(ShapedArray(tuple(shape), np.dtype(dtype)) for dtype, shape in results)


def call_host(fn, operands, results):
    """`fn`'s results for `operands`, checked against `results` ((dtype, shape) each)."""
    outs = fn(*[np.asarray(o) for o in operands])
    if len(outs) != len(results):
        raise TypeError(f"pure_callback: the callback returned {len(outs)} arrays, "
                        f"result_shape_dtypes declares {len(results)}")
    checked = []
    for out, (dtype, shape) in zip(outs, results):
        out = np.asarray(out)
        if out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
            raise TypeError(f"pure_callback: the callback returned an array of shape "
                            f"{out.shape} and dtype {out.dtype}, result_shape_dtypes declares "
                            f"shape {tuple(shape)} and dtype {np.dtype(dtype)}")
        checked.append(out)
    return tuple(checked)


def _callback_impl(*operands, callback, results, vmap_method=None):
    return call_host(_HOST_FUNCTIONS[callback], operands, results)


pure_callback = register("pure_callback", _callback_eval, _callback_impl,
                         multiple_results=True, host=True)

_NO_DERIVATIVE = ("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use "
                  "callbacks while taking gradients.")


def _no_jvp(eqn, primals, tangents):
    raise ValueError(_NO_DERIVATIVE)


def _no_vjp(ct, primals, out, residuals, **params):
    raise ValueError(_NO_DERIVATIVE)


JVP[pure_callback] = _no_jvp
VJP[pure_callback] = _no_vjp

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")


def _expand_dims(x, d, size):
    return B.moveaxis(x, d, 0) if d is not None else E.reshape(
        x, new_sizes=(1,) + tuple(E.aval(x).shape), dimensions=None)


def _legacy(x, d, size):
    return x if d is None else B.moveaxis(x, d, 0)


_OPERAND_FORM = {"expand_dims": _expand_dims, "broadcast_all": B.to_front,
                 "legacy_vectorized": _legacy}


def vmap_method_rule(prim):
    """The batching rule of a host call whose `vmap_method` param says how to batch it
    (pure_callback's, ffi_call's): see the module docstring."""
    def rule(args, dims, *, results, vmap_method=None, **params):
        if vmap_method not in VMAP_METHODS:
            raise NotImplementedError(
                f"vmap is only supported for the {prim.name} primitive when vmap_method is one "
                f"of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
                f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
        size = B.batch_size(args, dims)
        params = dict(params, results=results, vmap_method=vmap_method)
        if vmap_method.startswith("sequential"):
            return B.loop_over_examples(prim, args, dims, params, size)
        form = _OPERAND_FORM[vmap_method]
        operands = [form(x, d, size) for x, d in zip(args, dims)]
        batched = tuple((dtype, (size,) + tuple(shape)) for dtype, shape in results)
        outs = E.bind(prim.name, *operands, **dict(params, results=batched))
        return list(outs), [0] * len(outs)
    return rule


BATCH[pure_callback] = vmap_method_rule(pure_callback)


# ---------------------------------------------------------------------------- io_callback

def _io_eval(*operands, callback, results, ordered=False):
    return _callback_eval(*operands, callback=callback, results=results)


def _io_impl(*operands, callback, results, ordered=False):
    return call_host(_HOST_FUNCTIONS[callback], operands, results)


io_callback = register("io_callback", _io_eval, _io_impl, multiple_results=True)
io_callback.effect = True


def _io_no_derivative(*args, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _io_batch(args, dims, *, callback, results, ordered=False):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    params = dict(callback=callback, results=results, ordered=False)
    return B.loop_over_examples(io_callback, args, dims, params, B.batch_size(args, dims))


JVP[io_callback] = VJP[io_callback] = _io_no_derivative
BATCH[io_callback] = _io_batch


# ---------------------------------------------------------------------------- debug_callback

def _debug_callback_eval(*operands, callback):
    return ()


def _debug_callback_impl(*operands, callback):
    return call_host(_HOST_FUNCTIONS[callback], operands, ())


debug_callback = register("debug_callback", _debug_callback_eval, _debug_callback_impl,
                          multiple_results=True)
debug_callback.effect = True
debug_callback.zero_derivative = True
BATCH[debug_callback] = B.loop_rule(debug_callback)
