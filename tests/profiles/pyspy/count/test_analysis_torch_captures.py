"""Real PyTorch captures (bench/recorders/capture_torch.sh): the numbers an ML engineer acts on.

bench/targets/torch_target.py runs threads loader -> queue.Queue -> trainer (nn.Linear
forward/backward, `.item()` per row at ROW_ITEMS), metrics (`.item()` at
METRIC_ITEMS, then sleeps) and evaluator; py-spy 0.4 recorded it with --native.
"""

import re
from pathlib import Path

import pytest

from profiles.pyspy import AnalysisOptions, Keyword, analyze, read_profile, to_folded
from tests.profiles.pyspy.golden import DATA

TARGET = Path(__file__).resolve().parents[4] / "bench" / "targets" / "torch_target.py"
CAPTURES = ["torch_native_idle.txt", "torch_native_gil.txt", "torch_speedscope.json"]


def _line(marker: str) -> int:
    lines = TARGET.read_text(encoding="utf-8").splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"# {marker}" in text)


def _stats(name, threads=None):
    options = AnalysisOptions(threads=frozenset(threads) if threads else None)
    return analyze(read_profile(DATA / name), options)


def _category(stats, name):
    return next(row for row in stats["categories"] if row["category"] == name)


def _callers(row):
    # speedscope frames carry absolute paths; raw ones are relative.
    return [(re.sub(r"\(.*/", "(", c["frame"]), c["samples"]) for c in row["python_callers"]]


@pytest.mark.parametrize("name", ["torch_native_idle.txt", "torch_speedscope.json"])
def test_item_host_syncs_are_attributed_to_the_lines_that_call_item(name):
    trainer = _category(_stats(name, ["trainer"]), "host sync")
    assert trainer["samples"] > 0
    assert _callers(trainer)[0][0] == f"train_step (torch_target.py:{_line('ROW_ITEMS')})"
    metrics = _category(_stats(name, ["metrics"]), "host sync")
    assert {frame for frame, _ in _callers(metrics)} <= {
        f"report (torch_target.py:{_line('METRIC_ITEMS')})",
        f"report (torch_target.py:{_line('METRIC_ITEMS') - 1})",  # loss = STATE["loss"]
    }


def test_indexing_a_tensor_is_not_a_host_sync():
    profile = read_profile(DATA / "torch_native_idle.txt")
    old = (Keyword("item", "old"),)
    anchored = (Keyword("re:(^|[.:]|THPVariable_)item$", "host sync"),)
    substring = analyze(profile, AnalysisOptions(keywords=old))["keywords"][0]["samples"]
    item = analyze(profile, AnalysisOptions(keywords=anchored))["keywords"][0]["samples"]
    lines = list(to_folded(profile))
    calls = sum(int(line.rsplit(" ", 1)[1]) for line in lines if "THPVariable_item " in line)
    indexing = [line for line in lines if "get_item" in line or "getitem" in line]
    getitem = sum(
        int(line.rsplit(" ", 1)[1]) for line in indexing if "THPVariable_item " not in line
    )
    assert item == calls > 0
    assert getitem > 0 and substring == item + getitem  # the old keyword counted indexing


@pytest.mark.parametrize("name", CAPTURES)
def test_condition_waits_of_these_captures_are_gil_waits_not_waits(name):
    stats = _stats(name)
    lines = list(to_folded(read_profile(DATA / name)))
    cond = sum(
        int(line.rsplit(" ", 1)[1])
        for line in lines
        if "pthread_cond_timedwait" in line or "pthread_cond_wait" in line
    )
    assert _category(stats, "wait")["samples"] == 0
    assert _category(stats, "gil")["samples"] >= cond


@pytest.mark.parametrize("name", ["torch_native_idle.txt", "torch_speedscope.json"])
def test_queue_time_is_attributed_to_the_put_and_get_lines(name):
    queue = _category(_stats(name), "python queue")
    callers = dict(_callers(queue))
    assert set(callers) == {"load (torch_target.py:37)", "train (torch_target.py:60)"}
    assert callers["load (torch_target.py:37)"] > callers["train (torch_target.py:60)"]


@pytest.mark.parametrize("name", CAPTURES)
def test_no_share_exceeds_100_percent_and_callers_add_up(name):
    stats = _stats(name)
    rows = stats["keywords"] + stats["categories"] + stats["top_total"] + stats["threads"]
    assert all(0 <= row["percent"] <= 100 for row in rows)
    for row in stats["keywords"] + stats["categories"]:
        assert sum(c["samples"] for c in row["python_callers"]) <= row["samples"]
        if len(row["python_callers"]) < 10:
            assert sum(c["samples"] for c in row["python_callers"]) == row["samples"]
    assert sum(t["samples"] for t in stats["threads"]) == stats["total_samples"]
