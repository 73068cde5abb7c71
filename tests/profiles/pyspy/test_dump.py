"""`py-spy dump` text and --json into per-thread stacks."""

import pytest

from profiles.pyspy import ProfileError, parse_dump

from .golden import DATA


def test_it_reads_threads_with_status_and_frames_innermost_first():
    threads = parse_dump((DATA / "dump.txt").read_text())
    main = threads[0]
    assert (main["name"], main["status"], main["idle"], main["active"]) == (
        "MainThread",
        "idle",
        True,
        False,
    )
    assert main["frames"][-1]["name"] == "<module>"
    assert main["frames"][0]["native"] is False


def test_it_marks_native_frames_in_native_dumps():
    threads = parse_dump((DATA / "dump_native.txt").read_text())
    frames = [f for t in threads for f in t["frames"]]
    assert any(f["native"] and f["location"] == "libc.so.6" for f in frames)


def test_it_keeps_arguments_and_locals():
    threads = parse_dump((DATA / "dump_locals.txt").read_text())
    first = threads[0]["frames"][0]
    assert {"name": "seconds", "value": "30", "arg": True} in first["locals"]


def test_json_and_text_dumps_give_the_same_shape():
    from_json = parse_dump((DATA / "dump_json.json").read_text())
    assert {t["name"] for t in from_json} >= {"MainThread", "loader"}
    assert all(isinstance(t["tid"], int) for t in from_json)


def test_it_reads_active_and_gil_status():
    text = 'Process 1: python\nThread 0x7F01 (active+gil): "w"\n    f (a.py:1)\nThread 9\n'
    first, second = parse_dump(text)
    assert (first["tid"], first["active"], first["gil"]) == ("0x7F01", True, True)
    assert (second["status"], second["active"], second["name"]) == ("", None, "")


def test_it_refuses_text_that_is_not_a_dump():
    with pytest.raises(ProfileError):
        parse_dump("a;b 3\n")
    with pytest.raises(ProfileError):
        parse_dump("[1, 2")
