"""Bad input either parses with bad lines counted in skipped_lines or raises ProfileError."""

import gzip

import pytest

from profiles.pyspy import ProfileError, analyze, parse_profile_text, parse_raw_lines, read_profile

from .golden import DATA


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


def test_it_reads_gzip_transparently(tmp_path):
    path = tmp_path / "samples.txt.gz"
    path.write_bytes(gzip.compress((DATA / "threads.txt").read_bytes()))
    assert analyze(read_profile(path)) == analyze(read_profile(DATA / "threads.txt"))


def test_it_reads_utf16_with_a_bom(tmp_path):
    path = tmp_path / "u16.txt"
    path.write_bytes("a;b 2\r\na;c 3\r\n".encode("utf-16"))
    assert _samples(read_profile(path)) == 5


def test_it_replaces_invalid_utf8_and_keeps_the_stack(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"a;caf\xe9 (x.py:1) 2\na 1\n")
    stats = analyze(read_profile(path))
    assert stats["total_samples"] == 3
    assert stats["top_self"][0]["frame"] == "caf\ufffd (x.py:1)"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "is empty"),
        (b"\n\n", "is empty"),
        (b'<?xml version="1.0"?><svg></svg>', "SVG"),
        ((DATA / "dump.txt").read_bytes(), "py-spy dump"),
        ((DATA / "dump_json.json").read_bytes(), "dump --json"),
        ((DATA / "threads.txt.log").read_bytes(), "log"),
        ((DATA / "speedscope.json").read_bytes()[:700], "truncated"),
        (b'{"a": 1}', "not a speedscope"),
        (b"\x00\x01\x02binary", "binary"),
        (b"no counts here\nnor here\n", "none of its 2 lines"),
        (gzip.compress(b"a;b 1\n" * 1000, mtime=0)[:-30], "gzip"),
    ],
)
def test_it_refuses_unusable_files_with_a_one_line_reason(tmp_path, content, reason):
    path = tmp_path / "input.bin"
    path.write_bytes(content)
    with pytest.raises(ProfileError) as info:
        read_profile(path)
    assert reason in str(info.value)
    assert "\n" not in str(info.value)


def test_it_refuses_a_missing_file():
    with pytest.raises(ProfileError, match="cannot read"):
        read_profile(DATA / "no-such-file.txt")


def test_parse_profile_text_detects_speedscope_and_raw():
    assert parse_profile_text((DATA / "speedscope.json").read_text()).format == "speedscope"
    assert parse_profile_text("a;b 1\n").format == "raw"


BIG_RAW = b"main (m.py:1);work (m.py:2) 1\n" * 4000  # ~120 KB, past the 64 KiB head


@pytest.mark.parametrize("where", [0, 100, len(BIG_RAW) - 5])
def test_a_nul_byte_anywhere_in_a_raw_file_refuses_it_as_binary(tmp_path, where):
    path = tmp_path / "samples.txt"
    path.write_bytes(BIG_RAW[:where] + b"\x00" + BIG_RAW[where:])
    with pytest.raises(ProfileError, match="binary data"):
        read_profile(path)
    gz = tmp_path / "samples.txt.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(ProfileError, match="binary data"):
        read_profile(gz)


def test_a_nul_byte_late_in_a_json_file_or_in_text_is_refused_too(tmp_path):
    doc = (DATA / "speedscope.json").read_bytes()
    path = tmp_path / "late.json"
    path.write_bytes(doc + b" " * 70000 + b"\x00")
    with pytest.raises(ProfileError, match="binary data"):
        read_profile(path)
    with pytest.raises(ProfileError, match="binary data"):
        parse_profile_text("a;b 1\n" * 20000 + "a\x00;b 1\n")


def test_the_same_file_without_the_nul_byte_is_read(tmp_path):
    path = tmp_path / "samples.txt"
    path.write_bytes(BIG_RAW)
    assert sum(read_profile(path).self_count) == 4000


@pytest.mark.parametrize(
    "lines",
    [
        [f"a;b {10**17}"] * 91,  # 9.1e18 in one frame's count
        ["a;b 9007199254740992", "a;c 1"],  # 2^53 + 1
    ],
)
def test_totals_beyond_2_to_the_53_are_refused_as_implausible(tmp_path, lines):
    path = tmp_path / "huge.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProfileError, match="implausible"):
        read_profile(path)


def test_a_total_of_exactly_2_to_the_53_is_accepted(tmp_path):
    path = tmp_path / "edge.txt"
    path.write_text("a;b 9007199254740991\na;c 1\n")
    assert sum(read_profile(path).self_count) == 2**53
