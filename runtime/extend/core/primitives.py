"""`kiln.extend.core.primitives`: kiln's primitives under the names JAX gives them in
`jax.extend.core.primitives` (`add_p`, `sin_p`, `while_p`, `scan_p`, ...), so that code which
walks the equations of a `make_jaxpr` result can compare `eqn.primitive` with them.

Each name is bound to the kiln primitive of the same operation. JAX's primitives that kiln
has no counterpart of are not here (kiln writes PRNG operations, `igamma`, `top_k`, ... as
compositions of others). `call_p`, `closed_call_p` and `jit_p` are JAX's call primitives
(a nested function call, a nested `jit`); kiln inlines such calls while it specialises, so no
equation of kiln's SSA has them. They are primitives of their own here, so that rule tables
keyed by them (a jaxpr interpreter's) can be built; such a rule is never reached, and an
interpreter sees the called function's equations in place of the call.
"""
from ...compiler.ir.registry import PRIMITIVES
from ...compiler.primitives.core import Primitive

# JAX's name -> kiln's, where they differ
_RENAMED = {"while": "while_loop", "scatter-add": "scatter_add", "scatter-mul": "scatter_mul",
            "scatter-min": "scatter_min", "scatter-max": "scatter_max",
            "custom_linear_solve": "linear_solve", "remat2": "remat"}
# JAX's `<name>_p` attribute names whose primitive's name differs from `<name>`
_ATTRIBUTE = {"while": "while_p", "scatter-add": "scatter_add_p",
              "scatter-mul": "scatter_mul_p", "scatter-min": "scatter_min_p",
              "scatter-max": "scatter_max_p", "custom_linear_solve": "linear_solve_p",
              "remat2": "remat_p"}
# JAX's primitives with the same name as kiln's
_SAME = (
    "abs acos acosh add all_gather all_to_all and argmax argmin asin asinh atan atan2 atanh "
    "axis_index bitcast_convert_type broadcast_in_dim cbrt ceil cholesky clamp clz complex "
    "concatenate cond conj conv_general_dilated convert_element_type copy cos cosh "
    "cumlogsumexp cummax cummin cumprod cumsum custom_jvp_call custom_vjp_call "
    "digamma div dot_general hessenberg name reduce_window_max reduce_window_min reduce_window_sum dynamic_slice dynamic_update_slice eig eigh eq erf erf_inv erfc "
    "exp exp2 expm1 fft floor gather ge gt imag integer_pow iota is_finite le lgamma log "
    "log1p logistic lt lu max min mul ne neg nextafter not or pad pmax pmin population_count "
    "pow ppermute psum qr real reduce_and reduce_max reduce_min "
    "reduce_or reduce_prod reduce_sum reduce_xor rem reshape rev round rsqrt scan scatter "
    "schur select_and_gather_add select_and_scatter_add select_n sharding_constraint "
    "shift_left shift_right_arithmetic shift_right_logical sign sin sinh slice sort sqrt "
    "square squeeze stop_gradient sub svd tan tanh transpose triangular_solve xor").split()


def _kiln_primitives():
    table = {f"{name}_p": PRIMITIVES[name] for name in _SAME if name in PRIMITIVES}
    table.update({_ATTRIBUTE[jax_name]: PRIMITIVES[kiln_name]
                  for jax_name, kiln_name in _RENAMED.items() if kiln_name in PRIMITIVES})
    return table


def _inlined(name):
    """A primitive for one of JAX's call primitives, which kiln's SSA never holds."""
    def refuse(*_, **__):
        raise NotImplementedError(
            f"the primitive '{name}' stands for JAX's '{name}' equations; kiln inlines such "
            "calls while it specialises a function, so it has no rules and is never applied")
    return Primitive(name, refuse, refuse, multiple_results=True,
                     doc=f"JAX's '{name}' call primitive (kiln inlines the call)")


globals().update(_kiln_primitives())
call_p = _inlined("call")
closed_call_p = _inlined("closed_call")
jit_p = _inlined("jit")

__all__ = sorted(list(_kiln_primitives()) + ["call_p", "closed_call_p", "jit_p"])


def __dir__():
    return list(__all__)
