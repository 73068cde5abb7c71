"""Reading a capture file (profiles/pyspy/formats/reading.py): gzip, UTF-16, bad UTF-8,
binary and implausible input refused with one line, speedscope or raw told apart."""

import gzip

import pytest

from profiles.pyspy import (
    ProfileError,
    analyze,
    parse_profile_text,
    read_profile,
)
from tests.profiles.pyspy.golden import DATA


def _samples(profile):
    return analyze(profile)["total_samples"]


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
