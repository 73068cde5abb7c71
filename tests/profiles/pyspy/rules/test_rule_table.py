"""The compiled state-rule table (profiles/pyspy/rules/rule_table.py): the user's rules
file read and refused with its reason, patterns, native names normalised before matching."""

import pytest

from profiles.pyspy import ProfileError
from profiles.pyspy.rules.rule_table import (
    load_state_rules,
    normalise_native_name,
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("waiting: foo\n", "unknown state 'waiting'"),
        ("idle: foo [sometimes]\n", "unknown level 'sometimes'"),
        ("just words\n", "line 1 is not `STATE: NAME`"),
        ("idle: *\n", "would match every frame"),
        ("idle: re:(\n", "bad pattern"),
        ('[{"state": "idle"}]', "expected"),
        ('[{"state": "idle", "name": "x", "colour": "red"}]', "expected"),
        ("{}", "line 1"),
    ],
)
def test_a_bad_rules_file_is_a_profile_error_naming_the_problem(tmp_path, text, message):
    path = tmp_path / "rules"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match="state rules rules") as caught:
        load_state_rules(path)
    assert message in str(caught.value)
    with pytest.raises(ProfileError, match="cannot read it"):
        load_state_rules(tmp_path / "missing")


def test_normalising_keeps_operators_and_anonymous_namespaces():
    assert normalise_native_name("std::operator<< <char>") == "std::operator<< <>"
    assert normalise_native_name("a::b<T, c<int>>::f(int) [clone .cold]") == "a::b<>::f()"
    assert normalise_native_name("at::(anonymous namespace)::k<float>") == (
        "at::(anonymous namespace)::k<>"
    )
