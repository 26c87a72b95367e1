"""grad and friends at complex inputs, Python complex scalars (weak complex64) among them, as
JAX's complex-differentiation page and the autodiff cookbook use them: values, dtypes, weak
types (a cotangent keeps the weak type its rules give it: real/imag/abs of a weak complex
input transpose to a strong complex64, as JAX's), and the holomorphic errors' meaning."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def _f_real(np_):
    def f(z):
        x, y = np_.real(z), np_.imag(z)
        return x ** 2 + y ** 2
    return f


CASES = {   # name -> (lambda api, np_: result)
    "real-valued of complex": lambda api, np_: api.grad(_f_real(np_))(3. + 4j),
    "abs": lambda api, np_: api.grad(np_.abs)(3. + 4j),
    "abs strong input": lambda api, np_: api.grad(np_.abs)(np_.complex64(3. + 4j)),
    "real": lambda api, np_: api.grad(np_.real)(3. + 4j),
    "imag": lambda api, np_: api.grad(lambda z: z.imag)(3. + 4j),
    "conj mul": lambda api, np_: api.grad(lambda z: (z * np_.conj(z)).real)(0.7 + 0.3j),
    "log real part": lambda api, np_: api.grad(lambda z: np_.log(z).real)(0.7 + 0.3j),
    "strong factor": lambda api, np_: api.grad(lambda z: (z * np_.complex64(2)).real)(1. + 1j),
    "sin holomorphic": lambda api, np_: api.grad(np_.sin, holomorphic=True)(0.5 + 0.25j),
    "conj holomorphic": lambda api, np_: api.grad(np_.conjugate, holomorphic=True)(3. + 4j),
    "square holomorphic": lambda api, np_: api.grad(lambda z: z * z, holomorphic=True)(3. + 4j),
    "jit grad": lambda api, np_: api.jit(api.grad(np_.abs))(3. + 4j),
    "value_and_grad": lambda api, np_: api.value_and_grad(_f_real(np_))(3. + 4j)[1],
    "jacrev holomorphic": lambda api, np_: api.jacrev(lambda z: z ** 3, holomorphic=True)(1j),
    "jacfwd holomorphic": lambda api, np_: api.jacfwd(lambda z: z ** 3, holomorphic=True)(1j),
    "vector": lambda api, np_: api.grad(lambda z: np_.sum(np_.abs(z) ** 2))(
        np_.array([1. + 2j, 3j])),
    "maximum with a weak scalar": lambda api, np_: api.grad(lambda x: np_.maximum(x, 2.))(3.),
    "hypot": lambda api, np_: api.grad(lambda x: np_.hypot(x, 2.))(3.),
    "real input, complex inside": lambda api, np_: api.grad(
        lambda x: np_.abs(x * (1 + 2j)))(2.),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    want = CASES[name](jax, jjnp)
    got = CASES[name](kiln, jnp)
    assert got.dtype == want.dtype
    assert got.weak_type == want.weak_type, (got, want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


ERRORS = {
    "complex output": (lambda api, np_: api.grad(np_.sin)(3. + 4j),
                       "real-valued outputs.*holomorphic=True"),
    "holomorphic at a real input": (lambda api, np_: api.grad(np_.sin, holomorphic=True)(3.),
                                    "holomorphic=True requires inputs with complex dtype"),
    "holomorphic, real output": (lambda api, np_: api.grad(np_.abs, holomorphic=True)(3j),
                                 "holomorphic=True requires outputs with complex dtype"),
    "jacfwd at a complex input": (lambda api, np_: api.jacfwd(np_.sin)(1j),
                                  "jacfwd requires real-valued inputs.*holomorphic=True"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_jax(name):
    fn, pattern = ERRORS[name]
    with pytest.raises(TypeError, match=pattern):
        fn(jax, jjnp)
    with pytest.raises(TypeError, match=pattern):
        fn(kiln, jnp)
