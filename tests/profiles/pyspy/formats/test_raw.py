"""py-spy's `--format raw` collapsed stacks (profiles/pyspy/formats/raw.py): counts,
comments, bad counts, records split by newlines in a command line, and `;` inside one."""

import pytest

from profiles.pyspy import analyze, parse_raw_lines, read_profile
from profiles.pyspy.formats.raw import folded_record
from tests.profiles.pyspy.golden import DATA


def _samples(profile):
    return analyze(profile)["total_samples"]


def test_it_strips_crlf_line_endings():
    profile = parse_raw_lines(["a;b 3\r\n", "a 2\r\n"])
    assert (_samples(profile), profile.skipped_lines) == (5, 0)


def test_it_skips_and_counts_comment_lines_lines_without_count_fractional_and_negative():
    lines = ["# austin: 3.4", "# duration: 1855785", "a;b", "a;b 1.5", "a;b -3", "a;b 4", ""]
    profile = parse_raw_lines(lines)
    assert (_samples(profile), profile.skipped_lines) == (4, 5)


def test_it_skips_counts_too_large_to_be_samples():
    profile = parse_raw_lines(["a " + "9" * 19, "a 1"])
    assert (_samples(profile), profile.skipped_lines) == (1, 1)


def test_it_joins_a_process_record_split_by_newlines_in_the_command_line():
    # A real capture: both the parent's and the child's command lines hold newlines.
    profile = read_profile(DATA / "multiline_cmdline_parent.txt")
    stats = analyze(profile)
    assert profile.skipped_lines == 0
    assert stats["total_samples"] == 45
    assert {(t["tid"], t["pid"], t["samples"]) for t in stats["threads"]} == {
        (9125, 9125, 44),
        (9120, 9120, 1),
    }


def test_it_joins_continuation_lines_even_when_the_first_piece_ends_in_a_number():
    lines = ['process 1:"python -c x = 5', 'y = 6";thread (2): main;f (a.py:1) 7']
    stats = analyze(parse_raw_lines(lines))
    assert stats["total_samples"] == 7
    assert stats["threads"][0]["pid"] == 1


def test_it_counts_held_lines_as_skipped_when_the_record_never_completes():
    profile = parse_raw_lines(['process 1:"python -c x', "y"])
    assert profile.skipped_lines == 2


def test_it_glues_a_semicolon_inside_a_command_line_back_into_the_process_frame():
    stats = analyze(parse_raw_lines(['process 1:"python -c a;b";thread (2): t;f (a.py:1) 3']))
    assert stats["threads"][0]["pid"] == 1
    assert [r["frame"] for r in stats["top_total"]] == ["f (a.py:1)"]


@pytest.mark.parametrize(
    "text, record",
    [
        ("a;b 3", (["a", "b"], 3)),
        ("a;b c;d 12", (["a", "b c", "d"], 12)),  # a frame may hold spaces
        (
            'process 1:"python -c a;b";thread (2): t;f 5',
            (['process 1:"python -c a;b"', "thread (2): t", "f"], 5),
        ),
        ("a;b", None),  # no count
        ("a;b 1.5", None),
        ("a;b -3", None),
        ("a " + "9" * 19, None),  # 19 digits: more than any real count
        (" 7", None),  # a count without a stack
        ('process 1:"python -c a;b 5', None),  # the command line never closes
    ],
)
def test_a_folded_record_is_frames_and_a_plain_count_or_nothing(text, record):
    assert folded_record(text) == record


def test_blank_lines_are_neither_samples_nor_skipped():
    profile = parse_raw_lines(["", "a 2", "   ", "\n"])
    assert (_samples(profile), profile.skipped_lines) == (2, 0)
