"""Derivatives of any order through `lax.custom_linear_solve`, the sparse solvers built on it
(`cg`, `gmres`, `bicgstab`) and `lax.custom_root`: the `linear_solve` and `root` primitives'
rules solve again, so second derivatives (grad of grad, hessian, jacfwd of jacfwd, jacrev of
jacfwd), under `jit` and `vmap`, match JAX 0.10.2 and finite differences."""
import numpy as np
import pytest

import kiln
import kiln.lax as kl
import kiln.numpy as knp
import kiln.scipy.sparse.linalg as ksl
from kiln.test_util import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy
jl = jax.lax
jsl = pytest.importorskip("jax.scipy.sparse.linalg")

SYM = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
NONSYM = np.array([[4.0, 1.0, 0.5], [0.3, 3.0, 0.2], [0.1, 0.7, 2.0]], np.float32)
B = np.array([1.0, 2.0, 3.0], np.float32)


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# (symmetric, with a transpose solve, the matrix)
KINDS = {"symmetric": (True, False, SYM), "transpose_solve": (False, True, NONSYM),
         "solve_only": (False, False, NONSYM)}


def _solve_loss(lax, np_, kind):
    """s -> |x|^2 for x solving (A s0 + s1 I) x = b s2, matvec closing over s."""
    symmetric, transposed, A = KINDS[kind]

    def loss(s):
        M = A * s[0] + s[1] * np_.eye(3, dtype=np.float32)
        solve = lambda mv, v: np_.linalg.solve(M, v)   # noqa: E731
        t = (lambda vm, v: np_.linalg.solve(M.T, v)) if transposed else None
        x = lax.custom_linear_solve(lambda v: M @ v, B * s[2], solve, t, symmetric=symmetric)
        return (x * x).sum()
    return loss


S = np.array([1.5, 0.3, 0.7], np.float32)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_second_derivatives_match_jax(kind):
    f, g = _solve_loss(kl, knp, kind), _solve_loss(jl, jnp, kind)
    want = jax.jit(jax.jacfwd(jax.jacfwd(g)))(S)   # JAX's reverse mode needs a transpose solve
    close(kiln.jacfwd(kiln.jacfwd(f))(S), want)
    close(kiln.jacrev(kiln.jacfwd(f))(S), want)
    close((kiln.jit if kind == "transpose_solve" else kiln.hessian)(
        kiln.hessian(f) if kind == "transpose_solve" else f)(S), want)
    close(kiln.grad(lambda s: kiln.grad(f)(s)[0])(S), want[0])


def test_grad_of_grad_is_exact_not_half():
    """The reported case: grad(grad(.)) of a solve with A * s in s (it was half)."""
    def loss(lax, np_, s):
        M = SYM * s
        return lax.custom_linear_solve(lambda v: M @ v, B, lambda mv, v: np_.linalg.solve(M, v),
                                       symmetric=True).sum()
    got = kiln.grad(kiln.grad(lambda s: loss(kl, knp, s)))(1.5)
    close(got, jax.jit(jax.grad(jax.grad(lambda s: loss(jl, jnp, s))))(1.5))
    close(got, 2 * np.linalg.solve(SYM, B).sum() / 1.5 ** 3)   # d2/ds2 of (A^-1 b)/s


def test_finite_differences_both_modes():
    check_grads(_solve_loss(kl, knp, "transpose_solve"), (S,), order=2, modes=("fwd", "rev"),
                atol=2e-2, rtol=2e-2, eps=1e-3)


def test_pytree_b_with_aux_and_vmap():
    def loss(lax, np_, s, b):
        def matvec(x):
            return {"u": x["u"] * s[0] + x["w"][:2], "w": x["w"] * s[1]}

        def solve(mv, v):   # the exact inverse of matvec, and an aux result
            w = v["w"] / s[1]
            return {"u": (v["u"] - w[:2]) / s[0], "w": w}, np_.sum(v["w"])

        def tsolve(vm, v):
            u = v["u"] / s[0]
            return {"u": u, "w": (v["w"] - np_.concatenate([u, np_.zeros(1)])) / s[1]}, 0.0
        x, aux = lax.custom_linear_solve(matvec, b, solve, tsolve, has_aux=True)
        return (x["u"] ** 2).sum() * s[0] + (x["w"] ** 3).sum() + aux
    b = {"u": np.array([1.0, -2.0], np.float32), "w": np.array([0.5, 1.5, 2.0], np.float32)}
    s = np.array([1.3, 0.8], np.float32)
    f = lambda s, b: loss(kl, knp, s, b)   # noqa: E731
    g = lambda s, b: loss(jl, jnp, s, b)   # noqa: E731
    close(kiln.hessian(f)(s, b), jax.jit(jax.hessian(g))(s, b))
    got = kiln.hessian(f, argnums=1)(s, b)
    want = jax.jit(jax.hessian(g, argnums=1))(s, b)
    for k in b:
        for m in b:
            close(got[k][m], want[k][m])
    ss = np.stack([s, s * 1.2])
    close(kiln.vmap(kiln.hessian(f), (0, None))(ss, b),
          jax.jit(jax.vmap(jax.hessian(g), (0, None)))(ss, b))


@pytest.mark.parametrize("name, A", [("cg", SYM), ("gmres", NONSYM), ("bicgstab", NONSYM)])
def test_sparse_solvers_second_derivatives(name, A):
    def loss(sl):
        def f(s, b):
            M = A * s[0] + s[1] * np.eye(3, dtype=np.float32)
            x = getattr(sl, name)(M, b * s[2], tol=1e-7)[0]
            return (x * x).sum()
        return f
    f, g = loss(ksl), loss(jsl)
    close(kiln.hessian(f)(S, B), jax.jit(jax.hessian(g))(S, B))
    if name == "cg":
        close(kiln.jit(kiln.hessian(f, argnums=1))(S, B),
              jax.jit(jax.hessian(g, argnums=1))(S, B))


def _cubic_root(lax, a):
    def f(x):
        return x * x * x - a * x - a

    def solve(f, x0):
        return lax.fori_loop(0, 40, lambda i, x: x - f(x) / (3 * x * x - a), x0)
    return lax.custom_root(f, np.float32(2.0), solve, lambda g, y: y / g(1.0))


def test_custom_root_second_derivatives():
    f = lambda a: _cubic_root(kl, a)   # noqa: E731
    g = lambda a: _cubic_root(jl, a)   # noqa: E731
    want = jax.jit(jax.grad(jax.grad(g)))(2.0)
    close(kiln.grad(kiln.grad(f))(2.0), want)
    close(kiln.jacfwd(kiln.jacfwd(f))(2.0), want)
    close(kiln.jit(kiln.jacrev(kiln.jacfwd(f)))(2.0), want)
    a = np.array([2.0, 3.0], np.float32)
    close(kiln.vmap(kiln.grad(kiln.grad(f)))(a), jax.jit(jax.vmap(jax.grad(jax.grad(g))))(a))
    check_grads(f, (2.0,), order=2, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2, eps=1e-3)


def test_the_rules_emit_the_primitives_again():
    """The derivative of a solve is a solve: no loop inside a solver is differentiated."""
    text = str(kiln.make_ir(kiln.hessian(_solve_loss(kl, knp, "transpose_solve")))(S))
    assert text.count("linear_solve(") >= 3
    assert "tape_push" not in text
