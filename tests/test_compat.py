"""kiln.compat: `import jax` answered by kiln (install_as_jax(), KILN_AS_JAX=1 through the
installed .pth file). Each case runs in a subprocess, so the real JAX of the test environment
does not interfere; the optax-style program's results are compared with the same program run on
JAX itself."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

PROGRAMS = pathlib.Path(__file__).parent / "compat_programs"


def _run(args, as_jax, cwd=None):
    env = dict(os.environ)
    env.pop("KILN_AS_JAX", None)
    if as_jax:
        env["KILN_AS_JAX"] = "1"
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                         timeout=300, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_optax_style_program_matches_jax():
    kiln_out = json.loads(_run([str(PROGRAMS / "optax_style.py")], as_jax=True))
    jax_out = json.loads(_run([str(PROGRAMS / "optax_style.py")], as_jax=False))
    assert kiln_out["checks"].pop("jax_is") == "kiln"
    assert jax_out["checks"].pop("jax_is") == "jax"
    assert kiln_out["checks"] == jax_out["checks"]
    np.testing.assert_allclose(kiln_out["losses"], jax_out["losses"], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(kiln_out["w"], jax_out["w"], rtol=1e-4, atol=1e-5)
    assert kiln_out["losses"][-1] < 0.01 * kiln_out["losses"][0]


IMPORTS = """
import kiln.compat, sys
kiln.compat.install_as_jax()
import jax, jax.numpy as jnp, kiln
from jax import lax, tree_util, random, nn, debug, tree
import jax.scipy.special, jax.scipy.stats.norm, jax.example_libraries.optimizers
import jax.example_libraries.stax, jax.typing, jax.dtypes, jax.nn.initializers
from jax.scipy.optimize import minimize
from jax.scipy.sparse.linalg import cg
assert jax.scipy.sparse.linalg is kiln.scipy.sparse.linalg and cg is kiln.scipy.sparse.linalg.cg
assert jax.scipy.optimize is kiln.scipy.optimize and minimize is kiln.scipy.optimize.minimize
from jax.tree_util import tree_map
assert jax is kiln and jnp is kiln.numpy and jax.lax is kiln.lax and jax.Array is kiln.Array
assert jax.scipy.special is kiln.scipy.special and tree is kiln.tree and tree_map is kiln.tree_util.tree_map
assert kiln.__spec__.name == "kiln" and sys.modules["jax.numpy"] is kiln.numpy
import jax.experimental.multihost_utils
assert jax.experimental.multihost_utils is kiln.experimental.multihost_utils
from jax._src.flatten_util import ravel_pytree   # a private module that re-exports public names
import jax._src.tree_util, jax._src.typing
assert ravel_pytree is kiln.flatten_util.ravel_pytree and jax._src.typing is kiln.typing
assert jax.ops.segment_sum is kiln.ops.segment_sum   # as `import jax` makes jax.ops (jraph)
from jax._src.lax import lax as private_lax   # as JAX's page on writing primitives imports
from jax._src import api
assert private_lax is kiln.lax and api is kiln
from jax._src.core import trace_state_clean   # numpyro asks it whether it is being traced
assert trace_state_clean is kiln.core.trace_state_clean and trace_state_clean()
# What equinox and jaxtyping import at the top of their modules: traceback_util (kiln's
# traceback filter), dtypes (public names), dispatch (empty: its names are AttributeErrors)
import jax._src.traceback_util as traceback_util, jax._src.dispatch
from jax._src.dtypes import TypePromotionError
assert traceback_util.register_exclusion is kiln._traceback.register_exclusion
assert TypePromotionError is kiln.dtypes.TypePromotionError
try:
    jax._src.dispatch.wait_for_tokens
except AttributeError as e:
    assert "jax._src.dispatch.wait_for_tokens" in str(e) and "KILN_AS_JAX" in str(e), e
else:
    raise AssertionError("jax._src.dispatch.wait_for_tokens")
assert jax.__version_info__ == (0, 10, 2)   # the JAX release whose API kiln follows
import jax.extend.core, jax.interpreters.ad, jax.core, jax.lib
assert jax.extend.core is kiln.extend.core and jax.interpreters.ad is kiln.interpreters.ad
# what flax imports: the private twins of kiln.core, kiln.dtypes and kiln._traceback
from jax._src import core as private_core, dtypes as private_dtypes, traceback_util
import jax.extend.linear_util, jax.extend.source_info_util, jax.interpreters.partial_eval
assert private_core is kiln.core and private_dtypes is kiln.dtypes
assert traceback_util is kiln._traceback and jax.extend.linear_util is kiln.extend.linear_util
assert jax.interpreters.partial_eval is kiln.interpreters.partial_eval
for name in ("jax._src.interpreters.pxla", "jax._src.earray", "jaxlib",
             "jax.experimental.pallas"):
    try:
        __import__(name)
    except ImportError as e:
        assert "KILN_AS_JAX" in str(e) and "install_as_jax" in str(e), e
        print(name, "|", e)
    else:
        raise AssertionError(name)
kiln.compat.uninstall_as_jax()
import jax
assert jax is not kiln
print("ok")
"""


def test_install_as_jax_maps_modules_and_refuses_internals():
    out = _run(["-c", IMPORTS], as_jax=False)
    assert out.endswith("ok\n")
    assert "'jax._src.interpreters' is JAX's private implementation" in out
    assert "'jax.experimental.pallas' has no kiln counterpart (kiln.experimental.pallas does not exist)" in out


def test_install_after_real_jax_is_refused():
    out = _run(["-c", "import jax, kiln.compat\ntry:\n    kiln.compat.install_as_jax()\n"
                      "except RuntimeError as e:\n    print(e)"], as_jax=False)
    assert "JAX itself is imported already" in out


def _installed_pth():
    import kiln.compat
    found = [pathlib.Path(p) / kiln.compat.PTH_NAME for p in sys.path]
    return [p for p in found if p.is_file()]


def test_env_var_acts_at_interpreter_start(tmp_path):
    # the installed kiln-as-jax.pth does it: nothing imports kiln.compat in this program
    if not _installed_pth():
        pytest.skip("kiln-as-jax.pth is not installed: kiln was installed before setup.py "
                    "added it; reinstall kiln (pip install -e .)")
    out = _run(["-c", "import jax, sys; print(jax.__name__, 'kiln.compat' in sys.modules)"],
               as_jax=True, cwd=tmp_path)
    assert out.split() == ["kiln", "True"]
    out = _run(["-c", "import sys; print('kiln' in sys.modules)"], as_jax=False, cwd=tmp_path)
    assert out.split() == ["False"]


def test_pth_text_matches_the_packaging_hook():
    import kiln.compat
    setup = (pathlib.Path(__file__).parents[1] / "setup.py").read_text()
    assert "_compat.PTH_LINE" in setup
    found = _installed_pth()
    if found:
        assert found[0].read_text() == kiln.compat.PTH_LINE


@pytest.mark.parametrize("value,expect", [("0", "jax"), ("", "jax")])
def test_env_var_off_values(value, expect, tmp_path):
    env = dict(os.environ, KILN_AS_JAX=value)
    out = subprocess.run([sys.executable, "-c", "import jax; print(jax.__name__)"], env=env,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.stdout.split() == [expect]


@pytest.mark.parametrize("value", [1, 1.5, True, 2j, np.float16(1), np.arange(3, dtype=np.uint8)])
def test_dtypes_helpers_match_jax(value):
    import jax
    import kiln.dtypes
    import kiln.numpy as jnp
    assert kiln.dtypes.scalar_type_of(value) is jax.dtypes.scalar_type_of(value)
    dt = np.asarray(value).dtype
    assert kiln.dtypes.canonicalize_dtype(dt) == jax.dtypes.canonicalize_dtype(dt)
    assert kiln.dtypes.itemsize_bits(dt) == jax.dtypes.itemsize_bits(dt)
    assert kiln.dtypes.scalar_type_of(jnp.asarray(value)) is jax.dtypes.scalar_type_of(value)


def test_typed_key_dtype_is_an_extended_dtype():
    import kiln.dtypes
    import kiln.numpy as jnp
    import kiln.random
    k = kiln.random.key(0).dtype
    assert jnp.issubdtype(k, kiln.dtypes.prng_key) and jnp.issubdtype(k, kiln.dtypes.extended)
    assert not jnp.issubdtype(k, jnp.floating) and not jnp.issubdtype(jnp.uint32, kiln.dtypes.prng_key)
    assert kiln.dtypes.canonicalize_dtype(k, allow_extended_dtype=True) == k
    with pytest.raises(ValueError, match="extended dtype"):
        kiln.dtypes.canonicalize_dtype(k)
    assert isinstance(jnp.ones(2), kiln.typing.ArrayLike) and isinstance(2.0, kiln.typing.ArrayLike)


def test_write_pth_writes_the_line_site_runs(tmp_path):
    import kiln.compat
    path = kiln.compat.write_pth(str(tmp_path))
    assert path == str(tmp_path / "kiln-as-jax.pth")
    assert (tmp_path / "kiln-as-jax.pth").read_text() == kiln.compat.PTH_LINE
    assert kiln.compat.PTH_LINE.startswith("import ")   # site executes only such lines
