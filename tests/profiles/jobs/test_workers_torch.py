"""A real gloo DDP job whose rank 1 waits for its DataLoader workers
(bench/targets/loader_job/train.py: 2 ranks, 2 workers each; rank 1's items run
`data.tokenize`), captured as a whole job through the product — the API, a real
worker, a real sshd on loopback, real py-spy with the whole-job defaults (at 40 Hz) —
while one of rank 1's workers is killed mid-capture and the rank starts new ones. The
job keeps its own clock of the time its workers spend in `tokenize`; the report must
agree with it within 10 points, name the workers as rank 1's (never as ranks), and
keep rank 1's own capture whole. About 25 s, most of it the torch start and the window."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from profiles.models import Capture, CaptureGroup
from profiles.pyspy.formats import load_track
from runs.models import Host, Run, RunProcess
from tests.support.procs import children, stat
from tests.support.requirements import require_torch
from tests.support.sshd import ALIAS, free_port
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.sshd, pytest.mark.django_db(transaction=True)]
SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "targets" / "loader_job" / "train.py"
DURATION_S = 10
RATE = 40  # more samples than the default 20 Hz: the share is compared within 10 points
CLOCK = re.compile(
    r"clock rank=1 t=(\S+) steps=(\d+) tokenize_s=(\S+) augment_s=\S+ worker_s=(\S+)"
)


class Job:
    """The two ranks; rank 1's clock lines and what it said, kept as they come."""

    def __init__(self, python: str, errors) -> None:
        port, self.ranks = free_port(), []
        self.clock: list[tuple[float, ...]] = []  # (epoch s, steps, tokenize s, worker s)
        self.said: list[str] = []
        self.said_at: list[float] = []  # when each line of `said` came (epoch s)
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))  # fmt: skip
            argv = [python, str(SCRIPT), "--tokenize-ms", "40", "--augment-ms", "5",
                    "--epoch-batches", "200", "--seconds", "60"]  # fmt: skip
            self.ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                               stderr=errors, text=True))  # fmt: skip
        self.ready = [threading.Event(), threading.Event()]
        self.paused: list[int] = []
        for rank in range(2):
            threading.Thread(target=self._read, args=(rank,), daemon=True).start()

    def _read(self, rank: int) -> None:
        for line in self.ranks[rank].stdout:
            if line.startswith("ready"):
                self.ready[rank].set()
            if rank == 1 and (match := CLOCK.match(line)):
                self.clock.append(tuple(float(g) for g in match.groups()))
            elif rank == 1:
                self.said_at.append(time.time())  # first: `said` is what the test polls
                self.said.append(line.strip())
        self.ranks[rank].stdout.close()

    def workers(self) -> dict[int, float]:
        """Rank 1's children now, with their ages in seconds."""
        return _children(self.ranks[1].pid)

    def pause(self) -> None:
        """SIGSTOP both ranks and their workers until `resume()`. Started beside the other
        tests, the workers' tokenize loops (about a core) ran through the `alone` blocks
        of the tests before this one: a 32-rank window's py-spy once took half its
        rounds there."""
        ranks = [proc.pid for proc in self.ranks]
        self.paused = ranks + [pid for rank in ranks for pid in _children(rank)]
        _signal(self.paused, signal.SIGSTOP)

    def resume(self) -> None:
        _signal(self.paused, signal.SIGCONT)
        self.paused = []

    def sampled_worker(self) -> int | None:
        """A worker of rank 1 that has lived long enough to have samples (py-spy attaches
        to a new child within about a second), the oldest; None if none has yet."""
        ages = self.workers()
        old = [pid for pid, age in ages.items() if age >= 1.5]
        return max(old, key=ages.get) if old else None

    def tokenize_share(self, start: float, end: float) -> float:
        """Percent of the workers' time in tokenize between the clock lines closest to
        `start` and `end` (epoch seconds)."""
        first = min(self.clock, key=lambda c: abs(c[0] - start))
        last = min(self.clock, key=lambda c: abs(c[0] - end))
        return 100 * (last[2] - first[2]) / (last[3] - first[3])

    def steps(self) -> int:
        return int(self.clock[-1][1]) if self.clock else 0

    def stop(self) -> None:
        """Kill both ranks (and so their workers); again, it does nothing."""
        self.resume()  # a stopped worker would never see its rank die
        for proc in self.ranks:
            if proc.poll() is None:
                proc.kill()
        for proc in self.ranks:
            proc.wait()


def _children(pid: int) -> dict[int, float]:
    """The children of `pid` now, with their ages in seconds."""
    found = {child: stat(child) for child in children(pid)}
    return {child: _age_s(fields) for child, fields in found.items() if fields is not None}


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _age_s(fields: list[str]) -> float:
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
    return float(Path("/proc/uptime").read_text().split()[0]) - started


def _main_samples(capture: Capture) -> int:
    return next(t["samples"] for t in capture.stats["threads"] if t["name"] == "MainThread")


def _rank_1_does(job: Job, errors: Path, predicate) -> None:  # noqa: ANN001
    """Wait up to 30 s for `predicate`; fail with what rank 1 said and its stderr."""
    try:
        _wait(predicate, 30, "such change in rank 1")
    except AssertionError:
        raise AssertionError((job.said, errors.read_text()[-3000:])) from None


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout_s} s")


# `alone`: the share from samples is held against the job's own clock within 10 points;
# beside the rest of the suite on two cores it drifted 15 (47.8 against 32.9), the
# machine's load and not the product. The ranks start beside the others and stand
# stopped from their first step to the block; the capture, the kill and the report run
# with the machine to themselves.
@pytest.mark.alone
def test_rank_1s_workers_are_its_own_named_in_the_evidence_and_a_killed_one_costs_it_nothing(
    sshd, tmp_path, owner_client, alone
):
    python = require_torch()
    py_spy = Host.objects.get(name="local").py_spy
    host = Host.objects.create(name="node", transport="ssh", address=ALIAS, py_spy=py_spy)
    worker = WorkerProcess(tmp_path / "w.log", env={"FLAMEDECK_SSH_CONFIG": str(sshd.config)})
    stderr = open(tmp_path / "ranks.err", "w")  # noqa: SIM115 - closed below
    job = Job(python, stderr)
    try:
        assert all(ready.wait(60) for ready in job.ready), "a rank did not start"
        job.pause()  # until its block: the blocks before it have the machine to themselves
        run = Run.objects.create(name="loader-job", status="running")
        for rank, proc in enumerate(job.ranks):
            RunProcess.objects.create(run=run, host=host, pid=proc.pid, role=f"rank-{rank}")
        settings = {"duration": DURATION_S, "rate": RATE}  # the whole-job defaults else
        with alone():
            job.resume()
            asked = owner_client.post(f"/api/runs/{run.pk}/capture/", settings, "application/json")
            assert asked.status_code == 201, asked.content
            group = CaptureGroup.objects.get(pk=asked.json()["id"])
            rank1 = group.captures.get(process__role="rank-1")
            _wait(lambda: Capture.objects.get(pk=rank1.pk).sampling_started_at, 30, "sampling")
            time.sleep(2)
            killed = _wait(job.sampled_worker, 5, "worker sampled for a while")
            before = set(job.workers())
            os.kill(killed, signal.SIGKILL)  # mid-capture: the rank respawns its workers
            timeline = {"killed": time.time()}
            # The rank says so within 0.3 s here. Once in about nine full-suite runs no
            # word came in 15 s: likely the rank dying of the DataLoader's SIGCHLD error
            # inside its `except`, which `respawn` now survives.
            errors = tmp_path / "ranks.err"
            _rank_1_does(job, errors, lambda: any(s.startswith("worker died") for s in job.said))
            respawned_at = job.steps()
            timeline["died"] = next(at for at, s in zip(job.said_at, job.said, strict=False)
                                    if s.startswith("worker died"))  # fmt: skip
            _rank_1_does(job, errors, lambda: set(job.workers()) - before)
            timeline["new workers"] = time.time()
            # Alone while py-spy samples; the analyses after it need no quiet machine.
            _wait(lambda: not group.captures.filter(status__in=("queued", "running")).exists(),
                  60, "sampling ended")  # fmt: skip
        # Sampled and its clock read: the workers' tokenize loops would only burn the
        # cores the analyses and the other tests need (about 1 CPU-s a second).
        job.stop()
        group = _wait(lambda: CaptureGroup.objects.filter(pk=group.pk, job_report__isnull=False)
                      .first(), 60, "job report")  # fmt: skip
    finally:
        alone.release()
        worker.stop()
        job.stop()
        stderr.close()
    report, rank1 = group.job_report, Capture.objects.get(pk=rank1.pk)
    assert rank1.status == "done", (rank1.status, rank1.error)
    start = rank1.sampling_started_at.timestamp()
    clock = job.tokenize_share(start, start + rank1.progress["sampled_s"])

    # The workers are rank 1's, never ranks; its own capture holds its own samples only.
    assert [r["name"] for r in report["ranks"]] == ["rank-0", "rank-1"]
    assert report["without_samples"] == [] and group.captures.count() == 2
    workers = {r["name"]: r.get("workers") for r in report["ranks"]}["rank-1"]
    assert workers["count"] == 2 and workers["dataloader"], workers
    # The killed one, sampled until it died, and the ones spawned after it.
    window = {k: round(at - start, 1) for k, at in timeline.items()}
    window["end"] = rank1.progress["sampled_s"]
    # And the ones it started after the kill: the rank starts them within 0.3 s of it
    # (bench/targets/loader_job/train.py `respawn`; twice the rank died instead, its workers gone).
    log = rank1.log_file.read().decode(errors="replace")[-2000:] if rank1.log_file else ""
    assert killed in workers["pids"], (workers["pids"], window, log)
    assert set(workers["pids"]) - before, (workers["pids"], window, job.workers(), log)
    assert {t["pid"] for t in rank1.stats["threads"]} == {None}
    # Its timeline keeps py-spy's own times (a `--subprocesses` record is a chrometrace,
    # profiles.captures.timekeeping): the rank's MainThread is placed in every round.
    track = load_track(rank1.time_file.read())
    assert track.times is not None and "MainThread" in {t.name for t in track.timed()}

    # What they do, as the job's clock says it.
    top = workers["functions"][0]
    # py-spy's speedscope (what captures record) names files by their full path.
    assert re.fullmatch(r"tokenize \(\S*\bdata\.py\)", top["function"]), workers["functions"]
    assert abs(top["percent"] - clock) <= 10, (top["percent"], clock)
    said = f"rank-1's 2 DataLoader workers spend {top['percent']:g}% in `{top['frame']}`"
    findings = {f["rule"]: f for f in report["findings"]}
    assert said in findings["input_bound"]["advice"], findings["input_bound"]["advice"]
    straggler = report["straggler"]
    if straggler:  # the waits a stall after the kill adds can make it a hang instead
        assert straggler["name"] == "rank-1", straggler
        if any(i.get("state") == "data_wait" for i in straggler["explanation"]):
            assert straggler["workers"]["text"] == said
        if "straggler" in findings:
            assert said in findings["straggler"]["advice"]

    # The killed worker cost rank 1 nothing: its py-spy sampled it to the end of the
    # window (no "process exited"), as often as rank 0's (no kill) sampled rank 0, and
    # its native stacks were kept (failed samples of workers are not the rank's).
    rank0 = group.captures.get(process__role="rank-0")
    main = {c.process.role: _main_samples(c) for c in (rank0, rank1)}
    assert main["rank-1"] >= 0.85 * main["rank-0"], main
    assert "exited" not in rank1.note and not rank1.progress.get("python_only"), rank1.note
    assert job.steps() > respawned_at, "rank 1 stopped training after its worker died"
    print(f"workers' tokenize: samples {top['percent']}%, the job's clock {clock:.1f}%; "
          f"main-thread samples {main}; seconds into the window {window}")  # fmt: skip
