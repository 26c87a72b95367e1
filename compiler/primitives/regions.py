"""The transforms that rules of primitives with regions run on those regions.

The JVP, VJP and batching rules of cond, while_loop, scan, fusion, remat and the
custom-derivative calls transform their regions with the very transform that is running them
(compiler/transforms: jvp, vjp, vmap). Transforms sit in the layer above the primitives, so
each transform module registers its entry point here when it is imported (`provide`); a rule
runs only inside its transform, which is then loaded. The entry points:

  jvp(fn, primals, tangents) -> (outs, out_tangents)     transforms/jvp.py `jvp_emit`
  vjp(fn, primals, cts, active, reads=None) -> (outs, input cts)
                                                          transforms/vjp.py `vjp_emit`
  batch(fn, args, dims, size) -> (outs, out_dims)        transforms/vmap.py `batch_emit`
  checkify(fn, args, err, enabled) -> outs                transforms/checkify.py
                                                          `checkify_emit`
  jet(fn, primals, series) -> (outs, out_series)         transforms/jet.py `jet_emit`
"""
_PROVIDERS = {}
_WHERE = {"jvp": "transforms.jvp", "vjp": "transforms.vjp", "batch": "transforms.vmap",
          "checkify": "transforms.checkify", "jet": "transforms.jet"}


def provide(kind, entry):
    """Register the transform `kind` (one of jvp, vjp, batch, checkify, jet) of regions."""
    if kind not in _WHERE:
        raise TypeError(f"unknown region transform {kind!r}; the kinds are "
                        + ", ".join(sorted(_WHERE)))
    _PROVIDERS[kind] = entry


def _provider(kind):
    entry = _PROVIDERS.get(kind)
    if entry is None:
        raise RuntimeError(f"a rule asked for the {kind} transform of a region, but "
                           f"kiln.compiler.{_WHERE[kind]} is not loaded")
    return entry


def jvp(fn, primals, tangents):
    return _provider("jvp")(fn, primals, tangents)


def vjp(fn, primals, cts, active, reads=None):
    return _provider("vjp")(fn, primals, cts, active, reads)


def batch(fn, args, dims, size):
    return _provider("batch")(fn, args, dims, size)


def checkify(fn, args, err, enabled):
    return _provider("checkify")(fn, args, err, enabled)


def jet(fn, primals, series):
    return _provider("jet")(fn, primals, series)
