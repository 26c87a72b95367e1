"""`kiln.experimental.custom_partitioning`: JAX's `custom_partitioning` decorator and the
Shardy rule types of its `def_partition` (`SdyShardingRule`, `ArrayMapping`,
`CompoundFactor`, `BATCHING`).

In JAX, a `custom_partitioning` function tells XLA's SPMD partitioner how to shard its
operation (`def_partition`'s callbacks or `sharding_rule`). kiln runs a sharded jit as one
replica per device of the mesh, with each replica computing the function's global semantics
on the values it holds (docs/pmap.md), so the partition callbacks are stored and not called;
the function itself runs. As in JAX, a call before `def_partition` raises `AttributeError`,
and one with propagation callbacks but no `sharding_rule` raises JAX's Shardy
`NotImplementedError`. Where JAX raises `NotImplementedError` for `grad` and `vmap` of the
function, kiln differentiates and batches its code. The rule types check their factors as
JAX's do. JAX's `custom_partitioning_p` primitive has no kiln counterpart (kiln has no
jaxprs; docs/compat.md).
"""
import functools

__all__ = ["custom_partitioning", "SdyShardingRule", "ArrayMapping", "CompoundFactor",
           "BATCHING"]

BATCHING = "\u2026"      # "…": leading batching dimensions in an ArrayMapping


def _is_batching(factor):
    return factor[:1] == BATCHING and (len(factor) == 1 or factor[1:].isdigit())


def _check_factor(factor):
    if not factor[0].isalpha():
        raise ValueError(f"Factor names have to start with a letter, but got '{factor[0]}'")
    for char in factor[1:]:
        if char != "_" and not char.isalnum():
            raise ValueError(f"Unknown character '{char}'")


class CompoundFactor(tuple):
    """Several factors making up one dimension, e.g. `CompoundFactor('b', 'c')`."""

    def __new__(cls, *factors):
        if len(factors) < 2:
            raise ValueError("A compound factor should contain at least two factors")
        for factor in factors:
            if not isinstance(factor, str):
                raise ValueError("Each element of CompoundFactor must be a str, but got "
                                 f"{type(factor)}")
            if _is_batching(factor):
                raise ValueError("Ellipsis can't be used in a compound factor")
            _check_factor(factor)
        return super().__new__(cls, factors)


class ArrayMapping(tuple):
    """The factors of an operand's or result's dimensions: names or `CompoundFactor`s, with
    an optional leading `BATCHING`."""

    def __new__(cls, *dim_mappings):
        for i, dim in enumerate(dim_mappings):
            if not isinstance(dim, (str, CompoundFactor)):
                raise ValueError("Each element of ArrayMapping must be a str or "
                                 f"CompoundFactor, but got {type(dim)}")
            if isinstance(dim, str):
                if not _is_batching(dim):
                    _check_factor(dim)
                elif i != 0:
                    raise ValueError("Ellipsis can only be used at the beginning of a dimension")
        return super().__new__(cls, dim_mappings)


class SdyShardingRule:
    """A Shardy sharding rule: the operands' and results' `ArrayMapping`s, the factors that
    are reductions, need replication or are permutations, and the sizes of factors used only
    inside compound factors."""

    def __init__(self, operand_mappings, result_mappings, *, reduction_factors=(),
                 need_replication_factors=(), permutation_factors=(), **factor_sizes):
        whole = {}                                 # factor -> names a whole dimension
        for mapping in operand_mappings + result_mappings:
            for dim in mapping:
                for factor in ((dim,) if isinstance(dim, str) else dim):
                    whole[factor] = whole.get(factor, False) or isinstance(dim, str)
        for factor in factor_sizes:
            if factor not in whole:
                raise ValueError(f"Factor {factor} is not used in the rule, but size is provided")
        for factor, is_whole in whole.items():
            if not is_whole and factor not in factor_sizes:
                raise ValueError(f"Factor {factor} is only used in compound factors; must "
                                 "specify its size")
            if is_whole and factor in factor_sizes:
                raise ValueError(f"Factor {factor} represents a whole dimension; do not "
                                 "specify its size")
        special = set()
        for kind, factors in (("reduction_factors", reduction_factors),
                              ("need_replication_factors", need_replication_factors),
                              ("permutation_factors", permutation_factors)):
            if not isinstance(factors, tuple):
                raise ValueError(f"{kind} must be a tuple of factors")
            if len(set(factors)) != len(factors):
                raise ValueError(f"{kind} contains duplicated factors")
            for factor in factors:
                if factor not in whole:
                    raise ValueError(f"Factor {factor} in {kind} is not used in the rule")
                if factor in special:
                    raise ValueError(f"Factor {factor} can only be in one of the reduction, "
                                     "need replication, or permutation factor sets.")
                special.add(factor)
        self.operand_mappings = tuple(operand_mappings)
        self.result_mappings = tuple(result_mappings)
        self.factor_sizes = factor_sizes
        self.reduction_factors = reduction_factors
        self.need_replication_factors = need_replication_factors
        self.permutation_factors = permutation_factors

    def __str__(self):
        return f"SdyShardingRule({self.operand_mappings}, {self.result_mappings}, " \
               f"{self.factor_sizes})"


class custom_partitioning:
    """`fun` with a partitioning of its own for XLA's SPMD partitioner (JAX's decorator);
    kiln runs `fun`'s global semantics and stores the partitioning."""

    def __init__(self, fun, static_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = static_argnums

    def def_partition(self, partition, infer_sharding_from_operands=None,
                      propagate_user_sharding=None, decode_shardings=True, sharding_rule=None,
                      *, reduction_factors=(), need_replication_factors=(),
                      permutation_factors=(), **factor_sizes):
        """Record the partitioning: the `partition` callback, and `sharding_rule` (an
        einsum-like string, an `SdyShardingRule` or a callable) or the propagation
        callbacks. Returns `partition`, as JAX's does."""
        self.partition = partition
        self.infer_sharding_from_operands = infer_sharding_from_operands
        self.propagate_user_sharding = propagate_user_sharding
        self.decode_shardings = decode_shardings
        self.sharding_rule = sharding_rule
        return partition

    def __call__(self, *args):
        if not hasattr(self, "partition"):
            raise AttributeError(f"custom_partitioning function {self.__name__!r} was called "
                                 "before def_partition: define its partitioning with "
                                 ".def_partition(partition, sharding_rule=...) first")
        if self.sharding_rule is None and (self.infer_sharding_from_operands is not None
                                           or self.propagate_user_sharding is not None):
            raise NotImplementedError(
                "Shardy is used, but sharding propagation callbacks instead of sharding_rule "
                "are provided. Need to provide sharding_rule to migrate to Shardy.")
        return self.fun(*args)
