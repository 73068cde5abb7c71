"""The golden-file helper itself: a missing or different expected file fails; only
FLAMEDECK_UPDATE_GOLDEN=1 writes one."""

import json

import pytest

from tests.profiles.pyspy.golden import UPDATE, check_golden


def test_a_missing_expected_file_fails_naming_it_and_the_switch(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE, raising=False)
    with pytest.raises(pytest.fail.Exception) as failed:
        check_golden("new_case", {"samples": 3}, data=tmp_path)
    assert "new_case.expected.json is missing" in str(failed.value)
    assert f"{UPDATE}=1" in str(failed.value)
    assert not (tmp_path / "new_case.expected.json").exists()


def test_the_switch_set_to_anything_but_1_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(UPDATE, "0")
    with pytest.raises(pytest.fail.Exception):
        check_golden("new_case", {"samples": 3}, data=tmp_path)
    assert not (tmp_path / "new_case.expected.json").exists()


def test_a_different_result_fails_and_leaves_the_expected_file_as_it_was(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE, raising=False)
    path = tmp_path / "case.expected.json"
    path.write_text('{"samples": 2}\n', encoding="utf-8")
    with pytest.raises(AssertionError):
        check_golden("case", {"samples": 3}, data=tmp_path)
    assert path.read_text(encoding="utf-8") == '{"samples": 2}\n'


def test_the_switch_writes_the_expected_file_and_the_next_run_matches_it(tmp_path, monkeypatch):
    monkeypatch.setenv(UPDATE, "1")
    check_golden("new_case", {"samples": 3, "name": "é"}, data=tmp_path)
    path = tmp_path / "new_case.expected.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"samples": 3, "name": "é"}
    monkeypatch.delenv(UPDATE)
    check_golden("new_case", {"samples": 3, "name": "é"}, data=tmp_path)
