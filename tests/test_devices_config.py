"""kiln.devices, device_put, block_until_ready and kiln.config."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp


def test_devices_and_backend():
    devs = kiln.devices()
    assert len(devs) >= 1 and devs[0].platform == "cpu"
    assert kiln.default_backend() == "cpu"
    assert kiln.device_count() == len(devs)
    assert repr(devs[0]) == "CpuDevice(id=0)"
    with pytest.raises(RuntimeError, match="Unknown backend"):
        kiln.devices("rocm")
    with pytest.raises(RuntimeError, match="Unable to initialize backend 'tpu'"):  # no TPU here
        kiln.devices("tpu")


def test_device_put_pytree():
    tree = {"a": np.arange(3, dtype=np.float64), "b": [1.0, (2, np.float32(3))]}
    out = kiln.device_put(tree)
    assert isinstance(out["a"], kiln.Array) and out["a"].dtype == np.float32
    assert isinstance(out["b"][1][0], kiln.Array) and out["b"][1][0].weak_type
    assert kiln.block_until_ready(out) is out


def test_config_x64_roundtrip():
    assert jnp.asarray(np.float64(1.0)).dtype == np.float32
    kiln.config.update("jax_enable_x64", True)
    try:
        assert kiln.config.enable_x64
        assert jnp.asarray(np.float64(1.0)).dtype == np.float64
        assert jnp.asarray(1).dtype == np.int64
    finally:
        kiln.config.update("enable_x64", False)
    assert jnp.asarray(1).dtype == np.int32


def test_config_unknown_option():
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        kiln.config.update("bogus", True)
    with pytest.raises(AttributeError, match="unknown option 'jax_pmap_shmap_merge'"):
        kiln.config.update("jax_pmap_shmap_merge", True)   # JAX raises an AttributeError


def test_persistent_cache_options_are_recorded():
    # persistent_compilation_cache.md: programs set JAX's cache options at start-up.
    options = {"jax_compilation_cache_dir": "/tmp/jax_cache",
               "jax_persistent_cache_min_entry_size_bytes": -1,
               "jax_persistent_cache_min_compile_time_secs": 0,
               "jax_persistent_cache_enable_xla_caches": "all", "jax_logging_level": "DEBUG"}
    old = {name: kiln.config.read(name) for name in options}
    try:
        for name, value in options.items():
            kiln.config.update(name, value)
            assert kiln.config.read(name) == value and getattr(kiln.config, name) == value
        assert float(kiln.jit(lambda x: x + 1)(1.0)) == 2.0
    finally:
        for name, value in old.items():
            kiln.config.update(name, value)
    assert kiln.config.compilation_cache_dir is None
    from kiln.experimental.compilation_cache import compilation_cache as cc
    cc.set_cache_dir("/tmp/jax_cache")
    assert kiln.config.compilation_cache_dir == "/tmp/jax_cache"
    kiln.config.update("compilation_cache_dir", None)


def test_tree_module_short_names():
    assert kiln.tree.map(lambda x: x + 1, [1, (2, 3)]) == [2, (3, 4)]
    assert repr(kiln.tree.structure({"W": 1, "b": 2})) == "PyTreeDef({'W': *, 'b': *})"
    leaves, td = kiln.tree.flatten([1, {"a": 2}])
    assert kiln.tree.unflatten(td, leaves) == [1, {"a": 2}]


def _plus_one(a):
    return a + 1


def test_default_device_context_and_option():
    second = kiln.devices()[1]
    assert kiln.default_device.value is None
    with kiln.default_device(second):
        assert kiln.default_device.value is second
        assert jnp.array([1.0, 2.0]).devices() == {second}
        assert kiln.device_put(np.ones(2)).devices() == {second}
        assert kiln.jit(_plus_one)(np.ones(2)).devices() == {second}
        with kiln.default_device("cpu"):   # a platform name: its first device
            assert jnp.zeros(2).devices() == {kiln.devices()[0]}
    assert kiln.default_device.value is None
    assert (jnp.ones(2) + 1).devices() == {kiln.devices()[0]}
    kiln.config.update("jax_default_device", second)
    try:
        assert kiln.config.default_device is second
        assert jnp.zeros(3).devices() == {second}
        placed = kiln.device_put(jnp.zeros(3), kiln.devices()[2])
        assert kiln.device_put(placed).devices() == {kiln.devices()[2]}   # an Array stays
    finally:
        kiln.config.update("jax_default_device", None)
    assert jnp.zeros(3).devices() == {kiln.devices()[0]}


def test_default_device_is_per_thread():
    import threading
    seen = []
    with kiln.default_device(kiln.devices()[1]):
        worker = threading.Thread(target=lambda: seen.append(kiln.default_device.value))
        worker.start()
        worker.join()
    assert seen == [None]


def test_default_device_refuses_other_values():
    with pytest.raises(ValueError, match="either a Device object .* got: 3"):
        kiln.config.update("jax_default_device", 3)
    with pytest.raises(ValueError, match="either a Device object"):
        with kiln.default_device([kiln.devices()[0]]):
            pass
    with pytest.raises(RuntimeError, match="Unknown backend 'rocm'"):
        kiln.config.update("jax_default_device", "rocm")
    assert kiln.config.default_device is None


_ABSL_PROGRAM = """
import sys
from absl import app, flags
import kiln
flags.DEFINE_integer("steps", 1, "a flag of the program's own")

def main(argv):
    c = kiln.config
    print(flags.FLAGS.steps, c.enable_x64, c.numpy_rank_promotion, c.debug_nans,
          kiln.numpy.asarray(1).dtype, argv[1:])

if sys.argv[1] == "parse":
    kiln.config.parse_flags_with_absl()
    kiln.config.parse_flags_with_absl()          # a second call does nothing
    print(kiln.config.enable_x64, kiln.config.numpy_rank_promotion)
else:
    kiln.config.config_with_absl()
    app.run(main)
"""


@pytest.mark.parametrize("mode, expected", [
    ("run", "5 True raise False int64 ['run', 'rest']"),
    ("parse", "True raise"),
])
def test_config_with_absl_flags(mode, expected):
    # JAX's `config.config_with_absl()` / `parse_flags_with_absl()`: the options become absl
    # flags named jax_<option>; absl flags are process-wide, hence a fresh interpreter.
    import subprocess
    import sys
    pytest.importorskip("absl")
    args = [mode, "--jax_enable_x64", "--jax_numpy_rank_promotion=raise", "--steps=5", "rest"]
    if mode == "parse":
        args.remove("--steps=5")
    out = subprocess.run([sys.executable, "-c", _ABSL_PROGRAM, *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected
