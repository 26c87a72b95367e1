"""Inputs shared by the tests of the decomposition primitives (tests/test_linalg_*.py): well
conditioned symmetric positive-definite and triangular matrices, shapes drawn by hypothesis."""
import numpy as np
import pytest
from hypothesis import HealthCheck, settings, strategies as st

# (the x64 fixture is the same for every example: it only switches float64 on)
FEW = settings(max_examples=12, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])
FLOATS = [np.float32, np.float64]
batches = st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple)
sizes = st.integers(0, 5)


def rng(seed=0):
    return np.random.default_rng(seed)


def spd(batch, n, dtype, seed=0):
    """Symmetric positive-definite matrices of shape batch + (n, n)."""
    m = rng(seed).normal(size=batch + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


def general(batch, n, dtype, seed=0):
    """Random matrices of shape batch + (n, n), with random imaginary parts when complex."""
    a = rng(seed).normal(size=batch + (n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng(seed + 1).normal(size=batch + (n, n))
    return a.astype(dtype)


def triangular(batch, n, dtype, seed=0):
    """Matrices with a dominant diagonal (either triangle solves stably) and random rest."""
    m = rng(seed).normal(size=batch + (n, n))
    return (m + (n + 2) * np.eye(n)).astype(dtype)


def tolerance(dtype):
    return 2e-4 if np.dtype(dtype) == np.float32 else 1e-10


def check_all(got, want, dtype, scale=1):
    """Each result has the wanted shape and `dtype` (real results of complex matrices take its
    real dtype) and values within `scale` times the dtype's tolerance."""
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == np.shape(w) and g.dtype in (np.dtype(dtype), np.asarray(w).dtype), \
            (g.shape, g.dtype, np.shape(w))
        np.testing.assert_allclose(g, w, rtol=scale * tolerance(dtype),
                                   atol=scale * tolerance(dtype))


def check_grad_against_jax(loss, a, tol):
    """kiln.jit(kiln.grad(loss(kiln.lax.linalg))) against jax.grad(loss(jax.lax.linalg))."""
    jax = pytest.importorskip("jax")
    import kiln
    import kiln.lax.linalg
    want = jax.grad(loss(jax.lax.linalg))(a)
    got = kiln.jit(kiln.grad(loss(kiln.lax.linalg)))(a)
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


def on_emulated_cuda(monkeypatch, f, *args):
    """f compiled for the CUDA backend on the host emulation of a device, called on args."""
    import kiln
    from kiln.compiler.backends.cuda import device
    monkeypatch.setenv(device.EMULATE, "1")
    return kiln.jit(f, backend="cuda")(*args)
