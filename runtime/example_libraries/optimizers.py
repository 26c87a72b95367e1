"""`kiln.example_libraries.optimizers`: JAX's minimal first-order optimizer library.

An optimizer is a triple `(init_fun, update_fun, get_params)`:

    opt_init, opt_update, get_params = optimizers.adam(step_size=1e-3)
    opt_state = opt_init(params)                        # params: any pytree of arrays
    opt_state = opt_update(i, grads, opt_state)         # i: the step number
    params = get_params(opt_state)

The `optimizer` decorator lifts a per-array triple to pytrees: `init` runs on every leaf of
the parameter pytree, and the per-leaf states are kept flattened in an `OptimizerState`
(itself a pytree, so it can cross `kiln.jit`). Step sizes are constants or schedules
`i -> step size` (`exponential_decay`, `piecewise_constant`, ...). The API, values and errors
are those of `jax.example_libraries.optimizers`.

(The names are defined in `_optimizers`, with the helpers they use, which stay out of
this namespace; `__all__` lists them.)"""
from ._optimizers import *  # noqa: F401,F403
from ._optimizers import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
