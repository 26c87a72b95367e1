"""Eager calls of `kiln.random`'s functions compile once their signature repeats
(runtime/eager_tiers.py): the compiled calls give the eager calls' bits, Python numbers are
passed to the compiled code (one compile for every value), and the calls that must stay eager
do."""
import inspect
import numpy as np
import pytest

import kiln
import kiln.random as random
from kiln import eager_tiers
from test_random import KEY_API_UNDER_JIT, _ULP_UNDER_JIT

F32 = np.float32
# One call of each function that compiles (its key first); the sizes make every branch run.
# test_random's table gives those it checks under jit; the key's own functions do not compile.
CALLS = {name: call for name, call in KEY_API_UNDER_JIT.items()
         if name not in _ULP_UNDER_JIT | {"key_data", "wrap_key_data", "clone", "key_impl"}}
CALLS |= {
    "split": lambda k: random.split(k, 3),
    "fold_in": lambda k: random.fold_in(k, 7),
    "bits": lambda k: random.bits(k, (5,), np.uint16),
    "uniform": lambda k: random.uniform(k, (2, 3), minval=-1.0, maxval=2.0),
    "randint": lambda k: random.randint(k, (6,), -3, 9),
    "bernoulli": lambda k: random.bernoulli(k, 0.3, (7,)),
    "permutation": lambda k: random.permutation(k, 9),
    "choice": lambda k: random.choice(k, 5, (3,), replace=False),
    "categorical": lambda k: random.categorical(k, np.log(F32([0.2, 0.3, 0.5])), shape=(4,)),
    "normal": lambda k: random.normal(k, (9,)),
    "truncated_normal": lambda k: random.truncated_normal(k, -1.0, 2.0, (5,)),
    "gamma": lambda k: random.gamma(k, F32([0.5, 3.0]), (3, 2)),
    "loggamma": lambda k: random.loggamma(k, 0.7, (4,)),
    "beta": lambda k: random.beta(k, 2.0, 0.5, (4,)),
    "dirichlet": lambda k: random.dirichlet(k, F32([1.0, 2.0, 0.5]), (2,)),
    "exponential": lambda k: random.exponential(k, (5,)),
    "gumbel": lambda k: random.gumbel(k, (5,)),
    "laplace": lambda k: random.laplace(k, (5,)),
    "logistic": lambda k: random.logistic(k, (5,)),
    "rademacher": lambda k: random.rademacher(k, (5,)),
}


@pytest.fixture(autouse=True)
def compile_on_the_third_call(monkeypatch):
    """Two eager calls of a signature, then compiled (the default waits for 16)."""
    monkeypatch.setattr(eager_tiers, "EAGER_CALLS", 2)


def tiers(name):
    return getattr(random, name)._kiln_tiers


def compiled_entries(name):
    return [v for v in tiers(name).values() if type(v) is not int]


def bits(out):
    if isinstance(out, random.PRNGKeyArray):
        out = random.key_data(out)
    return np.asarray(out)


def test_every_function_of_a_key_compiles_or_says_why_not():
    tiered = {n for n in random.__all__ if hasattr(getattr(random, n), "_kiln_tiers")}
    assert tiered == set(CALLS)
    kept_eager = {n for n in random.__all__ if not hasattr(getattr(random, n), "_kiln_tiers")}
    # keys are made, read or copied, or the compiled code rounds otherwise (random.py)
    assert kept_eager == {"PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "clone",
                          "PRNGKeyArray", "key_dtype", "cauchy", "ball", "wald",
                          "multivariate_normal", "orthogonal"}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_compiled_calls_give_the_eager_bits(name):
    call = CALLS[name]
    tiers(name).clear()
    key, other = random.key(11), random.PRNGKey(12)
    eager = [bits(call(key)) for _ in range(eager_tiers.EAGER_CALLS)]
    assert not compiled_entries(name)
    compiled = [bits(call(key)) for _ in range(2)]
    assert len(compiled_entries(name)) == 1
    for out in eager[1:] + compiled:
        assert out.dtype == eager[0].dtype
        np.testing.assert_array_equal(out, eager[0])
    # raw key data: another signature, eager twice, then compiled, the same bits
    raw = [bits(call(other)) for _ in range(eager_tiers.EAGER_CALLS + 1)]
    assert len(compiled_entries(name)) == 2
    np.testing.assert_array_equal(raw[-1], raw[0])


def test_python_numbers_are_passed_to_one_compiled_function():
    tiers("uniform").clear()
    tiers("fold_in").clear()
    key = random.key(3)
    eager_uniform = inspect.unwrap(random.uniform)
    for hi in [1.0, 2.0, 3.5, 10.0, 0.25]:
        got = random.uniform(key, (4,), maxval=hi)
        np.testing.assert_array_equal(got, eager_uniform(key, (4,), maxval=hi))
    assert len(compiled_entries("uniform")) == 1
    eager_fold = inspect.unwrap(random.fold_in)
    for step in range(6):
        np.testing.assert_array_equal(random.key_data(random.fold_in(key, step)),
                                      random.key_data(eager_fold(key, step)))
    assert len(compiled_entries("fold_in")) == 1


def test_static_parameters_are_part_of_the_signature():
    tiers("normal").clear()
    key = random.key(0)
    for shape in [(2,), (3,), (2,), (3,), (2,), (3,)]:
        assert random.normal(key, shape).shape == shape
    assert len(compiled_entries("normal")) == 2
    tiers("split").clear()
    for num in [2, 3, 2, 3, 2, 3]:
        assert random.split(key, num).shape == (num,)
    assert len(compiled_entries("split")) == 2


def test_errors_are_the_eager_ones_every_time():
    tiers("fold_in").clear()
    key = random.key(0)
    for _ in range(4):
        random.fold_in(key, 5)
        with pytest.raises(OverflowError, match="-5 out of bounds for uint32"):
            random.fold_in(key, -5)
        with pytest.raises(TypeError, match="fold_in accepts a scalar"):
            random.fold_in(key, np.int32([1, 2]))
    # the traceback shows the user's frame and the one of kiln's that raised, not the tiers'
    with pytest.raises(ValueError, match="negative dimension") as caught:
        random.normal(key, (2, -3))
    assert [str(entry.path) for entry in caught.traceback] == [__file__, kiln._traceback.__file__]


def test_int_beyond_int32_stays_eager():
    tiers("fold_in").clear()
    key = random.key(0)
    eager = inspect.unwrap(random.fold_in)
    for _ in range(4):
        np.testing.assert_array_equal(random.key_data(random.fold_in(key, 2 ** 31 + 5)),
                                      random.key_data(eager(key, 2 ** 31 + 5)))
    assert not compiled_entries("fold_in")


def sample_inside(key):
    return random.normal(key, (3,)) * 2.0


def test_calls_that_stay_eager():
    key = random.key(1)
    tiers("normal").clear()
    for _ in range(4):   # inside a function being compiled: part of that function
        kiln.jit(sample_inside)(key)
    with kiln.disable_jit():
        for _ in range(4):
            random.normal(key, (3,))
    # a traced key (eager vmap)
    kiln.vmap(lambda k: random.normal(k, (3,)))(random.split(key, 2))
    kiln.vmap(lambda k: random.normal(k, (3,)))(random.split(key, 2))
    kiln.vmap(lambda k: random.normal(k, (3,)))(random.split(key, 2))
    assert not tiers("normal")


def test_float_checks_compile_at_once_and_check_the_results():
    """As JAX's jitted samplers: the sampler's own NaNs (its erf_inv's) are not reported."""
    key = random.key(1)
    tiers("normal").clear()
    want = inspect.unwrap(random.normal)(key, (3,))
    with kiln.debug_nans(True):
        np.testing.assert_array_equal(random.normal(key, (3,)), want)
        with pytest.raises(FloatingPointError):
            random.uniform(key, (3,), minval=np.nan)
    assert len(compiled_entries("normal")) == 1


def test_turned_off(monkeypatch):
    monkeypatch.setattr(eager_tiers, "ENABLED", False)
    tiers("normal").clear()
    for _ in range(4):
        random.normal(random.key(2), (3,))
    assert not tiers("normal")


def test_enable_x64_changes_the_compiled_call():
    tiers("normal").clear()
    key = random.PRNGKey(4)
    for _ in range(eager_tiers.EAGER_CALLS + 1):
        assert random.normal(key, (3,)).dtype == np.float32
    with kiln.enable_x64(True):
        for _ in range(2):
            assert random.normal(key, (3,)).dtype == np.float64
    assert random.normal(key, (3,)).dtype == np.float32


def ones_times(x, n):
    return kiln.numpy.ones(n) * x


def test_a_signature_that_does_not_compile_stays_eager():
    """`n` is passed to the compiled code (not named static), but the shape needs it: the
    compile fails once, and that signature runs eagerly from then on."""
    f = eager_tiers.tiered(ones_times)
    for n in [3, 3, 3, 3, 4]:
        np.testing.assert_array_equal(f(2.0, n), np.full(n, 2.0, np.float32))
    assert list(f._kiln_tiers.values()) == [eager_tiers._EAGER]
    g = eager_tiers.tiered(ones_times, static=("n",))
    for n in [3, 3, 3, 3]:
        np.testing.assert_array_equal(g(2.0, n), np.full(n, 2.0, np.float32))
    assert len([v for v in g._kiln_tiers.values() if type(v) is not int]) == 1


def test_stays_eager_while_a_default_device_is_set():
    tiers("normal").clear()
    key = random.key(5)
    with kiln.default_device(kiln.devices("cpu")[0]):
        for _ in range(4):
            random.normal(key, (3,))
        assert not tiers("normal")
    for _ in range(4):   # and compiles again once the setting is gone
        random.normal(key, (3,))
    assert len(compiled_entries("normal")) == 1


def test_the_default_threshold(monkeypatch):
    monkeypatch.undo()
    assert eager_tiers.EAGER_CALLS == 16
    tiers("split").clear()
    key = random.key(6)
    outs = [random.key_data(random.split(key)) for _ in range(eager_tiers.EAGER_CALLS)]
    assert not compiled_entries("split")
    outs.append(random.key_data(random.split(key)))
    assert len(compiled_entries("split")) == 1
    np.testing.assert_array_equal(outs[-1], outs[0])


def scaled(x, *factors, axis=0):
    return kiln.numpy.sum(x, axis=axis) * kiln.numpy.prod(kiln.numpy.asarray(factors))


def test_arguments_of_a_star_parameter_are_not_named_after_the_keywords():
    """`scaled(x, 2.0, 3.0)`: the 3.0 is one of `factors`, passed to the compiled code, not a
    value of the static `axis` (the parameter after `*factors`)."""
    f = eager_tiers.tiered(scaled, static=("axis",))
    x = np.ones((2, 3), np.float32)
    for b in [3.0, 4.0, 5.0, 6.0]:
        np.testing.assert_array_equal(f(x, 2.0, b), np.full(3, 4.0 * b, np.float32))
    assert len([v for v in f._kiln_tiers.values() if type(v) is not int]) == 1


@pytest.mark.parametrize("name, call", [
    ("normal", lambda k: random.normal(k, (300, 300))),
    ("uniform", lambda k: random.uniform(k, (eager_tiers.LARGE_CALL,), minval=-1.0)),
    ("permutation", lambda k: random.permutation(k, np.arange(eager_tiers.LARGE_CALL)))])
def test_a_large_call_compiles_at_once_with_the_eager_bits(name, call, monkeypatch):
    """A call over LARGE_CALL elements or more (a shape or an array argument) compiles on its
    first call: eager NumPy passes over millions of elements cost far more than a compile."""
    tiers(name).clear()
    key = random.key(5)
    out = bits(call(key))
    assert len(compiled_entries(name)) == 1
    monkeypatch.setattr(eager_tiers, "ENABLED", False)
    np.testing.assert_array_equal(out, bits(call(key)))   # the eager bits
