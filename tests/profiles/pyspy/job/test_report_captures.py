"""Real 4-rank PyTorch jobs with planted causes (tests/data/jobs, bench/recorders/record_jobs.py):
the report finds and names each cause, and reports nothing false.

Each case is also checked whole against its reviewed `job.expected.json` (rewrite with
FLAMEDECK_UPDATE_GOLDEN=1 after re-recording, then review the diff). The planted lines
are found by their markers in bench/targets/train.py: after editing it, re-record the jobs."""

from pathlib import Path

import pytest

from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.jobcli import analyze_rank, rank_names
from tests.profiles.pyspy.golden import check_golden

ROOT = Path(__file__).resolve().parents[4]
JOBS = ROOT / "tests" / "data" / "jobs"
CASES = ["balanced", "straggler", "straggler_noidle", "starved", "hostsync", "backpressure", "gil"]
WAIT_RULES = {"straggler", "input_bound", "backpressure", "gil", "host_sync"}


def planted(marker: str) -> int:
    """The line of bench/targets/train.py that carries `marker`."""
    lines = (ROOT / "bench" / "targets" / "train.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f"# {marker}" in line)


_REPORTS: dict[str, dict] = {}


def report(case: str) -> dict:
    if case not in _REPORTS:
        files = sorted(p for p in (JOBS / case).glob("rank-*") if not p.name.endswith(".log"))
        stats = [analyze_rank(str(f), f"{str(f).removesuffix('.gz')}.log", ()) for f in files]
        names = rank_names([str(f) for f in files], [])
        _REPORTS[case] = dict(analyze_job(list(zip(names, stats, strict=True))))
    return _REPORTS[case]


def rules(case: str) -> dict[str, dict]:
    return {f["rule"]: f for f in report(case)["findings"]}


@pytest.mark.parametrize("case", CASES)
def test_each_job_matches_its_reviewed_report(case):
    check_golden("job", report(case), data=JOBS / case)


@pytest.mark.parametrize("case", ["straggler", "straggler_noidle"])
def test_the_straggler_is_rank_3_explained_by_metric_per_sample_it_runs_more(case):
    straggler = report(case)["straggler"]
    assert straggler["name"] == "rank-3"
    (item,) = [
        i for i in straggler["explanation"] if i.get("function") == "metric_per_sample (train.py)"
    ]
    assert item["delta"] > 30 and item["interval"][0] > 0 and item["others_percent"] == 0.0
    assert all(i["delta"] > 0 for i in straggler["explanation"])
    finding = rules(case)["straggler"]
    assert finding["ranks"] == ["rank-3"] and "metric_per_sample (train.py)" in finding["advice"]
    labels = [c["label"] for c in report(case)["classes"]]
    assert any(label.startswith("rank 3:") and "metric_per_sample" in label for label in labels)


def test_without_idle_samples_the_waits_are_said_to_be_hidden():
    assert "waits_hidden" in rules("straggler_noidle")
    assert "waits_hidden" not in rules("straggler")


def test_the_balanced_job_has_no_straggler_and_no_finding():
    assert report("balanced")["straggler"] is None
    assert not WAIT_RULES & set(rules("balanced"))


def test_the_pybind11_gil_scoped_release_wrapper_around_all_reduce_is_not_a_gil_wait():
    """Every all_reduce wait sits under pybind11's call_guard<gil_scoped_release>: jobs
    whose step mostly waits in collectives report no GIL contention."""
    for case in ("balanced", "straggler", "backpressure", "hostsync"):
        assert "gil" not in rules(case), case
        for rank in report(case)["ranks"]:
            states = {s["state"]: s["percent"] for s in rank["states"]}
            assert states["collective"] > 10 and states["gil"] < 3, (case, rank["name"])


def test_the_starved_job_is_input_bound_and_names_the_saturated_loader():
    finding = rules("starved")["input_bound"]
    assert finding["interval"][0] > finding["threshold"]
    assert "The `loader` thread is busy" in finding["advice"]
    assert any(f.startswith(("decode_batch (", "decode_sample (")) for f in finding["frames"])


def test_the_hostsync_job_reports_host_syncs_at_the_item_lines():
    finding = rules("hostsync")["host_sync"]
    sites = {planted("HOSTSYNC_LOSS"), planted("HOSTSYNC_NORM")}
    assert {f"Job.train_step (train.py:{line})" for line in sites} <= set(finding["frames"])
    assert finding["interval"][0] > finding["threshold"]


def test_the_backpressure_job_reports_the_step_blocked_on_its_full_queue():
    finding = rules("backpressure")["backpressure"]
    assert finding["frames"][0] == f"Job.train_step (train.py:{planted('BACKPRESSURE')})"
    assert "input_bound" not in rules("backpressure")


def test_the_gil_job_reports_gil_contention_and_the_thread_holding_it():
    finding = rules("gil")["gil"]
    assert finding["interval"][0] > finding["threshold"]
    assert "the `monitor` thread is busy" in finding["advice"]
