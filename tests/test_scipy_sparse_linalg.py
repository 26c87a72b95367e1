"""`kiln.scipy.sparse.linalg` (`cg`, `bicgstab`, `gmres`) against JAX 0.10.2 and SciPy:
solutions of small SPD systems (cg) and non-symmetric ones (bicgstab, gmres), matrices and
linear functions over pytrees, preconditioners, complex operands, `jit`, gradients (against
JAX and finite differences), forward mode, and JAX's errors."""
import numpy as np
import pytest
import scipy.sparse.linalg as ssl

import kiln
import kiln.numpy as knp
from kiln.scipy.sparse import linalg as kl

jax = pytest.importorskip("jax")
jnp = jax.numpy
jl = jax.scipy.sparse.linalg

SOLVERS = ["cg", "bicgstab", "gmres"]
GMRES_METHODS = ["batched", "incremental"]


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _systems(n, dtype=np.float32, seed=0):
    """An SPD matrix, a well-conditioned non-symmetric one and a right-hand side."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, n))
    spd = q @ q.T + n * np.eye(n)
    general = rng.normal(size=(n, n)) + n * np.eye(n)
    b = rng.normal(size=n)
    if np.dtype(dtype).kind == "c":
        spd = spd + 1j * (q - q.T)                  # Hermitian positive definite
        general = general + 1j * rng.normal(size=(n, n))
        b = b + 1j * rng.normal(size=n)
    return spd.astype(dtype), general.astype(dtype), b.astype(dtype)


SPD, GEN, B = _systems(6)


def _matrix_for(name):
    return SPD if name == "cg" else GEN


def _call(module, name, *args, method=None, **kwargs):
    if method is None:
        return getattr(module, name)(*args, **kwargs)
    return getattr(module, name)(*args, solve_method=method, **kwargs)


CASES = [("cg", None), ("bicgstab", None)] + [("gmres", m) for m in GMRES_METHODS]
# slower tests take one GMRES method each (the cycles differ, the rest is shared)
BATCHED = CASES[:3]
INCREMENTAL = CASES[:2] + CASES[3:]


@pytest.mark.parametrize("name,method", CASES)
def test_solutions_match_jax_and_scipy(name, method):
    A = _matrix_for(name)
    x, info = _call(kl, name, A, B, method=method)
    xj, info_j = _call(jl, name, A, B, method=method)
    close(x, xj)
    close(x, np.linalg.solve(A, B))
    close(x, getattr(ssl, name)(A.astype(np.float64), B.astype(np.float64), rtol=1e-8)[0])
    assert (info is None) == (info_j is None)
    if info is not None:
        assert int(info) == int(info_j) == 0


@pytest.mark.parametrize("name,method", CASES)
def test_complex_operands(name, method):
    spd, gen, b = _systems(5, np.complex64, seed=1)
    A = spd if name == "cg" else gen
    x, _ = _call(kl, name, A, b, method=method, tol=1e-6)
    assert x.dtype == np.complex64
    close(x, np.linalg.solve(A, b), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name,method", INCREMENTAL)
def test_pytree_operator_x0_and_preconditioner(name, method):
    """A block-diagonal operator over a dict {"u": vector, "w": 2x2 matrix}, a starting
    point and a Jacobi preconditioner."""
    A = _matrix_for(name)
    A2 = SPD[:4, :4] if name == "cg" else GEN[:4, :4]
    b = {"u": B, "w": B[:4].reshape(2, 2)}

    def operator(lib):
        return lambda t: {"u": lib.dot(A, t["u"]), "w": lib.dot(A2, t["w"].ravel()).reshape(2, 2)}

    def jacobi(t):
        return {"u": t["u"] / np.diag(A), "w": t["w"] / np.diag(A2).reshape(2, 2)}
    x0 = {"u": np.ones(6, np.float32), "w": np.ones((2, 2), np.float32)}
    x, _ = _call(kl, name, operator(knp), b, x0, M=jacobi, method=method)
    xj, _ = _call(jl, name, operator(jnp), b, x0, M=jacobi, method=method)
    assert set(x) == {"u", "w"} and x["w"].shape == (2, 2)
    for key in x:
        close(x[key], xj[key])
    close(x["u"], np.linalg.solve(A, B))
    close(x["w"].ravel(), np.linalg.solve(A2, B[:4]))


@pytest.mark.parametrize("name,method", CASES)
def test_jit_and_limits(name, method):
    A = _matrix_for(name)

    short = dict(maxiter=1, restart=2) if name == "gmres" else dict(maxiter=1)
    solve = kiln.jit(lambda A, b: _call(kl, name, A, b, method=method, **short)[0])
    close(solve(A, B), _call(jl, name, A, B, method=method, **short)[0])  # one step / cycle
    loose = kiln.jit(lambda A, b: _call(kl, name, A, b, method=method, atol=0.5)[0])(A, B)
    assert np.linalg.norm(B - A @ np.asarray(loose)) <= 0.5
    if method != "incremental":    # JAX's early-stopped incremental cycle: docs/differences.md
        close(loose, _call(jl, name, A, B, method=method, atol=0.5)[0], rtol=1e-3, atol=1e-4)
    close(kiln.jit(lambda A, b: _call(kl, name, A, b, method=method)[0])(A, B),
          np.linalg.solve(A, B))


@pytest.mark.parametrize("name,method", BATCHED)
def test_gradients_match_jax_and_finite_differences(name, method):
    A = _matrix_for(name)

    def loss(lib, mod):
        def f(A, b):
            x = _call(mod, name, lambda v: lib.dot(A, v), b, method=method, tol=1e-6)[0]
            return (x * lib.arange(1.0, 7.0)).sum()
        return f
    got = kiln.jit(kiln.grad(loss(knp, kl), argnums=(0, 1)))(A, B)
    want = jax.grad(loss(jnp, jl), argnums=(0, 1))(A, B)
    for g, w in zip(got, want):
        close(g, w, rtol=1e-3, atol=1e-5)
    # finite differences of the exact solve, in float64
    A64, B64, eps = A.astype(np.float64), B.astype(np.float64), 1e-6
    weights = np.arange(1.0, 7.0)
    exact = [(np.linalg.solve(A64, B64 + eps * e) - np.linalg.solve(A64, B64 - eps * e))
             @ weights / (2 * eps) for e in np.eye(6)]
    close(got[1], exact, rtol=1e-3, atol=1e-4)
    tangent = kiln.jvp(lambda b: _call(kl, name, A, b, method=method, tol=1e-6)[0],
                       (B,), (np.ones(6, np.float32),))[1]
    close(tangent, np.linalg.solve(A64, np.ones(6)), rtol=1e-3, atol=1e-4)


def test_errors_are_jaxs():
    b = {"a": B, "b": B}
    for name in SOLVERS:
        solver = getattr(kl, name)
        with pytest.raises(ValueError, match="x0 and b must have matching tree structure"):
            solver(lambda t: t, b, x0=[B, B])
        with pytest.raises(ValueError, match="must be a square matrix, but has shape: \\(2, 3\\)"):
            solver(np.ones((2, 3), np.float32), B[:2])
        with pytest.raises(TypeError, match="must be either a function or ndarray: 3"):
            solver(3, B)
    for name in ("cg", "bicgstab"):
        with pytest.raises(ValueError, match="arrays in x0 and b must have matching shapes"):
            getattr(kl, name)(GEN, B, x0=B[:3])
    with pytest.raises(ValueError, match="invalid solve_method qr, must be either"):
        kl.gmres(GEN, B, solve_method="qr")
