"""A stack line, a frame, a stack depth and a JSON value have limits: past them the
input counts as malformed (or is refused), and is never held whole."""

import gzip
import json
import tracemalloc

import pytest

from profiles import pyspy
from profiles.pyspy import limits

GOOD = "thread (1): MainThread;train (train.py:10);step (train.py:20) 7\n"
MIB = 1 << 20


def _peak_mib(func, *args):
    tracemalloc.start()
    try:
        result = func(*args)
        return result, tracemalloc.get_traced_memory()[1] / MIB
    finally:
        tracemalloc.stop()


def _gzip_file(tmp_path, name, pieces):
    path = tmp_path / name
    with gzip.open(path, "wb", compresslevel=1) as fh:
        for piece in pieces:
            fh.write(piece)
    return path


def test_a_64_mib_line_is_skipped_without_being_held_whole(tmp_path):
    path = _gzip_file(
        tmp_path, "long.txt.gz", [GOOD.encode(), b"a" * (64 * MIB), b" 1\n", GOOD.encode()]
    )
    profile, peak = _peak_mib(pyspy.read_profile, path)
    assert sum(profile.self_count) == 14 and profile.skipped_lines == 1
    assert peak < 8, peak  # a bounded window of the line, not its 64 MiB


def test_a_gzip_of_40_mib_of_semicolons_is_refused_in_bounded_memory(tmp_path):
    path = _gzip_file(tmp_path, "semi.txt.gz", [b";" * MIB] * 40)
    with pytest.raises(pyspy.ProfileError, match="none of its 1 lines"):
        _peak_mib(pyspy.read_profile, path)
    _, peak = _peak_mib(lambda: pytest.raises(pyspy.ProfileError, pyspy.read_profile, path))
    assert peak < 8, peak


@pytest.mark.parametrize("shape", ["frame", "depth"])
def test_a_frame_or_a_stack_past_the_limit_counts_as_malformed(tmp_path, shape):
    if shape == "frame":
        bad = "root;" + "f" * (limits.MAX_FRAME_CHARS + 1) + " 5\n"
    else:
        bad = ";".join(["f (x.py:1)"] * (limits.MAX_STACK_DEPTH + 1)) + " 5\n"
    fitting = ";".join(["f (x.py:1)"] * limits.MAX_STACK_DEPTH) + " 3\n"
    for text in (GOOD + bad + fitting,):
        profile = pyspy.parse_raw_lines(text.splitlines())
        assert sum(profile.self_count) == 10 and profile.skipped_lines == 1
        path = tmp_path / "f.txt"
        path.write_text(text)
        assert pyspy.read_profile(path).skipped_lines == 1


def test_a_utf16_file_streams_and_skips_a_long_line(tmp_path):
    path = tmp_path / "u16.txt"
    path.write_bytes((GOOD + "x" * (limits.MAX_LINE_CHARS + 5) + " 1\n" + GOOD).encode("utf-16"))
    profile = pyspy.read_profile(path)
    assert sum(profile.self_count) == 14 and profile.skipped_lines == 1


def _speedscope(frames: list[str], samples: list[list[int]]) -> str:
    return json.dumps(
        {
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": name} for name in frames]},
            "profiles": [
                {
                    "type": "sampled",
                    "name": 'Thread 1 "MainThread"',
                    "unit": "none",
                    "startValue": 0,
                    "endValue": len(samples),
                    "samples": samples,
                    "weights": [1] * len(samples),
                }
            ],
        }
    )


def test_speedscope_samples_past_the_depth_or_naming_a_too_long_frame_count_as_malformed(
    tmp_path,
):
    frames = ["main", "f" * (limits.MAX_FRAME_CHARS + 1)]
    deep = [0] * (limits.MAX_STACK_DEPTH + 1)
    path = tmp_path / "s.json"
    path.write_text(_speedscope(frames, [[0], [0, 1], deep, [0, 0]]))
    profile = pyspy.read_profile(path)
    assert sum(profile.self_count) == 2 and profile.skipped_lines == 2
    assert all(len(name) <= limits.MAX_FRAME_CHARS for name in profile.frames)


def test_a_json_value_past_the_limit_refuses_the_file(tmp_path):
    path = _gzip_file(
        tmp_path,
        "v.json.gz",
        [b'{"shared": {"frames": []}, "exporter": "', b"x" * (20 * MIB), b'", "profiles": []}'],
    )
    with pytest.raises(pyspy.ProfileError, match=f"longer than {limits.MAX_JSON_VALUE_CHARS}"):
        pyspy.read_profile(path)


def test_the_lag_reader_ignores_overlong_lines_and_reads_crafted_numbers_in_linear_time():
    crafted = ("1" * 4000 + "x behind in sampling\n") * 200
    log = (
        "py-spy> Sampling process 100 times a second for 30 seconds.\n"
        + crafted
        + "py-spy> " + "9" * 5000 + "s behind in sampling\n"
        + "py-spy> 1.50s behind in sampling, results may be inaccurate.\n"
    )  # fmt: skip
    report = pyspy.analyze_lag(log)
    assert report["requested_rate"] == 100 and report["warnings"] == 1
    assert report["max_behind_s"] == 1.5
