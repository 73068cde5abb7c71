"""Real captures with planted causes (bench/recorders/capture_states.sh): the states they must show.

bench/targets/states_target.py plants each cause; lines are found by their `# MARKER` comment,
so a user caller names the very line that causes the state.
"""

from pathlib import Path

import pytest

from profiles.pyspy import AnalysisOptions, analyze, read_profile, to_folded
from profiles.pyspy.rules.state_rules import STATES
from profiles.pyspy.rules.states import node_states
from tests.profiles.pyspy.golden import DATA

TARGET = Path(__file__).resolve().parents[4] / "bench" / "targets" / "states_target.py"


def _line(marker: str) -> int:
    lines = TARGET.read_text(encoding="utf-8").splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"# {marker}" in text)


def _stats(name, *, log=True, threads=None):
    log_text = (DATA / f"{name}.log").read_text(encoding="utf-8") if log else None
    options = AnalysisOptions(threads=frozenset(threads) if threads else None)
    return analyze(read_profile(DATA / name), options, log_text=log_text)


def _thread(stats, name):
    return next(t for t in stats["threads"] if t["name"] == name)


def _state(row, state):
    return next(s for s in row["states"] if s["state"] == state)


def _top_state(row):
    return max(row["states"], key=lambda s: s["samples"])


def _top_caller(row, state):
    return _state(row, state)["user_callers"][0]["frame"]


def test_a_starved_trainer_waits_for_data_at_its_get_line():
    stats = _stats("states_starved_idle.txt")
    trainer = _thread(stats, "trainer")
    assert _top_state(trainer)["state"] == "data_wait"
    assert _state(trainer, "data_wait")["percent"] > 70
    assert _top_caller(trainer, "data_wait") == f"train (states_target.py:{_line('TRAINER_GET')})"
    assert _state(trainer, "compute")["percent"] < 20


def test_sleeps_and_thread_join_are_idle_at_the_lines_that_wait():
    stats = _stats("states_starved_idle.txt")
    expected = {
        "loader": f"slow_batch (states_target.py:{_line('SLOW_READ')})",
        "metrics": f"report (states_target.py:{_line('METRICS_SLEEP')})",
        "MainThread": f"threaded (states_target.py:{_line('MAIN_JOIN')})",
    }
    for name, line in expected.items():
        thread = _thread(stats, name)
        assert _top_state(thread)["state"] == "idle", name
        assert _top_caller(thread, "idle") == line


def test_the_starved_job_computes_little_though_most_leaves_are_not_python_waits():
    # The trial counted sleeps, joins and libc leaves as compute (44.9% for ~8%).
    stats = _stats("states_starved_idle.txt")
    compute = _state(stats, "compute")["percent"]
    waiting = sum(_state(stats, s)["percent"] for s in ("data_wait", "idle", "backpressure"))
    assert compute < 5 and waiting > 90
    assert _state(stats, "unknown")["samples"] <= 0.01 * stats["total_samples"]


def test_with_idle_every_thread_fills_the_rounds_py_spy_took():
    stats = _stats("states_starved_idle.txt")
    assert stats["idle_included"] is True and stats["rounds"] == 40 * 4 - 1
    assert {t["active_percent"] for t in stats["threads"]} == {100.0}
    no_log = _stats("states_starved_idle.txt", log=False)
    assert no_log["idle_included"] is True and no_log["rounds"] == 159


def test_without_idle_the_trainers_waits_are_missing_and_active_percent_says_so():
    stats = _stats("states_starved.txt")
    assert stats["idle_included"] is False and stats["rounds"] == 159
    trainer = _thread(stats, "trainer")
    assert trainer["active_percent"] == round(100 * trainer["samples"] / 159, 2) < 30
    assert stats["total_samples"] < 0.2 * _stats("states_starved_idle.txt")["total_samples"]
    no_log = _stats("states_starved.txt", log=False)
    assert no_log["rounds"] is None and trainer["name"] in {t["name"] for t in no_log["threads"]}
    assert {t["active_percent"] for t in no_log["threads"]} == {None}


def test_a_loader_on_a_full_queue_is_backpressure_at_its_put_line():
    stats = _stats("states_backpressure_idle.txt")
    loader = _thread(stats, "loader")
    assert _state(loader, "backpressure")["percent"] > 90
    assert _top_caller(loader, "backpressure") == f"load (states_target.py:{_line('LOADER_PUT')})"
    assert _top_state(_thread(stats, "trainer"))["state"] == "compute"


def test_item_and_tolist_are_host_syncs_at_their_lines():
    trainer = _thread(_stats("states_backpressure_idle.txt"), "trainer")
    host_sync = _state(trainer, "host_sync")
    assert host_sync["samples"] >= 10
    lines = {_line(m) for m in ("ROW_ITEMS", "TOLIST", "LOSS_ITEM")}
    for caller in host_sync["user_callers"]:
        assert caller["frame"].startswith(("train (", "train.<locals>.<genexpr> ("))
        assert int(caller["frame"].rsplit(":", 1)[1].rstrip(")")) in lines


def test_a_gloo_rank_waiting_for_its_peer_is_in_collective_at_train_step():
    stats = _stats("states_gloo_rank0_idle.txt")
    main = _thread(stats, "MainThread")
    assert _state(main, "collective")["percent"] > 70
    assert _top_caller(main, "collective") == f"train_step (states_target.py:{_line('ALL_REDUCE')})"
    assert _state(stats, "gil")["samples"] <= 1
    assert stats["idle_included"] is True  # one thread, sampled every round while blocked


def test_no_gloo_wait_under_a_pybind11_gil_template_argument_is_a_gil_wait():
    """Every stack through c10d::Work::wait without a GIL frame of its own is collective."""
    profile = read_profile(DATA / "states_gloo_rank0_idle.txt")
    states = node_states(profile)
    gil_frames = ("take_gil", "PyEval_RestoreThread", "gil_scoped_release::~", "gil_scoped_acquire")
    checked = 0
    for node, own in enumerate(profile.self_count):
        if not own:
            continue
        path = []
        at = node
        while at > 0:
            path.append(profile.frames[profile.frame[at]])
            at = profile.parent[at]
        if any(f.startswith("c10d::Work::wait") for f in path):
            template = [f for f in path if "call_guard<pybind11::gil_scoped_release>" in f]
            assert template, "the wrapper with the template argument is on these stacks"
            if not any(g in f for f in path for g in gil_frames):
                assert STATES[states[node]] == "collective", path
                checked += own
    assert checked > 100


def test_the_straggler_rank_computes_in_its_extra_python_function():
    fast = _thread(_stats("states_gloo_rank0_idle.txt"), "MainThread")
    slow = _thread(_stats("states_gloo_rank1_idle.txt"), "MainThread")
    assert _top_caller(slow, "compute").startswith("metric_per_sample")
    assert _top_caller(slow, "compute").endswith(f"(states_target.py:{_line('STRAGGLER')})")
    assert _state(slow, "compute")["percent"] > 2 * _state(fast, "compute")["percent"]
    assert _state(slow, "collective")["percent"] < _state(fast, "collective")["percent"]


@pytest.mark.parametrize(
    "name",
    [
        "states_starved_idle.txt",
        "states_starved.txt",
        "states_backpressure_idle.txt",
        "states_gloo_rank0_idle.txt",
        "states_gloo_rank1_idle.txt",
        "torch_native_idle.txt",
        "torch_speedscope.json",
    ],
)
def test_states_add_up_per_capture_and_per_thread_and_follow_the_thread_filter(name):
    stats = _stats(name, log=False) if name.endswith(".json") else _stats(name)
    assert [s["state"] for s in stats["states"]] == list(STATES)
    assert sum(s["samples"] for s in stats["states"]) == stats["total_samples"]
    for thread in stats["threads"]:
        assert sum(s["samples"] for s in thread["states"]) == thread["samples"]
        alone = _stats(name, log=False, threads=[str(thread["tid"])])
        assert [s["samples"] for s in alone["states"]] == [s["samples"] for s in thread["states"]]
    lines = list(to_folded(read_profile(DATA / name)))
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == stats["total_samples"]
