"""The op table (rewrites/op_table.py) names only real ops, and its facts fit together.

A misspelt or unregistered name in a set of op names never matches anything, so a pass that
asks for it silently does nothing (``stablehlo.copy``, once listed in two side tables, is
not an op of the StableHLO dialect).
"""

from __future__ import annotations

import pytest

from scalify_hlo.module_io import ir_context
from scalify_hlo.rewrites.op_table import (
    CUSTOM_CALL_TARGETS,
    OPS,
    RECORDS,
    Family,
    Trait,
    has_trait,
    ops_in_family,
    ops_with,
    target_has_trait,
)
from scalify_hlo.rewrites.rules import FAMILY_RULES, RULES

# Traits about float data: an op that has one must have a scale rule.
_FLOAT_DATA_TRAITS = (Trait.SUMS, Trait.KEEPS_RANGE, Trait.JOINS_WIDE_CLASS,
                      Trait.LAYOUT_ONLY, Trait.ZERO_FILL_THROUGH)


def test_every_op_in_the_table_is_registered() -> None:
    with ir_context() as ctx:
        assert not ctx.is_registered_operation("stablehlo.copy")  # the check can fail
        unregistered = sorted(name for name in OPS if not ctx.is_registered_operation(name))
    assert not unregistered, f"op table names unregistered ops: {unregistered}"


def test_one_record_per_op() -> None:
    names = [record.name for record in RECORDS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_family_has_a_rule() -> None:
    assert set(FAMILY_RULES) == set(Family)


def test_the_rules_are_the_ops_with_a_family() -> None:
    assert set(RULES) == {name for name, record in OPS.items() if record.family is not None}
    for name, rule in RULES.items():
        assert rule.family is FAMILY_RULES[OPS[name].family]


@pytest.mark.parametrize("trait", _FLOAT_DATA_TRAITS, ids=lambda t: t.name)
def test_float_data_traits_are_on_ops_with_rules(trait: Trait) -> None:
    assert ops_with(trait) <= set(RULES), sorted(ops_with(trait) - set(RULES))


def test_ops_without_a_rule_have_a_trait() -> None:
    """An op is in the table for its rule or for what a pass asks about it."""
    assert all(record.traits for record in RECORDS if record.family is None)


def test_wide_operands_only_on_ops_that_join_wide_classes() -> None:
    listed = {record.name for record in RECORDS if record.wide_operands}
    assert listed <= ops_with(Trait.JOINS_WIDE_CLASS)


def test_queries() -> None:
    assert has_trait("stablehlo.add", Trait.SUMS)
    assert not has_trait("stablehlo.multiply", Trait.SUMS)
    assert not has_trait("stablehlo.not_an_op", Trait.SUMS)
    assert target_has_trait("Sharding", Trait.LAYOUT_ONLY)
    assert not target_has_trait("cu_threefry2x32", Trait.LAYOUT_ONLY)
    assert all(traits for traits in CUSTOM_CALL_TARGETS.values())
    assert ops_in_family(Family.DOT) == ("stablehlo.dot_general", "stablehlo.convolution")
