"""`python -m profiles.pyspy timeline FILE --track TRACK [--bucket S]`: the timeline JSON,
or one line on stderr and exit 2."""

import gzip
import json

import pytest

from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import track_json
from tests.profiles.pyspy.test_cli import _run
from tests.profiles.pyspy.timeline_data import TIMELINE, recorded


@pytest.fixture
def stored(tmp_path):
    """The capture as the dashboard stores it: raw text and gzip'd track."""
    _, split = recorded("periodic_checkpoint")
    raw, track = tmp_path / "capture.txt", tmp_path / "capture.track.json.gz"
    raw.write_text(split.raw_text)
    track.write_bytes(gzip.compress(track_json(split.track).encode()))
    return raw, track, split


def test_it_prints_the_timeline_of_a_stored_capture(stored):
    raw, track, split = stored
    done = _run("timeline", raw, "--track", track, "--bucket", "0.5")
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert line["start"] == split.track.start and line["bucket_s"] == 0.5
    names = sorted(t["name"] for t in line["threads"])
    assert names == ["MainThread", "loader"]
    main = next(t for t in line["threads"] if t["name"] == "MainThread")
    assert len(main["dominant"]) == -(-int(split.track.duration_s * 1000) // 500)
    assert "idle" in main["dominant"] and "compute" in main["dominant"]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--bucket", "0.000001"], "more than 5000"),
        (["--bucket", "nan"], "positive number"),
    ],
)
def test_a_bucket_it_cannot_use_exits_2_with_one_line(stored, args, reason):
    raw, track, _ = stored
    done = _run("timeline", raw, "--track", track, *args)
    assert done.returncode == 2 and reason in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_track_without_times_or_of_another_file_exits_2_with_the_reason(stored, tmp_path):
    raw, _, _ = stored
    data = (TIMELINE / "steady.speedscope.json").read_bytes()
    not_idle = split_speedscope(data, start=1.0, end=15.0, rate=50, idle=False)
    other = tmp_path / "other.json"
    other.write_text(track_json(not_idle.track))
    done = _run("timeline", raw, "--track", other)
    assert done.returncode == 2 and "--idle" in done.stderr
    idle = split_speedscope(data, start=1.0, end=15.0, rate=50, idle=True)
    other.write_text(track_json(idle.track))
    done = _run("timeline", raw, "--track", other)
    assert done.returncode == 2 and "does not belong" in done.stderr
    done = _run("timeline", raw, "--track", tmp_path / "missing.json")
    assert done.returncode == 2 and "cannot read it" in done.stderr
    assert "Traceback" not in done.stderr
