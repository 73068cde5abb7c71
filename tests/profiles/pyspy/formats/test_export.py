"""Exports round-trip through the engine's own parsers."""

import json

from profiles.pyspy import (
    AnalysisOptions,
    analyze,
    parse_profile_text,
    parse_raw_lines,
    read_profile,
    to_folded,
    to_speedscope,
)
from tests.profiles.pyspy.golden import DATA

NO_FLAME = AnalysisOptions(include_flamegraph=False)


def test_folded_export_round_trips_every_statistic():
    profile = read_profile(DATA / "subprocesses.txt")
    again = parse_raw_lines(to_folded(profile))
    assert analyze(again) == analyze(profile)


def test_folded_lines_are_stack_space_count():
    for line in to_folded(read_profile(DATA / "native.txt")):
        stack, count = line.rsplit(" ", 1)
        assert count.isdigit() and stack and "\n" not in line


def test_speedscope_export_has_one_sampled_profile_per_thread():
    doc = to_speedscope(read_profile(DATA / "threads.txt"), name="t")
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    names = [p["name"] for p in doc["profiles"]]
    assert len(names) == len(set(names)) and all(n.startswith("Thread ") for n in names)
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled" and prof["unit"] == "none"
        assert len(prof["samples"]) == len(prof["weights"])
        assert prof["endValue"] == sum(prof["weights"])
        assert all(0 <= i < len(doc["shared"]["frames"]) for s in prof["samples"] for i in s)


def test_speedscope_export_round_trips_the_statistics():
    for name in ("threads.txt", "native.txt", "nolineno.txt", "speedscope.json"):
        profile = read_profile(DATA / name)
        again = parse_profile_text(json.dumps(to_speedscope(profile)))
        before, after = analyze(profile, NO_FLAME), analyze(again, NO_FLAME)
        for key in ("total_samples", "threads", "top_self", "top_total", "keywords"):
            assert before[key] == after[key], (name, key)
