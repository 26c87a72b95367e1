"""kiln: JAX's API, built as a source-to-source compiler.

This package is what users import (`import kiln`, `import kiln.numpy as jnp`). It holds the
arrays, the API, dispatch and devices; `kiln.compiler` (a sub-package) turns Python source into
machine code and is never imported by the compiler-free parts of the runtime at import time.
"""
from .compiler.config import config
from .array import Array
from .devices import (devices, local_devices, device_count, local_device_count,  # noqa: F401
                      default_backend, process_index, process_count, process_indices,
                      host_id, host_count, host_ids, Device, block_until_ready)
from ._default_device import default_device  # noqa: F401
from .placement import (device_put, device_get, copy_to_host_async, reshard, make_array_from_callback,  # noqa: F401
                        make_array_from_single_device_arrays,
                        make_array_from_process_local_data, device_put_sharded,
                        device_put_replicated)
from . import sharding  # noqa: F401,E402
from .sharding import (NamedSharding, PartitionSpec as P, Shard, make_mesh,  # noqa: F401
                       set_mesh, auto_pcast, remove_size_one_mesh_axis_from_type)
from . import tree_util, tree, lax  # noqa: F401,E402
from .jit import jit, make_ir, disable_jit  # noqa: F401,E402
from . import debug  # noqa: F401,E402
from .ad import (grad, value_and_grad, jvp, vjp, linearize, jacfwd, jacrev,  # noqa: F401,E402
                 jacobian, hessian)
from .custom_derivatives import custom_jvp, custom_vjp, checkpoint, remat  # noqa: F401,E402
from .vmap import vmap  # noqa: F401,E402
from .pmap import pmap  # noqa: F401,E402
from .shard_map import shard_map, smap  # noqa: F401,E402
from .introspection import make_jaxpr, eval_shape, ShapeDtypeStruct, typeof  # noqa: F401,E402
from .ad_extras import (custom_gradient, linear_transpose, closure_convert,  # noqa: F401,E402
                        fwd_and_bwd)  # noqa: F401,E402
from .annotations import named_call, named_scope, ensure_compile_time_eval  # noqa: F401,E402
from . import checkpoint_policies, ad_checkpoint  # noqa: F401,E402
from .ad import float0  # noqa: F401,E402
from .settings import (enable_x64, debug_nans, debug_infs, log_compiles,  # noqa: F401,E402
                       explain_cache_misses, check_tracer_leaks, checking_leaks, enable_checks,
                       default_matmul_precision, threefry_partitionable, default_prng_impl,
                       clear_caches, print_environment_info, numpy_rank_promotion,
                       numpy_dtype_promotion, legacy_prng_key, transfer_guard,
                       transfer_guard_host_to_device, transfer_guard_device_to_host,
                       transfer_guard_device_to_device, debug_key_reuse, enable_custom_prng,
                       softmax_custom_jvp, effects_barrier, live_arrays, no_tracing,
                       no_execution, thread_guard, allow_f16_reductions,
                       jax2tf_associative_scan_reductions, array_garbage_collection_guard,
                       make_user_context, memory)

from .callbacks import pure_callback  # noqa: F401,E402
from .refs import Ref, new_ref, empty_ref, freeze, free_ref, ds  # noqa: F401,E402

from .compiler import __version__  # noqa: F401,E402
from .version import __version_info__  # noqa: F401,E402

__all__ = ["Array", "config", "jit", "make_ir", "grad", "value_and_grad", "jvp", "vjp",
           "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "custom_jvp",
           "custom_vjp", "checkpoint", "remat", "vmap", "pmap", "shard_map", "disable_jit", "debug", "devices",
           "local_devices", "device_count", "local_device_count", "process_index",
           "process_count", "default_backend", "default_device", "device_put", "block_until_ready", "tree",
           "process_indices", "host_id", "host_count", "host_ids", "Device", "device_get",
           "reshard", "make_array_from_callback", "make_array_from_single_device_arrays",
           "make_array_from_process_local_data", "device_put_sharded", "device_put_replicated",
           "sharding", "NamedSharding", "P", "Shard",
           "make_mesh", "set_mesh", "smap", "auto_pcast", "remove_size_one_mesh_axis_from_type",
           "tree_util", "lax", "numpy", "random", "nn", "scipy", "example_libraries",
           "test_util", "aot", "compiler", "distributed", "export", "image", "dlpack",
           "custom_batching", "monitoring", "ffi", "core", "interpreters", "api_util",
           "lib", "ops", "ref", "stages", "experimental",
           # inspection, differentiation helpers, annotations, options (docs/differences.md)
           "make_jaxpr", "eval_shape", "ShapeDtypeStruct", "typeof", "custom_gradient",
           "linear_transpose", "closure_convert", "named_call", "named_scope",
           "ensure_compile_time_eval", "checkpoint_policies", "float0", "enable_x64",
           "debug_nans", "debug_infs", "log_compiles", "explain_cache_misses",
           "check_tracer_leaks", "checking_leaks", "enable_checks", "default_matmul_precision",
           "threefry_partitionable", "default_prng_impl", "clear_caches",
           "print_environment_info", "dtypes", "typing", "compat", "errors", "pure_callback",
           "numpy_rank_promotion", "numpy_dtype_promotion", "legacy_prng_key", "transfer_guard",
           "transfer_guard_host_to_device", "transfer_guard_device_to_host",
           "transfer_guard_device_to_device", "debug_key_reuse", "enable_custom_prng",
           "softmax_custom_jvp", "effects_barrier", "live_arrays", "fwd_and_bwd",
           "copy_to_host_async", "no_tracing", "no_execution", "thread_guard",
           "allow_f16_reductions", "jax2tf_associative_scan_reductions",
           "array_garbage_collection_guard", "make_user_context", "memory",
           "Ref", "new_ref", "empty_ref", "freeze", "free_ref", "ds", "profiler"]


def __dir__():
    """The public names: kiln's own modules (array, dispatch, staging, ...) are attributes of
    the package once imported, but not part of its API, so `dir()` and tab completion leave
    them out."""
    return sorted(__all__ + ["__version__", "__version_info__"])


def __getattr__(name):
    # Submodules that pull in more of the library load on first use.
    import importlib
    if name in ("numpy", "random", "nn", "scipy", "example_libraries", "test_util", "aot", "pjrt",
                "distributed", "dtypes", "typing", "compat", "errors", "export", "profiler",
                "image", "dlpack", "custom_batching", "monitoring", "ffi", "core",
                "interpreters", "api_util", "lib", "ops", "ref", "stages", "experimental"):
        # (`import jax` gives jax.ops, jax.ref, jax.stages and jax.experimental too)
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
