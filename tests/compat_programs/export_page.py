"""The calls of JAX's `export` documentation page (docs/export/export.md of JAX 0.10.2),
written against `jax`: run once on JAX and once on kiln (KILN_AS_JAX=1) by
tests/test_export.py, which compares the JSON this prints."""
import json
import re

import numpy as np
import jax
import jax.numpy as jnp
from jax import export, lax

out = {}


def f(x):
    return 2 * x * x


exported = export.export(jax.jit(f))(jax.ShapeDtypeStruct((), np.float32))
out["has_main"] = re.search(r".*@main.*", exported.mlir_module()) is not None
rehydrated_exp = export.deserialize(exported.serialize())


def callee(y):
    return 3. * rehydrated_exp.call(y * 4.)


out["callee"] = float(callee(1.))
out["callee_jit"] = float(jax.jit(callee)(1.))


def cube(x):
    return 7 * x * x * x


blob = export.export(jax.jit(cube))(1.).serialize(vjp_order=3)
rehydrated_f = export.deserialize(blob).call
out["orders"] = [float(rehydrated_f(0.1)), float(jax.grad(rehydrated_f)(0.1)),
                 float(jax.grad(jax.grad(rehydrated_f))(0.1)),
                 float(jax.grad(jax.grad(jax.grad(rehydrated_f)))(0.1))]
try:
    jax.grad(jax.grad(jax.grad(jax.grad(rehydrated_f))))(0.1)
except ValueError as e:
    out["fourth_order"] = "No VJP is available" in str(e)

out["default_platform"] = export.default_export_platform()
exp = export.export(jax.jit(lax.cos), platforms=["tpu"])(1.)
try:
    exp.call(1.)
except ValueError as e:
    out["platform_error"] = "was exported for platforms" in str(e)
exp_unsafe = export.export(jax.jit(lax.cos), platforms=["tpu"],
                           disabled_checks=[export.DisabledSafetyCheck.platform()])(1.)
out["unsafe"] = float(exp_unsafe.call(1.))
exp_multi = export.export(jax.jit(lax.cos), platforms=["tpu", "cpu", "cuda"])(1.)
out["multi"] = float(exp_multi.call(1.))
out["platforms"] = list(exp_multi.platforms)
out["calling_convention"] = export.export(jnp.cos)(1.).calling_convention_version
out["versions"] = [export.minimum_supported_calling_convention_version,
                   export.maximum_supported_calling_convention_version]
out["serialized_is_bytes"] = isinstance(exported.mlir_module_serialized, bytes)
print(json.dumps(out, sort_keys=True))
