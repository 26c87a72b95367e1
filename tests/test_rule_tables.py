"""The rule tables (compiler/primitives/core.py): one table per kind of rule, each with one
signature; flags are fields; registering a rule of an unknown kind is an error at once."""
import pytest

import kiln.compiler.backends.llvm.codegen  # noqa: F401  (registers the LLVM tables' rules)
import kiln.compiler.backends.cuda.scalar  # noqa: F401  (and the CUDA backend's)
import kiln.compiler.backends.stablehlo  # noqa: F401  (and the StableHLO backend's)
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.core import (TABLES, FLAGS, Primitive, RuleTable, rule_table,
                                           BATCH, JVP)

# The kinds the transforms and the LLVM backend read; a new backend adds its own.
KINDS = {"jvp", "vjp", "vjp_forward", "batch", "batch_collective", "llvm", "llvm_scalar",
         "llvm_inplace", "llvm_scratch", "cuda_scalar", "batch_across_processes", "partition",
         "stablehlo", "checkify", "jet"}


def _loose_primitive(name="loose"):
    return Primitive(name, lambda x: x, lambda x: x)   # not registered


def test_the_tables_are_the_kinds_of_rules():
    assert set(TABLES) == KINDS
    for kind, table in TABLES.items():
        assert isinstance(table, RuleTable) and table.kind == kind
        assert table.signature.startswith(kind + "("), table.signature


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_table_holds_callable_rules_of_registered_primitives(kind):
    table = TABLES[kind]
    assert table, f"the {kind} table is empty"
    for prim, rule in table.items():
        assert PRIMITIVES.get(prim.name) is prim, prim
        assert callable(rule), (kind, prim.name)


def test_an_unknown_rule_kind_is_an_error_naming_the_kinds():
    prim = _loose_primitive()
    with pytest.raises(TypeError) as e:
        prim.def_rules(jvpp=lambda eqn, primals, tangents: None)
    msg = str(e.value)
    assert "primitive 'loose': unknown rule kind 'jvpp'" in msg
    assert all(kind in msg for kind in KINDS) and "primitives/core.py" in msg
    assert all(prim not in table for table in TABLES.values())


def test_def_rules_puts_each_rule_in_its_table():
    prim = _loose_primitive()
    def jvp(eqn, primals, tangents):
        return [], []
    def batch(args, dims):
        return args[0], dims[0]
    try:
        assert prim.def_rules(jvp=jvp, batch=batch) is prim
        assert JVP[prim] is jvp and BATCH[prim] is batch
    finally:
        del JVP[prim], BATCH[prim]


def test_tables_take_primitives_and_callables_only():
    with pytest.raises(TypeError, match="the jvp table is keyed by primitives, not 'sin'"):
        JVP["sin"] = lambda eqn, primals, tangents: None
    with pytest.raises(TypeError, match="the batch rule of 'loose' is not callable: True"):
        BATCH[_loose_primitive()] = True


def test_a_table_is_declared_once():
    with pytest.raises(RuntimeError, match="rule table 'jvp' declared twice"):
        rule_table("jvp", "jvp(eqn, primals, tangents) -> (outs, out_tangents)")


def test_flags_are_fields_and_misspelt_flags_fail():
    prim = _loose_primitive()
    assert all(getattr(prim, flag) is False for flag in FLAGS)
    with pytest.raises(AttributeError):
        prim.zero_derivatives = True
    assert PRIMITIVES["debug_print"].effect and PRIMITIVES["tape_new"].distinct
    assert PRIMITIVES["psum"].collective and PRIMITIVES["iota"].zero_derivative

