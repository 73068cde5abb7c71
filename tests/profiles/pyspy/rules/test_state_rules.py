"""The default thread-state table (profiles/pyspy/rules/state_rules.py): the vocabulary,
its order, and rows that name only known states and levels."""

from profiles.pyspy.rules.rule_table import StateRules
from profiles.pyspy.rules.state_rules import DEFAULT_RULES, STATES, StateRule


def test_the_default_table_compiles_and_knows_only_the_vocabulary():
    StateRules(DEFAULT_RULES)
    assert {r.state for r in DEFAULT_RULES} <= {*STATES, "transparent"}
    assert {r.level for r in DEFAULT_RULES} <= {"decide", "primitive", "fallback"}
    assert StateRule("idle", "x") == StateRule(state="idle", name="x", level="decide")
