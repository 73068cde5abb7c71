"""What a watch compares: the step threads' view of a capture and whether two
captures' settings allow comparing their shares (profiles/pyspy/compare/comparable.py)."""

import pytest

from profiles.pyspy.compare.comparable import (
    pair_views,
    settings_mismatch,
    step_view,
)

RECORDED = {"idle": True, "native": True, "gil": False, "threads": True, "subprocesses": False}


def state(name, samples, caller=None):
    row = {"state": name, "samples": samples, "percent": 100 * samples / 400}
    return {**row, "user_callers": [{"frame": caller, "samples": samples}]} if caller else row


def functions(tid, name, function, frame):
    row = {"function": function, "frame": frame, "samples": 390}
    return {"thread": name, "tid": tid, "samples": 400, "functions": [row]}


def stats_with_a_feeder():
    """A step thread half in host_sync and an idle feeder thread as big as it."""
    step_states = [
        state("compute", 200, "step (t.py:9)"),
        state("host_sync", 200, "step (t.py:12)"),
    ]
    step = {"tid": 7, "name": "trainer", "samples": 400, "states": step_states}
    feeder = {"tid": 8, "name": "loader", "samples": 400, "states": [state("idle", 400)]}
    pooled = [state("compute", 200), state("host_sync", 200)]
    return {
        "total_samples": 800,
        "states": [state("idle", 400), *pooled],
        "threads": [step, feeder],
        "step_threads": {"tids": ["7"], "names": ["trainer"], "samples": 400, "states": pooled},
        "thread_functions": [
            functions(7, "trainer", "step (t.py)", "step (t.py:12)"),
            functions(8, "loader", "feed (t.py)", "feed (t.py:30)"),
        ],
    }


def test_the_step_view_holds_only_the_step_threads_states_and_functions():
    view = step_view(stats_with_a_feeder())
    assert view["scope"] == "step threads" and view["total_samples"] == 400
    assert {s["state"]: s["samples"] for s in view["states"]} == {"compute": 200, "host_sync": 200}
    sync = next(s for s in view["states"] if s["state"] == "host_sync")
    assert sync["user_callers"][0]["frame"] == "step (t.py:12)"
    assert view["functions"] == [
        {"function": "step (t.py)", "frame": "step (t.py:12)", "samples": 390}
    ]


def test_a_capture_stored_without_step_threads_is_judged_whole_and_so_is_its_pair():
    old = {k: v for k, v in stats_with_a_feeder().items() if k != "step_threads"}
    assert step_view(old)["scope"] == "all threads"
    before, after = pair_views(old, stats_with_a_feeder())
    assert before["scope"] == after["scope"] == "all threads" and after["total_samples"] == 800


def test_the_same_settings_are_comparable_and_a_rate_within_2x_too():
    assert settings_mismatch({**RECORDED, "rate": 100}, {**RECORDED, "rate": 50}) == ""
    assert settings_mismatch({"rate": 40}, {}) == ""  # not known: not refused


@pytest.mark.parametrize(
    ("baseline", "capture", "said"),
    [
        ({"idle": True}, {"idle": False}, "the baseline used --idle, this capture did not"),
        ({"native": False}, {"native": True}, "this capture used --native, the baseline did not"),
        ({"gil": False}, {"gil": True}, "this capture used --gil"),
        ({"threads": True}, {"threads": False}, "the baseline used --threads"),
        ({"subprocesses": True}, {"subprocesses": False}, "the baseline used --subprocesses"),
        ({"rate": 100}, {"rate": 40}, "the baseline sampled 100 times a second, this capture 40"),
    ],
)
def test_a_setting_that_moves_shares_makes_the_pair_not_comparable(baseline, capture, said):
    found = settings_mismatch(
        {**RECORDED, "rate": 100, **baseline}, {**RECORDED, "rate": 100, **capture}
    )
    assert found.startswith("not comparable: ") and said in found
