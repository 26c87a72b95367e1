"""`kiln.example_libraries.stax`: JAX's small neural-network library, on kiln.

A layer is a pair `(init_fun, apply_fun)`:

    init_fun(rng, input_shape) -> (output_shape, params)
    apply_fun(params, inputs, **kwargs) -> outputs      (kwargs: `rng` for Dropout)

Combinators build networks from layers (`serial`, `parallel`, `FanOut`, `FanInSum`,
`FanInConcat`, `shape_dependent`). Parameter shapes, initial values (the same PRNG bits for
the same key: the initializers are `kiln.nn.initializers`, the keys split as JAX's stax splits
them), outputs and errors are those of `jax.example_libraries.stax`; `apply_fun` is ordinary
kiln code, so networks run eagerly, under `jit`, `grad` and `vmap`.

(The names are defined in `_stax`, with the helpers they use, which stay out of this
namespace; `__all__` lists them.)"""
from ._stax import *  # noqa: F401,F403
from ._stax import __all__  # noqa: F401
from ..wrappers import user_facing_names  # noqa: E402

user_facing_names(globals())
del user_facing_names
