"""A timeline on one clock (issue 48 item 5): a real 2-rank DDP job (bench/targets/eval_job.py,
gloo on CPU) evaluates for 1.0-1.35 s every 40 steps and writes each evaluation's start
and end on its own clock; both ranks are recorded at once through the whole-job host
script (runs.remote.many) in the format the product asks for with `--idle`, and split as
the worker splits them (timekeeping.timed_result). On every rank's step thread, at least
90% of the evaluations begin and end within 100 ms of the job's clock, and the timeline's
buckets inside them read `compute`, what evaluate does (bench/app/bench_timeline_clock.py
measures the same over 40 s, before and after). The same holds for a whole job's capture
(`--subprocesses`, its default) of a rank that forks short-lived workers, and the
workers' samples end when they exited (profiles/pyspy/formats/chrometrace.py)."""

import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiles.captures.timekeeping import (
    RECORD_FORMAT_TIMED,
    record_format,
    spawned_at,
    timed_result,
    window_at,
)
from profiles.pyspy.formats import chrometrace_samples, load_track
from profiles.pyspy.job import own_track, split_processes
from profiles.pyspy.timed.timed_capture import TimedCapture, with_states
from runs.remote.many import record_many
from runs.remote.model import RecordResult, RecordSettings, Target
from tests.support.requirements import require, require_torch

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[3] / "bench" / "app" / "bench_timeline_clock.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_timeline_clock", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# `alone` for the recording: its assertion is about time on this machine. With an
# evaluation every 60 steps about eight fell in the window, so one stamped late (py-spy
# stamps a sample as it writes it, tens of ms late on a busy host) missed the 90% bar:
# beside the rest of the suite two of eight began 0.14 s late in a full run, and 2 of 12
# runs missed it on a quiet machine. Every 40 steps, ten or more fall in the window.
@pytest.mark.alone
def test_every_ranks_evaluations_begin_and_end_within_100_ms_of_the_jobs_clock(alone):
    bench = _bench()
    bench.TORCH_PYTHON = require_torch()
    with tempfile.TemporaryDirectory() as folder:
        clock = Path(folder, "clock.jsonl")
        procs = bench.start_job(2, 40, clock, eval_every=40)
        try:
            pids = [p.pid for p in procs]
            with alone():  # from the scheduled instant to the end of the window
                results = bench.record(pids, RECORD_FORMAT_TIMED, 12, 50, native=True)
            evaluations = [json.loads(line) for line in clock.read_text().splitlines()]
        finally:
            alone.release()
            for proc in procs:
                proc.kill()
                proc.wait()
    found = []
    for rank, pid in enumerate(pids):
        capture = bench.timed_capture(pid, results[pid], 50, 12)
        assert capture.track.times is not None  # placed at py-spy's own times
        # No count is held against py-spy's `Samples: N` here: the rounds before the
        # instant are cut, and a thread that ended keeps its last stack to the end unless
        # another was written under its handle after it (the format never says when a
        # thread ends); tests/profiles/pyspy/formats/test_chrometrace.py holds the count.
        # The step thread is sampled in every round the window kept: 12 s at 50 Hz, on
        # average (py-spy waits a random interval between rounds: a few percent more by
        # chance); `--native` on a busy 2-core machine falls to about half that rate.
        main = next(t for t in capture.track.timed() if t.name == "MainThread")
        assert 12 * 50 * 0.4 <= main.samples <= 12 * 50 * 1.15, (rank, main.samples)
        rows = bench.windows(capture, [e for e in evaluations if e["rank"] == rank])
        assert len(rows) >= 3, (rank, evaluations)
        found += rows
    report = bench.summary(found)
    signed = [(f["begin"], f["end"]) for f in found]
    assert report["windows"] >= 10, report  # so that one late stamp is not the 90% bar
    assert report["both_within_100ms"] >= 0.9, (report, signed)
    assert report["inside_compute"] >= 0.8, (report, signed)


# A whole job's capture (`--subprocesses`, its default): a rank that evaluates now and
# then and forks a short-lived worker from its main thread about once a second, as a
# DataLoader does, on its own clock. Plain Python: no torch needed.
FORKING_JOB = textwrap.dedent("""
    import json, os, sys, threading, time  # threading: py-spy names threads from it

    clock = open(sys.argv[1], "a", buffering=1)

    def note(**fields):
        clock.write(json.dumps(fields) + "\\n")

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def tokenize():
        spin(0.4)

    def augment():
        time.sleep(0.2)

    def worker():
        start = time.time()
        tokenize()
        tokenized = time.time()
        augment()
        note(kind="worker", pid=os.getpid(), start=start, tokenized=tokenized, end=time.time())
        os._exit(0)

    def evaluate(seconds):
        spin(seconds)

    def train():
        time.sleep(0.01)

    print("ready", flush=True)
    deadline, forked, step = time.time() + float(sys.argv[2]), 0.0, 0
    while time.time() < deadline:
        if time.time() - forked > 0.9:
            forked = time.time()
            if os.fork() == 0:
                worker()
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        step += 1
        if step % 100:
            train()
            continue
        start = time.time()
        evaluate(0.6 + step // 100 % 3 * 0.1)
        note(kind="eval", rank=0, start=start, end=time.time())
""")


def _record_whole_job(pid: int, duration: float, rate: int) -> RecordResult:
    """`pid` recorded as a whole-job capture records a rank: the host script, an instant
    2 s ahead, `--subprocesses --idle --threads`, in the format the product asks for."""
    capture = SimpleNamespace(idle=True, gil=False, subprocesses=True)
    settings = RecordSettings(
        duration_s=duration, rate=rate, native=False, threads=True, idle=True, gil=False,
        nonblocking=False, subprocesses=True, format=record_format(capture), gpu=False,
    )  # fmt: skip
    assert settings.format == RECORD_FORMAT_TIMED
    target = Target(transport="local", py_spy=_bench().PYSPY)
    outcome = record_many(target, [pid], settings, _bench()._Session(), start_at=time.time() + 2)
    return outcome.results[pid]


SLACK_S = 0.1
"""How far a round's stamp may lie from when py-spy took it: py-spy stamps a sample as
it writes it, tens of milliseconds late on a busy host (its clock starts, too, a little
after the host read `spawned_at`)."""


def _bracketed(capture: TimedCapture, evaluations: list[dict]) -> list[tuple]:
    """Per evaluation inside the capture: (start, the rank's last round before its first
    sample in `evaluate`, that sample's round, end, its last sample's round, the next
    round), on the track's clock: where py-spy's rounds place it on the job's clock,
    however far apart py-spy took them."""
    bench, track = _bench(), capture.track
    thread = bench._main_thread(capture)
    marks = bytes([*(bench._in_evaluate(capture.stack(r)) for r in range(len(capture.lines))), 0])
    flags = [*capture.flags(thread, marks), 0]
    runs, begin = [], None
    for k, flag in enumerate(flags):
        if flag and begin is None:
            begin = k
        elif not flag and begin is not None:
            runs.append((begin, k - 1))
            begin = None
    found = []
    for ev in evaluations:
        start, end = ev["start"] - track.start, ev["end"] - track.start
        if start < 0.5 or end > track.duration_s - 0.5 or not runs:
            continue
        first, last = min(runs, key=lambda r: bench._distance((track.at(r[0]), track.at(r[1])),
                                                             start, end))  # fmt: skip
        found.append((start, track.at(first - 1), track.at(first),
                      end, track.at(last), track.at(last + 1)))  # fmt: skip
    return found


def test_a_whole_job_capture_keeps_the_rank_and_its_forked_workers_on_the_jobs_clock(tmp_path):
    """The rank's own timeline (its workers' samples kept apart, as the job pipeline
    does) places every evaluation between py-spy's rounds around where it began and
    ended, and at least 80% of them within 100 ms of the job's clock at both ends
    (py-spy waits a random interval between rounds, and once took none for 123 ms
    here); every worker that ended inside the window is sampled until it exited, and
    not after (read as before, each dead worker lasted to the end of the window); and
    the workers' share of samples in `tokenize` is the job's own (from each one's first
    sample) within 10 points: of some 250 samples, one standard deviation of a share is
    3 points (read as before, `tokenize` fell below 20%)."""
    require(_bench().PYSPY, "py-spy", "make setup")
    clock, rate, duration = tmp_path / "clock.jsonl", 50, 10
    (tmp_path / "job.py").write_text(FORKING_JOB)
    job = subprocess.Popen([sys.executable, str(tmp_path / "job.py"), str(clock), "18"],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert job.stdout.readline().startswith("ready")
        result = _record_whole_job(job.pid, duration, rate)
    finally:
        job.kill()
        job.wait()
    notes = [json.loads(line) for line in clock.read_text().splitlines()]
    capture = SimpleNamespace(pk=job.pid, idle=True, gil=False, rate=rate, duration=duration)
    kept, track_text = timed_result(capture, result)
    assert track_text is not None, result.facts
    text = kept.raw.decode()
    split = split_processes(text.splitlines(), job.pid)
    own = own_track(load_track(track_text), split.kept, job.pid)
    assert own.times is not None  # the rank's rounds at py-spy's own times
    own_text = "".join(f"{line}\n" for line in split.own)
    rank = TimedCapture(own_text, with_states(own, own_text))
    evaluations = [n for n in notes if n["kind"] == "eval"]
    rows = _bench().windows(rank, evaluations)
    assert len(rows) >= 4, notes
    for start, before, first, end, last, after in _bracketed(rank, evaluations):
        assert before - SLACK_S <= start <= first + SLACK_S, (before, start, first)
        assert last - SLACK_S <= end <= after + SLACK_S, (last, end, after)
    report = _bench().summary(rows)
    assert report["both_within_100ms"] >= 0.8, (report, rows)

    # The workers, from py-spy's file read as the capture's was (timekeeping).
    facts, spawned = result.facts, spawned_at(result.facts)
    window = window_at(facts) - spawned
    samples = chrometrace_samples(
        result.raw, rate=rate, stopped_s=window + duration, window_s=window,
        samples_reported=int(re.search(r"Samples: (\d+)", result.log)[1]),
    )  # fmt: skip
    doc = json.loads(samples.speedscope)
    names = [f["name"] for f in doc["shared"]["frames"]]
    start, end = spawned + samples.times[0], spawned + samples.end_s
    ended, tokenize, clock_tokenize = [], [0, 0], [0.0, 0.0]
    for worker in (n for n in notes if n["kind"] == "worker"):
        name = f'Process {worker["pid"]} Thread {worker["pid"]} "MainThread"'
        profile = next((p for p in doc["profiles"] if p["name"] == name), None)
        if profile is None or not start + 0.5 < worker["end"] < end - 0.5:
            continue
        first = spawned + samples.times[samples.firsts[name]]
        ended.append(worker["end"] - spawned - samples.times[samples.firsts[name] + len(
            profile["samples"]) - 1])  # fmt: skip
        if first < start + 0.1:  # begun before the window: its first rounds were cut
            continue
        stacks = [[names[i] for i in s] for s in profile["samples"]]
        tokenize[0] += sum("tokenize" in s for s in stacks)
        tokenize[1] += len(stacks)
        clock_tokenize[0] += max(0.0, worker["tokenized"] - first)
        clock_tokenize[1] += worker["end"] - first
    assert len(ended) >= 5, (notes, start, end)
    # Sampled until it exited, and not after: py-spy's next round comes a random
    # interval later (20 ms on average, once 83 ms here).
    assert all(-SLACK_S <= e <= 0.25 for e in ended), ended
    assert statistics.median(ended) <= 0.05, ended
    share, truth = 100 * tokenize[0] / tokenize[1], 100 * clock_tokenize[0] / clock_tokenize[1]
    assert abs(share - truth) <= 10, (share, truth, ended)
    print(f"whole job: evaluations {report}; workers last sampled before they exited by "
          f"{sorted(round(e, 3) for e in ended)} s; tokenize {share:.1f}% of the workers' "
          f"samples, {truth:.1f}% on the job's clock")  # fmt: skip
