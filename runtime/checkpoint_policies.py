"""`kiln.checkpoint_policies`: JAX's rematerialisation policies for `checkpoint(policy=...)`.

Each policy is JAX's predicate `(primitive, *avals, **params) -> bool` (may the results of
an equation of this primitive, with these input avals and params, be saved for the backward
pass?), with JAX's names and answers. `checkpoint(f, policy=...)` asks it once about each
top-level equation of `f`'s body when it specialises `f`, and the SSA form records the
answer as the results the `remat` body also returns (`num_saved`,
compiler/primitives/autodiff.py `with_policy`). The name policies look for the `name`
primitive of `kiln.ad_checkpoint.checkpoint_name`; the offload policies save the values on
the device, as kiln offloads nothing to the host (docs/differences.md)."""

_DOTS = ("dot_general",)


def everything_saveable(*_, **__):
    return True


def nothing_saveable(*_, **__):
    return False


def dots_saveable(prim, *_, **__):
    return getattr(prim, "name", prim) in _DOTS


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim, *_, **params):
    if getattr(prim, "name", prim) not in _DOTS:
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    return dots_with_no_batch_dims_saveable


def save_only_these_names(*names):
    return lambda prim, *_, **params: getattr(prim, "name", prim) == "name" and \
        params.get("name") in names


def save_any_names_but_these(*names):
    return lambda prim, *_, **params: getattr(prim, "name", prim) == "name" and \
        params.get("name") not in names


save_anything_except_these_names = save_any_names_but_these


def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                      names_which_can_be_offloaded, **_):
    return save_only_these_names(*names_which_can_be_saved, *names_which_can_be_offloaded)


def save_from_both_policies(policy_1, policy_2):
    return lambda *args, **params: policy_1(*args, **params) or policy_2(*args, **params)


__all__ = ["everything_saveable", "nothing_saveable", "dots_saveable", "checkpoint_dots",
           "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
           "offload_dot_with_no_batch_dims", "save_only_these_names",
           "save_any_names_but_these", "save_anything_except_these_names",
           "save_and_offload_only_these_names", "save_from_both_policies"]
