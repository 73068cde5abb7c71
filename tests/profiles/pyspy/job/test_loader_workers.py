"""A rank's DataLoader workers kept apart from the rank (profiles/pyspy/job/loader_workers.py), on
the real 2-rank recording tests/data/jobs/loader_workers (rank 1's workers spend their
items in `data.tokenize`; README.md there has the job's own clock) and on small stacks
for the edges."""

from __future__ import annotations

import copy
import json
import random
from array import array
from pathlib import Path

import pytest

from profiles import pyspy
from profiles.pyspy.formats.time_track import (
    NO_LINE,
    ThreadTrack,
    Track,
    load_track,
    track_json,
)
from profiles.pyspy.job.loader_workers import (
    own_track,
    split_processes,
    well_formed_workers,
    with_workers,
    worker_summary,
    workers_sentence,
)
from profiles.pyspy.job.report import analyze_job

DATA = Path(__file__).resolve().parents[3] / "data" / "jobs" / "loader_workers"
CHILDREN = json.loads((DATA / "children.json").read_text())
CLOCK_TOKENIZE = 57.8  # README.md: the job's own clock over the recording's window


def lines(rank: int) -> list[str]:
    return (DATA / f"rank-{rank}.txt").read_text().splitlines()


def summary(rank: int, **kw):
    split = split_processes(lines(rank))
    seen = CHILDREN[f"rank-{rank}"]
    return worker_summary(split.children, rounds=split.rounds, alive=[seen["start"], seen["end"]])


def test_the_ranks_own_lines_lose_their_process_frame_and_keep_every_own_sample():
    raw = lines(1)
    split = split_processes(raw)
    pid = CHILDREN["rank-1"]["pid"]
    assert split.own and split.children
    assert not any(line.startswith("process ") for line in split.own)
    assert all(line.startswith(f'process {pid}:"') for line in split.children)
    own = sum(int(x.rsplit(" ", 1)[1]) for x in raw if x.count("process ") == 1)
    assert sum(int(x.rsplit(" ", 1)[1]) for x in split.own) == own
    assert split.rounds == 159  # the main thread: one sample a round (8 s at 20 Hz, --idle)


def test_the_ranks_own_analysis_sees_no_worker_thread():
    split = split_processes(lines(1))
    stats = pyspy.analyze(pyspy.parse_profile_text("\n".join(split.own)), pyspy.AnalysisOptions())
    pids = {t["pid"] for t in stats["threads"]}
    assert pids == {None}  # no process frame left: every thread is the rank's own
    names = {t["name"] for t in stats["threads"]}
    assert (
        "MainThread" in names
        and len([t for t in stats["threads"] if t["name"] == "MainThread"]) == 1
    )


def test_rank_1s_workers_are_in_tokenize_as_the_jobs_clock_says():
    found = summary(1)
    top = found["functions"][0]
    assert (top["function"], top["frame"]) == ("tokenize (data.py)", "tokenize (data.py:23)")
    assert abs(top["percent"] - CLOCK_TOKENIZE) <= 10, (top, CLOCK_TOKENIZE)
    assert found["functions"][1]["function"] == "augment (data.py)"
    assert found["count"] == 2 and found["dataloader"] is True
    assert found["processes_seen"] >= 2  # respawned every epoch: more PIDs than at once
    # py-spy attached to each new worker a little late: the samples cover less than all.
    assert found["sampled_percent"] == round(100 * found["samples"] / (2 * 159), 1) < 100
    # The fork's parent frames (`train`, `main`) are no function the workers run.
    assert not {f["function"] for f in found["functions"]} & {"train (train.py)", "main (train.py)"}


def test_rank_0s_workers_wait_outside_the_users_code():
    found = summary(0)
    assert found["functions"] == [] and found["outside_percent"] == 100.0
    assert workers_sentence("rank-0", found) is None


def test_the_same_lines_shuffled_give_the_same_summary():
    shuffled = lines(1)
    random.Random(7).shuffle(shuffled)
    split = split_processes(shuffled)
    seen = CHILDREN["rank-1"]
    again = worker_summary(split.children, rounds=split.rounds, alive=[seen["start"], seen["end"]])
    assert again == summary(1)


WORKER = 'process 10:"python train.py";process 11:"python train.py";'
FORKED = (
    "<module> (train.py:9);train (train.py:40);Popen._launch (multiprocessing/popen_fork.py:71);"
)
BOOTSTRAP = "BaseProcess._bootstrap (multiprocessing/process.py:314);"
LOOP = "_worker_loop (torch/utils/data/_utils/worker.py:349);"


def test_a_comprehension_counts_as_its_function_and_the_fork_is_cut():
    busy = (
        f"{WORKER}thread (11): MainThread;{FORKED}{BOOTSTRAP}{LOOP}Items.__getitem__ (data.py:5);"
        "tokenize (data.py:20);tokenize.<locals>.<listcomp> (data.py:21)"
    )
    get = "Queue.get (multiprocessing/queues.py:113)"
    waiting = f"{WORKER}thread (11): MainThread;{FORKED}{BOOTSTRAP}{LOOP}{get}"
    feeder = f"{WORKER}thread (12): QueueFeederThread;Queue._feed (multiprocessing/queues.py:231)"
    found = worker_summary([f"{busy} 3", f"{waiting} 1", f"{feeder} 4"], rounds=4)
    shares = [(f["frame"], f["percent"]) for f in found["functions"]]
    assert shares == [("tokenize (data.py:20)", 75.0)]
    assert found["outside_percent"] == 25.0  # the feeder thread counts nowhere
    assert (found["samples"], found["count"], found["pids"]) == (4, 1, [11])


def test_workers_recorded_with_full_paths_are_named_as_py_spy_names_them_by_default():
    """A speedscope recording keeps absolute files: the workers' function reads as the
    raw record's would, and a package found installed by its path stays library code."""
    lib, job = "/opt/venv/lib/python3.11", "/srv/job"
    busy = (
        f"{WORKER}thread (11): MainThread;<module> ({job}/train.py:9);train ({job}/train.py:40);"
        f"BaseProcess._bootstrap ({lib}/multiprocessing/process.py:314);"
        f"_worker_loop ({lib}/site-packages/torch/utils/data/_utils/worker.py:349);"
        f"tokenize ({job}/data.py:20);encode ({lib}/site-packages/fasttok/core.py:7)"
    )
    found = worker_summary([f"{busy} 3"], rounds=3)
    assert [(f["function"], f["frame"]) for f in found["functions"]] == [
        ("tokenize (data.py)", "tokenize (data.py:20)")
    ]
    assert found["dataloader"] is True


def test_a_command_line_with_a_newline_and_a_semicolon_stays_one_frame():
    raw = [
        'process 10:"python -c import x;',
        'x.run()";thread (10): MainThread;run (x.py:3) 5',
        'process 10:"python -c import x;',
        'x.run()";process 12:"python -c w";thread (12): MainThread;work (w.py:2) 2',
        "# a comment",
    ]
    split = split_processes(raw)
    assert split.own == ["thread (10): MainThread;run (x.py:3) 5", "# a comment"]
    found = worker_summary(split.children, rounds=split.rounds)
    assert found["pids"] == [12] and found["functions"][0]["frame"] == "work (w.py:2)"


def test_no_children_no_summary():
    split = split_processes(["thread (5): MainThread;main (a.py:1) 3"])
    assert split.children == [] and worker_summary(split.children) is None


def _report():
    ranks = []
    for rank in range(2):
        split = split_processes(lines(rank))
        log = (DATA / f"rank-{rank}.txt.log").read_text()
        profile = pyspy.parse_profile_text("\n".join(split.own))
        stats = dict(pyspy.analyze(profile, pyspy.AnalysisOptions(idle=True), log_text=log))
        ranks.append((f"rank-{rank}", stats))
    return analyze_job(ranks)


@pytest.fixture(scope="module")
def report():
    return _report()


def test_the_input_bound_finding_and_the_straggler_name_the_workers_hottest_function(report):
    told = with_workers(report, {"rank-0": summary(0), "rank-1": summary(1)})
    share = summary(1)["functions"][0]["percent"]
    expected = f"rank-1's 2 DataLoader workers spend {share:g}% in `tokenize (data.py:23)`"
    rules = {f["rule"]: f for f in told["findings"]}
    assert expected in rules["input_bound"]["advice"]
    assert rules["input_bound"]["workers"][0]["frame"] == "tokenize (data.py:23)"
    assert told["straggler"]["name"] == "rank-1"
    assert told["straggler"]["workers"]["text"] == expected
    assert expected in rules["straggler"]["advice"]
    waits = [i for i in told["straggler"]["explanation"] if i.get("state") == "data_wait"]
    assert waits and all(i["workers"]["rank"] == "rank-1" for i in waits)
    assert [r["name"] for r in told["ranks"]] == ["rank-0", "rank-1"]  # workers are no ranks
    assert told["ranks"][1]["workers"]["count"] == 2


def test_the_report_is_not_changed_in_place_and_bad_stored_workers_read_as_none(report):
    before = copy.deepcopy(report)
    told = with_workers(report, {"rank-1": {"functions": "tokenize"}, "rank-0": None})
    assert report == before
    assert told["findings"] == report["findings"] and told["straggler"] == report["straggler"]
    assert all("workers" not in r for r in told["ranks"])
    assert not well_formed_workers({"count": 2, "functions": [{"frame": 1}]})


def test_a_straggler_not_explained_by_data_wait_is_left_as_it_is(report):
    straggler = {**report["straggler"], "explanation": [
        {**i, "state": "compute"} for i in report["straggler"]["explanation"]]}  # fmt: skip
    told = with_workers({**report, "straggler": straggler}, {"rank-1": summary(1)})
    assert "workers" not in told["straggler"]
    assert all("workers" not in f for f in told["findings"] if f["rule"] == "straggler")


def test_a_time_track_keeps_the_ranks_threads_with_their_records_renumbered():
    # Raw text as the speedscope split writes it: one record a line, nested process frames.
    rank, worker = 'process 10:"python train.py"', 'process 10:"python train.py";process 11:"w"'
    raw = [
        f"{rank};thread (10): MainThread;train (train.py:5) 2",  # record 0: the rank's
        f"{worker};thread (11): MainThread;tokenize (data.py:3) 2",  # 1: the worker's
        f"{rank};thread (12): feeder;feed (q.py:1) 1",  # 2: the rank's
        f"{worker};thread (11): MainThread;augment (data.py:9) 1",  # 3: the worker's
        "# a malformed sample",
    ]
    split = split_processes(raw, 10)
    assert split.kept == [0, NO_LINE, 1, NO_LINE]
    track = Track(start=100.0, end=101.0, rate=3, rounds=3, records=4, threads=[
        ThreadTrack(10, "MainThread", 10, lines=array("i", [0, 0, NO_LINE])),
        ThreadTrack(12, "feeder", 10, lines=array("i", [2, NO_LINE, NO_LINE])),
        ThreadTrack(11, "MainThread", 11, lines=array("i", [1, 3, 1])),
    ])  # fmt: skip
    mine = load_track(track_json(own_track(track, split.kept, 10)))
    assert [(t.tid, t.pid, list(t.lines)) for t in mine.threads] == [
        (10, None, [0, 0, NO_LINE]),
        (12, None, [1, NO_LINE, NO_LINE]),
    ]
    assert (mine.records, mine.rounds, mine.start, mine.end) == (2, 3, 100.0, 101.0)
    assert split.own[:2] == ["thread (10): MainThread;train (train.py:5) 2",
                             "thread (12): feeder;feed (q.py:1) 1"]  # fmt: skip


def test_the_rank_is_its_pid_where_processes_are_flat_and_its_only_frame_without_it():
    flat = ['process 10:"";thread (10): MainThread;a (a.py:1) 3',
            'process 11:"";thread (11): MainThread;b (b.py:1) 2']  # fmt: skip
    assert split_processes(flat, 10).own == ["thread (10): MainThread;a (a.py:1) 3"]
    assert split_processes(flat, 10).children == [flat[1]]
    # A PID py-spy never wrote (another namespace): the root process frame decides.
    assert len(split_processes(flat, 99).own) == 2
