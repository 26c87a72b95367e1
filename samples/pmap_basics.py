"""JAX's two pmap examples, unchanged but for the import: eight random matrices multiplied
on eight devices, and `normalize` with `lax.psum` across four.

    KILN_NUM_CPU_DEVICES=8 python samples/pmap_basics.py

(or `kiln.config.update("jax_num_cpu_devices", 8)` right after `import kiln`, as done here,
or XLA's `--xla_force_host_platform_device_count=8` in XLA_FLAGS).
"""
import kiln
from kiln import lax, random
import kiln.numpy as jnp

kiln.config.update("jax_num_cpu_devices", 8)

# Create 8 random 5000 x 6000 matrices, one per device
keys = random.split(random.key(0), 8)
mats = kiln.pmap(lambda key: random.normal(key, (500, 600)))(keys)

# Run a local matmul on each device in parallel (no data transfer)
result = kiln.pmap(lambda x: jnp.dot(x, x.T))(mats)  # result.shape is (8, 500, 500)

# Compute the mean on each device in parallel and print the result
print(kiln.pmap(jnp.mean)(result))


def normalize(x):
    return x / lax.psum(x, "i")


print(kiln.pmap(normalize, axis_name="i")(jnp.arange(4.)))
