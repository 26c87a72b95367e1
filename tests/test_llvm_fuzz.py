"""Random-program fuzzing of the LLVM backend against the reference backend (the oracle).

tests/fuzz_programs.py draws small programs (chains of elementwise, reduction, reshape, slice,
dot, sort and indexing operations with `lax` and Python control flow on traced values) as
Python source; each is written to a file, imported, and compiled with `kiln.jit(f,
backend="llvm")` (jit's default, named so that nothing falls back to the reference unseen)
and `kiln.jit(f, backend="reference")`, then run on the same inputs; a second test does the
same with the programs under `vmap` (two examples: an input and its elements rotated).
Values the generator marks exact must agree bit for bit (NaN positions and signs of zeros
included); inexact ones (after transcendentals, float sums, products and dots) to a relative
tolerance of about 840 float32 ulps (45,000 float64 ones), with an absolute floor scaled by
the largest magnitude among the inputs and results. A failure prints the generated program and
its inputs, shrunk by hypothesis.

The plain tests after the fuzzer are the minimal programs of bugs it found, kept as
regression tests.
"""
import hashlib
import importlib.util
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.tree_util import tree_leaves

from fuzz_programs import programs

pytestmark = pytest.mark.usefixtures("x64_module")   # float64 inputs stay float64

FUZZ_SETTINGS = settings(max_examples=150, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow,
                                                HealthCheck.data_too_large])
RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-11}


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz_programs")


def load(source, directory):
    """The function `prog` of `source`, written to a file in `directory` and imported (kiln
    reads a function's source from its file)."""
    name = "kiln_fuzz_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module.prog


def run_both(source, inputs, directory, transform=lambda f: f):
    """(LLVM results, reference results) of the program's `prog`, transformed, on `inputs`."""
    prog = transform(load(source, directory))
    want = kiln.jit(prog, backend="reference")(*inputs)
    got = kiln.jit(prog, backend="llvm")(*inputs)
    return [np.asarray(g) for g in tree_leaves(got)], [np.asarray(w) for w in tree_leaves(want)]


def _magnitude(arrays):
    """The largest finite magnitude among the float arrays (0 without any)."""
    return max((float(np.abs(a[np.isfinite(a)]).max(initial=0)) for a in arrays
                if a.dtype.kind == "f"), default=0.0)


def assert_identical(got, want, what):
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":   # signs of zeros too (NaNs' signs may differ)
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]),
                                      err_msg=f"{what}: signs")


def compare(program, got, want, conditioned=None):
    """got (LLVM) against want (reference): inexact values within the program precision's
    tolerance of the inputs' and results' magnitude, the others identical. A sum with
    cancellation (large terms of both signs) rounds differently in another summation order:
    `conditioned()`, when given, is the magnitude of the results on the inputs' absolute
    values (what such a sum's terms add up to), and an inexact value that misses the first
    tolerance must be within the same tolerance of that magnitude."""
    assert len(got) == len(want) == len(program.outputs)
    scale = max(1.0, _magnitude(list(program.inputs) + want))
    for value, g, w in zip(program.outputs, got, want, strict=True):
        what = f"output {value.name}"
        assert (g.shape, g.dtype) == (w.shape, w.dtype), what
        if value.inexact:
            rtol = RTOL[program.precision]
            if conditioned is not None and not np.allclose(g, w, rtol=rtol, atol=rtol * scale,
                                                           equal_nan=True):
                scale = max(scale, conditioned())
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, equal_nan=True,
                                       err_msg=what)
        else:
            assert_identical(g, w, what)


def absolute_magnitude(program, directory, transform=lambda f: f, inputs=None):
    """The largest finite magnitude of the reference's results on the absolute values of the
    inputs (booleans as they are)."""
    inputs = program.inputs if inputs is None else inputs
    absolute = [a if a.dtype.kind == "b" else np.abs(a) for a in inputs]
    prog = transform(load(program.source, directory))
    results = kiln.jit(prog, backend="reference")(*absolute)
    return _magnitude([np.asarray(r, np.float64) if np.asarray(r).dtype.kind in "iu" else
                       np.asarray(r) for r in tree_leaves(results)])


@FUZZ_SETTINGS
@given(program=programs())
def test_random_programs(program, program_dir):
    got, want = run_both(program.source, program.inputs, program_dir)
    compare(program, got, want, lambda: absolute_magnitude(program, program_dir))


def two_examples(a):
    """`a` and `a` with its elements rotated by one, stacked."""
    return np.stack([a, np.roll(a.reshape(-1), 1).reshape(a.shape)])


@settings(FUZZ_SETTINGS, max_examples=50)
@given(program=programs())
def test_random_programs_under_vmap(program, program_dir):
    inputs = [two_examples(a) for a in program.inputs]
    got, want = run_both(program.source, inputs, program_dir, kiln.vmap)
    compare(program, got, want, lambda: absolute_magnitude(program, program_dir, kiln.vmap,
                                                           inputs))


# ------------------------------------------------------------------ bugs the fuzzer found

def on_both(f, *args):
    """f's results on each backend, as lists of arrays."""
    return {backend: [np.asarray(r) for r in tree_leaves(kiln.jit(f, backend=backend)(*args))]
            for backend in ("reference", "llvm")}


def test_sums_start_from_positive_zero():
    """XLA's sums start from +0.0, so a sum of negative zeros is +0.0 (NumPy's too). The fused
    nest's combines carried LLVM's `nsz` flag, which let LLVM drop the +0.0 start: the row sum
    of this group (which also reduces columns, and whose sum feeds a sqrt) gave -0.0j, which
    sqrt took to the other side of its branch cut (4-4j for JAX's 4+4j). test_llvm_complex's
    hypothesis test found it."""
    def f(z, w):
        t = jnp.exp(z * 0.5j) * jnp.conj(w.T) / (1 + jnp.abs(z))
        rows = jnp.sum(t * t, axis=1)
        cols = jnp.max(jnp.real(t), axis=0) + jnp.imag(jnp.prod(t[::-1], axis=0))
        return rows, cols, jnp.sqrt(rows) * 2 - rows
    z, w = np.zeros((2, 4), np.complex64), np.full((4, 2), 1j, np.complex64)
    for backend, results in on_both(f, z, w).items():
        assert not np.signbit(results[0].imag).any(), (backend, results[0])
        assert (results[2] == np.complex64(4 + 4j)).all(), (backend, results[2])


def test_max_and_min_order_signed_zeros():
    """XLA's max and min order -0.0 below 0.0. The reference's reduce_max, cummax/cummin and
    scatter max/min returned whichever zero NumPy picks, and the LLVM scatter max/min copied
    that; the expected values are JAX 0.10.2's."""
    x = np.array([0.0, -0.0, -0.0, 0.0, -0.0], np.float32)
    y = np.array([-0.0, -0.0, 0.0, 0.0], np.float32)
    idx = np.array([0, 0, 1, 1, 2], np.int32)

    def f(x, y, idx):
        return (jnp.max(x), jnp.min(x), jnp.max(x[1:3]), lax.cummax(x, axis=0),
                lax.cummin(x, axis=0), lax.cummax(x, axis=0, reverse=True),
                y.at[idx].max(x), y.at[idx].min(x))
    expected = [0.0, -0.0, -0.0, [0.0] * 5, [0.0] + [-0.0] * 4, [0.0] * 4 + [-0.0],
                [0.0] * 4, [-0.0, -0.0, -0.0, 0.0]]
    for backend, results in on_both(f, x, y, idx).items():
        for k, (got, want) in enumerate(zip(results, expected, strict=True)):
            assert_identical(got, np.asarray(want, np.float32), f"{backend}: result {k}")


def test_functions_defined_in_a_compiled_loop_may_return():
    """The check for `return` inside a loop on traced values also looked inside functions
    defined in the loop's body."""
    def f(x, n):
        k = 0
        while k < n:
            def body(c, y):
                return c + y, c
            x, _ = lax.scan(body, x, jnp.ones((2,) + x.shape, x.dtype))
            k = k + 1
        return x
    results = on_both(f, np.float32(1.0), np.int32(3))
    assert results["reference"] == results["llvm"] == [np.float32(7.0)]


def test_branch_local_variable_in_an_unrolled_loop():
    """A variable assigned in one branch of a traced `if` inside a loop that runs unrolled (a
    function is defined in its body) was taken for an output of the `if` on the second
    iteration and rejected as "assigned on only some paths"."""
    def f(x):
        y = x
        for _ in range(2):
            if jnp.any(x > 0):
                t = x + x
                y = t
            else:
                y = x - 1

            def g(c):
                return c
            y = g(y)
        return y
    for x, want in ((np.int32(1), 2), (np.int32(0), -1)):
        results = on_both(f, x)
        assert results["reference"] == results["llvm"] == [want]


def test_pow_with_a_scalar_half_exponent():
    """The reference computed x ** 0.5 with NumPy, which takes a scalar exponent 0.5 for a
    square root: pow(-inf, 0.5) came out NaN (JAX: inf) and pow(-0.0, 0.5) -0.0 (JAX: 0.0)."""
    x = np.array([-np.inf, -0.0, 4.0, -8.0], np.float32)

    def f(x):
        return jnp.power(x, 0.5), x[0] ** 0.5, jnp.power(x.astype(jnp.float64), 0.5)
    want = np.array([np.inf, 0.0, 2.0, np.nan])
    for backend, (powers, first, wide) in on_both(f, x).items():
        assert_identical(powers, want.astype(np.float32), backend)
        assert_identical(first, np.float32(np.inf), backend)
        assert_identical(wide, want, backend)
