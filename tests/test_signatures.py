"""The public functions of kiln.numpy, kiln.lax, kiln.nn and kiln.random take JAX 0.10.2's
keyword arguments with JAX's defaults: every parameter JAX's function has (by name, unless
both are positional-only) is there, with an equal default, and can be passed the way JAX's
can. The differences left are listed in KNOWN (docs/compat.md says why); one that appears or
goes away fails, so the list stays true."""
import inspect

import jax
import jax.lax
import jax.nn
import jax.numpy
import jax.random
import numpy as np
import pytest

import kiln
import kiln.lax
import kiln.nn
import kiln.numpy
import kiln.random

KNOWN = {}


def _params(f):
    try:
        return inspect.signature(f).parameters
    except (TypeError, ValueError):
        return None


def _differences(jf, kf):
    jp, kp = _params(jf), _params(kf)
    if jp is None or kp is None:
        return set()
    takes_any = any(p.kind == p.VAR_KEYWORD for p in kp.values())
    out = set()
    for name, p in jp.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        q = kp.get(name)
        if q is None:
            if p.kind != p.POSITIONAL_ONLY and not takes_any:
                out.add(name)
            continue
        if p.kind != p.POSITIONAL_ONLY and q.kind == q.POSITIONAL_ONLY:
            out.add(name)
        if p.default is not p.empty and (q.default is q.empty or
                                         not _same_default(p.default, q.default)):
            out.add(name)
    return out


def _same_default(a, b):
    """Equal reprs; any object without a repr of its own; or a function of the same name
    (einsum's `_dot_general=lax.dot_general`, JAX's there and kiln's here)."""
    if inspect.isfunction(a):
        return getattr(b, "__qualname__", None) == a.__qualname__
    return repr(a) == repr(b) or "object at" in repr(a)


def _functions():
    for mod in ("numpy", "lax", "nn", "random"):
        jm, km = getattr(jax, mod), getattr(kiln, mod)
        for name in sorted(dir(jm)):
            jf, kf = getattr(jm, name), getattr(km, name, None)
            if name.startswith("_") or kf is None or not callable(jf) or \
                    inspect.isclass(jf) or inspect.isclass(kf):
                continue
            yield f"{mod}.{name}", jf, kf


def test_keywords_and_defaults_match_jax():
    found = {name: diff for name, jf, kf in _functions() if (diff := _differences(jf, kf))}
    assert found == KNOWN


@pytest.mark.parametrize("call", [
    lambda np_: np_.zeros(2, device=_device(np_)),
    lambda np_: np_.arange(3, device=_device(np_)),
    lambda np_: np_.eye(2, device=_device(np_)),
    lambda np_: np_.linspace(0, 1, 3, device=_device(np_)),
    lambda np_: np_.full_like(np_.ones(2), 3, device=_device(np_)),
    lambda np_: np_.fmax(x1=np_.ones(2), x2=np_.zeros(2)),
    lambda np_: np_.gcd(x1=6, x2=4),
    lambda np_: np_.trunc(x=-1.5),
    lambda np_: np_.cov(np_.arange(6).reshape(2, 3), dtype=np_.float32),
    lambda np_: np_.corrcoef(np_.arange(6).reshape(2, 3) ** 2, dtype=np_.complex64),
])
def test_keywords_work_as_in_jax(call):
    want, got = call(jax.numpy), call(kiln.numpy)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def _device(np_):
    return (jax if np_ is jax.numpy else kiln).devices()[0]


def test_device_and_out_sharding_together_are_refused():
    d = kiln.devices()[0]
    with pytest.raises(ValueError, match="Only one of `device` or `out_sharding`"):
        kiln.numpy.zeros(2, device=d, out_sharding=kiln.sharding.SingleDeviceSharding(d))


def test_isposinf_out_is_refused_as_in_jax():
    with pytest.raises(NotImplementedError, match="'out' argument"):
        kiln.numpy.isposinf(kiln.numpy.ones(2), out=kiln.numpy.ones(2))
    assert str(kiln.random.key_dtype(impl_spec=None)) == str(jax.random.key_dtype(impl_spec=None))
