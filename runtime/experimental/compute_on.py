"""`kiln.experimental.compute_on`: JAX's `compute_on(compute_type)`, a context manager that
asks for the operations inside it to run on the host ('device_host') or elsewhere, and
`compute_on2(f, *, compute_type, out_memory_spaces, compiler_options=None)`, its function
form. kiln's devices compute where their memory is (the host CPU for the CPU backends), so
both check their arguments as JAX does (a `TypeError` for a compute type that is not a
string, a `ValueError` for one JAX does not know, raised on entering the context) and then run
the same code: values are those of the code without them, eagerly and under `jit`, `grad`
and `vmap`."""
import contextlib
import functools

__all__ = ["compute_on", "compute_on2"]


def _check_compute_type(compute_type):
    if not isinstance(compute_type, str):
        raise TypeError("`compute_on`'s compute_type argument must be a string.")
    if compute_type not in ("device_host", "device", "tpu_sparsecore") \
            and not compute_type.startswith("gpu_stream:"):
        raise ValueError(f"Invalid compute type {compute_type}. Current supported values are "
                         "`device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.")


@contextlib.contextmanager
def compute_on(compute_type: str):
    """Run the block's operations on `compute_type` ('device_host', 'device',
    'tpu_sparsecore' or 'gpu_stream:N'); in kiln, where they would run anyway."""
    _check_compute_type(compute_type)
    yield


def compute_on2(f=None, *, compute_type, out_memory_spaces, compiler_options=None):
    """`f` run on `compute_type`, its results in `out_memory_spaces` (a decorator when `f` is
    omitted); in kiln, `f` itself once the compute type is checked."""
    if f is None:
        return lambda g: compute_on2(g, compute_type=compute_type,
                                     out_memory_spaces=out_memory_spaces,
                                     compiler_options=compiler_options)
    _check_compute_type(compute_type)

    @functools.wraps(f)
    def on(*args):
        return f(*args)
    return on
