"""speedscope input: identical samples merged, bad weights refused, counts kept."""

import json

import pytest

from profiles.pyspy import (
    AnalysisOptions,
    ProfileError,
    analyze,
    parse_profile_text,
    read_profile,
    to_folded,
)
from profiles.pyspy.formats import reading
from tests.profiles.pyspy.golden import DATA

FRAMES = [{"name": "main", "file": "m.py", "line": 1}, {"name": "work", "file": "m.py", "line": 2}]


def _doc(samples, weights, unit="none"):
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": FRAMES},
        "profiles": [
            {
                "type": "sampled",
                "name": 'Thread 7 "worker"',
                "unit": unit,
                "startValue": 0,
                "endValue": 1,
                "samples": samples,
                "weights": weights,
            }
        ],
    }


def _write(tmp_path, text):
    path = tmp_path / "p.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("weight", ["Infinity", "-Infinity", "NaN", "-1", '"3"', "true", "null"])
def test_a_weight_that_is_not_a_finite_non_negative_number_is_a_clear_error(tmp_path, weight):
    text = json.dumps(_doc([[0, 1], [0]], [1, 0])).replace("[1, 0]", f"[1, {weight}]")
    with pytest.raises(ProfileError, match="weight"):
        read_profile(_write(tmp_path, text))


def test_identical_samples_are_merged_into_one_stack_with_their_summed_count(tmp_path):
    samples = [[0, 1], [0], [0, 1], [0, 1], [0], [1, 5], "x"]
    weights = [2, 1, 3, 1, 4, 1, 1]
    profile = read_profile(_write(tmp_path, json.dumps(_doc(samples, weights))))
    assert sorted(to_folded(profile)) == [
        "thread (7): worker;main (m.py:1) 5",
        "thread (7): worker;main (m.py:1);work (m.py:2) 6",
    ]
    assert profile.skipped_lines == 2  # the bad frame index and the non-list sample


def test_py_spy_style_time_weights_count_one_sample_each(tmp_path):
    samples = [[0, 1]] * 1000 + [[0]] * 500
    path = _write(tmp_path, json.dumps(_doc(samples, [0.02] * 1500, unit="seconds")))
    stats = analyze(read_profile(path), AnalysisOptions(include_flamegraph=False))
    assert stats["total_samples"] == 1500 and stats["unique_stacks"] == 2
    assert stats["top_self"][0] == {"frame": "work (m.py:2)", "samples": 1000, "percent": 66.67}


def test_weights_summing_past_2_to_the_53_are_refused_as_implausible(tmp_path):
    path = _write(tmp_path, json.dumps(_doc([[0], [0, 1]], [2**52, 2**52 + 1])))
    with pytest.raises(ProfileError, match="implausible"):
        read_profile(path)


def _read(text):
    profile = parse_profile_text(text)
    return sorted(to_folded(profile)), profile.skipped_lines


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 4099])
def test_the_file_is_read_alike_whatever_pieces_it_streams_in(monkeypatch, piece):
    """A value cut at a piece boundary (`3` | `E0`, `[0,1` | `2]`) is read whole."""
    torch = (DATA / "torch_speedscope.json").read_text()
    odd = json.dumps(_doc([[0, 1], [1], [0, 1], [0], "x", [9]], [3e0, 1.5, 2, 1e2, 1, 1]))
    pretty = json.dumps(json.loads(torch), indent=2)
    expected = [_read(text) for text in (torch, odd, pretty)]
    monkeypatch.setattr(reading, "PIECE", piece)
    assert [_read(text) for text in (torch, odd, pretty)] == expected
    main, work = "thread (7): worker;main (m.py:1)", ";work (m.py:2)"
    assert expected[1] == ([f"{main} 100", f"{main}{work} 5"], 3)  # 1.5, "x", [9]: skipped


def test_invalid_json_is_placed_where_the_json_module_places_it(tmp_path, monkeypatch):
    text = json.dumps(_doc([[0, 1]] * 500, [1] * 500), indent=1)[:5000]
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    monkeypatch.setattr(reading, "PIECE", 1000)
    with pytest.raises(ProfileError) as got:
        read_profile(_write(tmp_path, text))
    assert str(expected.value) in str(got.value)
