"""Shared pytest configuration: hypothesis profiles and small array fixtures.

Two hypothesis profiles: "dev" (the default: a moderate number of examples) and "ci" (fewer
examples, loaded when the `CI` environment variable is set). Both disable the per-example
deadline, because the first call of a kiln operation pays for imports and caches. Set
`HYPOTHESIS_PROFILE` to pick a profile explicitly.
"""
import os

# Eight CPU devices, as JAX's own test suite runs, so pmap maps over 1, 2, 3 or 8 of them.
# (Set before kiln is imported: the device count is read once.)
os.environ.setdefault("KILN_NUM_CPU_DEVICES", "8")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from kiln.compiler.config import config  # noqa: E402

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=15, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
# Every pass's output is checked by the SSA verifier throughout the suite.
os.environ.setdefault("KILN_VERIFY", "1")

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def x64():
    """Run a test with `enable_x64` on; the previous value is restored afterwards."""
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    try:
        yield
    finally:
        config.update("enable_x64", old)


@pytest.fixture(scope="module")
def x64_module():
    """`enable_x64` for a whole module (hypothesis tests cannot take function fixtures):
    `pytestmark = pytest.mark.usefixtures("x64_module")`."""
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    try:
        yield
    finally:
        config.update("enable_x64", old)
