"""The `stuck` finding: ranks that wait out the window in collectives for ranks that stand
elsewhere make a hang, reported as such and never as a straggler to trim."""

from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.job.stuck import STUCK_ELSEWHERE, STUCK_WAIT
from tests.profiles.pyspy.job.test_report import BASE, rank
from tests.profiles.pyspy.rules.test_findings import stats_of, thread

WAITS = {"collective": {"main (train.py:93)": 995}}


def waiting_rank(collective=995, n=1000):
    return rank(collective, n=n, functions=BASE, callers=WAITS)


def hung_rank(state="idle", frame="wait_for_lock (train.py:62)", n=1000, idle=True):
    """The trainer stands in the user's own code: no collective, no compute samples."""
    trainer = thread("trainer", n, tid=7, callers={state: {frame: n}}, **{state: n})
    return stats_of(trainer, thread("loader", n, tid=8, idle=n), idle=idle)


def rules(report):
    return {f["rule"]: f for f in report["findings"]}


def test_a_rank_in_its_own_code_while_the_others_wait_is_stuck_and_no_straggler():
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1, 3)] + [("rank-2", hung_rank())]
    report = analyze_job(ranks)
    found = rules(report)
    assert "straggler" not in found
    stuck = found["stuck"]
    assert stuck["severity"] == "high" and stuck["ranks"] == ["rank-2"]
    assert stuck["threshold"] == STUCK_WAIT and stuck["value"] == 99.5
    assert stuck["title"] == (
        "rank-2 stands in `wait_for_lock (train.py:62)` (idle) "
        "while the other ranks wait in collectives"
    )
    assert (
        "ranks 0-1, 3 wait 99.5% of the window in collectives at `main (train.py:93)`"
        in (stuck["advice"])
    )
    assert "rank-2 spends the window in `wait_for_lock (train.py:62)` (idle)" in stuck["advice"]
    assert "remove that excess" not in stuck["advice"]
    assert stuck["frames"] == ["wait_for_lock (train.py:62)", "main (train.py:93)"]
    assert report["findings"][0]["rule"] == "stuck"
    # The rank the others wait for says it is where the job hangs, for a client that
    # reads the straggler alone.
    assert report["straggler"]["name"] == "rank-2" and report["straggler"]["stuck"] is True


def test_the_hung_rank_is_measured_on_the_thread_its_peers_step_on():
    """Without collective samples the hung rank had no step thread at all (and no
    samples): it takes the thread named as the others' step threads."""
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1, 3)] + [("rank-2", hung_rank())]
    row = next(r for r in analyze_job(ranks)["ranks"] if r["name"] == "rank-2")
    assert row["detected_by"] == "peers" and row["step_threads"] == ["trainer"]
    assert row["samples"] == 1000


def test_several_ranks_elsewhere_are_all_named_with_their_places():
    ranks = [(f"rank-{i}", waiting_rank()) for i in range(6)]
    ranks += [("rank-6", hung_rank()), ("rank-7", hung_rank("data_wait", "train (train.py:95)"))]
    stuck = rules(analyze_job(ranks))["stuck"]
    assert stuck["ranks"] == ["rank-6", "rank-7"]
    assert stuck["title"].startswith("ranks 6-7 stand outside collectives")
    assert "rank-7 spends the window in `train (train.py:95)` (data_wait)" in stuck["advice"]


def test_ranks_that_wait_less_than_the_whole_window_have_a_straggler_not_a_hang():
    share = int(10 * STUCK_WAIT) - 100  # well below the threshold, whole interval
    ranks = [(f"rank-{i}", waiting_rank(share)) for i in (0, 1, 3)]
    ranks.append(("rank-2", rank(30, functions={**BASE, "augment (train.py)": 600})))
    report = analyze_job(ranks)
    found = rules(report)
    assert "stuck" not in found and found["straggler"]["ranks"] == ["rank-2"]
    assert "stuck" not in report["straggler"]


def test_a_rank_between_waiting_and_elsewhere_means_no_hang():
    middle = int(10 * (STUCK_ELSEWHERE + STUCK_WAIT) / 2)
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1)]
    ranks += [("rank-2", hung_rank()), ("rank-3", waiting_rank(middle))]
    assert "stuck" not in rules(analyze_job(ranks))


def test_without_idle_samples_no_hang_is_judged():
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1, 3)]
    ranks.append(("rank-2", hung_rank(idle=False)))
    assert "stuck" not in rules(analyze_job(ranks))


def test_a_job_where_every_rank_waits_is_no_hang_of_one_rank():
    ranks = [(f"rank-{i}", waiting_rank()) for i in range(4)]
    assert "stuck" not in rules(analyze_job(ranks))
