"""The job report never fails: ranks without step-thread samples, all idle, alone, without
collectives, with empty or partial stats; interval helpers with empty totals."""

import json

from profiles.pyspy import cli
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.rules.findings import percent_interval
from profiles.pyspy.stats.intervals import newcombe_interval, wilson_interval
from tests.profiles.pyspy.job.test_report import BASE, rank
from tests.profiles.pyspy.rules.test_findings import stats_of, thread


def hung_rank():
    """A rank whose only thread idles (time.sleep in its own code): no step thread is
    found (no collective, no device, no compute), so it has no step-thread samples."""
    main = thread("MainThread", 200, tid=1, idle=200,
                  callers={"idle": {"wait_for_lock (train.py:62)": 200}})  # fmt: skip
    return stats_of(main)


def test_a_rank_without_step_thread_samples_beside_waiting_ranks_does_not_crash_the_report():
    """The issue's crash: describe_class -> _distinctive -> explain divided by the other
    classes' step-thread samples, all 0 (ZeroDivisionError in newcombe_interval)."""
    waits = {"collective": {"main (train.py:93)": 990}}
    ranks = [(f"rank-{i}", rank(990, callers=waits, functions=BASE)) for i in (0, 1, 3)]
    report = analyze_job([*ranks, ("rank-2", hung_rank())])
    assert [c["ranks"] for c in report["classes"]] == [["rank-0", "rank-1", "rank-3"], ["rank-2"]]


def test_interval_helpers_are_defined_for_empty_totals():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert percent_interval(0, 0) == (0.0, 100.0)
    assert newcombe_interval((0, 0), (0, 0)) == (-1.0, 1.0)
    low, high = newcombe_interval((0, 0), (50, 100))
    assert -1.0 <= low < 0 < high <= 1.0
    low, high = newcombe_interval((50, 100), (0, 0))
    assert -1.0 <= low < 0 < high <= 1.0


WAITING = (
    "thread (1): MainThread;<module> (train.py:99);main (train.py:93);"
    "train_step (train.py:80);all_reduce (torch/distributed/distributed_c10d.py:3252);"
    "c10d::Work::wait (libtorch_cpu.so);pthread_cond_wait (libc.so.6) {}\n"
    "thread (1): MainThread;<module> (train.py:99);main (train.py:93);"
    "train_step (train.py:79);forward (torch/nn/modules/linear.py:134);"
    "at::addmm (libtorch_cpu.so) 10\n"
)
HUNG = (
    "thread (1): MainThread;<module> (train.py:99);main (train.py:91);"
    "wait_for_lock (train.py:62);time_sleep (libpython3.11.so.1.0);"
    "clock_nanosleep (libc.so.6) 200\n"
)


def test_the_job_cli_reports_a_job_with_a_hung_rank_instead_of_an_internal_error(tmp_path, capsys):
    files = []
    for i in range(4):
        path = tmp_path / f"rank-{i}.txt"
        path.write_text(HUNG if i == 2 else WAITING.format(190))
        files.append(str(path))
    code = cli.main(["job", *files])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert [c["ranks"] for c in report["classes"]][1] == ["rank-2"]
