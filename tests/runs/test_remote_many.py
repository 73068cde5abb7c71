"""Several PIDs of one host in one session (`record_many`): one go, one window,
per-PID failures and cancels, and no py-spy left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from runs.remote import RecordSettings, RemoteError, record_many, record_many_script
from runs.remote.many import _frames
from tests.support.procs import command_line, descendants, wait_until
from tests.support.workload import Workload, pyspy_running, start_workload

SHORT = RecordSettings(duration_s=3, rate=50)
# For a process ended mid-window: a process killed while py-spy holds it stopped
# (ptrace, the default) can leave py-spy 0.4.3 hung or blind to the exit (docs/troubleshooting.md).
NONBLOCKING_5S = RecordSettings(duration_s=5, rate=50, native=False, nonblocking=True)
TRANSPORTS = ["local", pytest.param("ssh", marks=pytest.mark.sshd)]


@pytest.fixture
def three() -> Iterator[list[Workload]]:
    running = [start_workload(threads=1) for _ in range(3)]
    yield running
    for workload in running:
        workload.stop()


class Session:
    """A caller that starts after `hold_s`, stops `stop` after `stop_after_s`."""

    def __init__(self, hold_s: float = 0.0, stop: int | None = None, stop_after_s: float = 0):
        self.t0 = time.monotonic()
        self.hold_s, self.stop, self.stop_after_s = hold_s, stop, stop_after_s
        self.ready_at: float | None = None
        self.sampling: dict[int, float] = {}
        self.sampled: defaultdict[int, threading.Event] = defaultdict(threading.Event)
        self.on_sampling = None

    def on_ready(self) -> None:
        self.ready_at = time.monotonic()

    def may_start(self) -> bool:
        return time.monotonic() - self.t0 >= self.hold_s

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None:
        if line.startswith("py-spy> Sampling process"):
            self.sampling[pid] = time.monotonic()
            self.sampled[pid].set()
            if self.on_sampling:
                self.on_sampling()

    def pids_to_stop(self) -> list[int]:
        late = self.stop and self.sampling and time.monotonic() - self.t0 >= self.stop_after_s
        return [self.stop] if late else []


def test_the_script_is_valid_posix_sh_and_refuses_odd_pids(local_target):
    script = record_many_script(local_target, [11, 12], SHORT)
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    for pids in ([], [5, 5], [0], ["7; reboot"], [True]):
        with pytest.raises(ValueError):
            record_many_script(local_target, pids, SHORT)


def test_frames_split_each_pids_exit_code_stderr_and_raw():
    marker = "@@flamedeck-end-5f2c9a@@"
    out = (
        f"7 py-spy> hi\n\n{marker} 7 0 1 0 6\na;b 3\n"
        f"\n{marker} 8 1 0 5 0\nError\n{marker} gpu 4\nx,y\n"  # stderr "Error", 5 bytes
    ).encode()
    frames, gpu_csv = _frames(out)
    assert frames == {7: (0, True, "", b"a;b 3\n"), 8: (1, False, "Error", b"")}
    assert gpu_csv == "x,y\n"
    assert _frames(out[: out.index(b" gpu")]) is None  # cut short: no results


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_pid_starts_at_one_go_and_samples_the_same_window(transport, request, three):
    target = request.getfixturevalue(f"{transport}_target")
    pids = [w.pid for w in three]
    # The go comes 2 s in: the session must be up before it for "nothing before the
    # go" to mean anything, and an SSH connect beside another test took 1.03 s.
    session = Session(hold_s=2.0)
    outcome = record_many(target, pids, SHORT, session)
    assert session.ready_at is not None and session.ready_at - session.t0 < 2.0
    assert min(session.sampling.values()) - session.t0 >= 2.0  # nothing before the go
    assert max(session.sampling.values()) - min(session.sampling.values()) < 1.0
    for pid in pids:
        result = outcome.results[pid]
        assert result.stopped_by == "duration" and b"target-0" in result.raw
        assert "Wrote raw flamegraph data" in result.log and result.exit_code == 0
    assert not any(pyspy_running(pid) for pid in pids)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_with_an_instant_every_py_spy_attaches_before_it_and_the_host_ends_the_window(
    transport, request, three
):
    """The scheduled instant: py-spy starts (and attaches) as soon as the host's clock
    is measured, every PID's window starts at the instant on the host's clock and the
    host itself stops them all `duration` later; the worker never has to say stop."""
    target = request.getfixturevalue(f"{transport}_target")
    pids = [w.pid for w in three]
    start_at = time.time() + 2.5
    outcome = record_many(target, pids, SHORT, Session(), start_at=start_at)
    for pid in pids:
        facts = outcome.results[pid].facts
        window, sampling, ended = (
            float(facts[k]) for k in ("window_at", "sampling_at", "ended_at")
        )
        offset = float(facts["clock_offset_s"])  # one machine: the clocks agree
        assert abs(offset) < 0.05 and 0 < float(facts["clock_trip_s"]) < 1.0
        assert abs(window + offset - start_at) < 1e-3
        assert sampling < window  # attached before the instant
        assert SHORT.duration_s <= ended - window < SHORT.duration_s + 1.0
        assert outcome.results[pid].stopped_by == "duration"
        span = outcome.spans[pid]
        assert span["stop"] - span["start"] == pytest.approx(SHORT.duration_s, abs=1.0)
    assert not any(pyspy_running(pid) for pid in pids)


def test_the_results_are_read_and_finished_inside_the_gate(local_target, three):
    """Every host of a group ends at one instant: each session reads its ranks' samples
    into memory, and hands them to `finish`, only while it holds the worker's gate."""
    events = []

    class Gate:
        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    def finish(outcome):
        events.append(sorted(outcome.results))
        return "stored"

    pids = [w.pid for w in three[:2]]
    said = record_many(local_target, pids, SHORT, Session(), gate=Gate(), finish=finish)
    assert said == "stored" and events == ["enter", sorted(pids), "exit"]


def test_a_missing_pid_fails_alone_and_a_stopped_one_keeps_its_samples(local_target, three):
    pids = [w.pid for w in three]
    session = Session(stop=pids[0], stop_after_s=1.0)
    outcome = record_many(local_target, [*pids, 4_000_000], SHORT, session)
    missing = outcome.results[4_000_000]
    assert isinstance(missing, RemoteError) and missing.cause == "no_such_pid"
    cancelled, full = outcome.results[pids[0]], outcome.results[pids[1]]
    assert cancelled.stopped_by == "cancel" and full.stopped_by == "duration"
    samples = [int(line.rsplit(" ", 1)[1]) for line in cancelled.raw.decode().splitlines()]
    assert 0 < sum(samples) < 0.8 * 3 * 50 * 2  # under the full window's share


@pytest.mark.sshd
def test_a_dead_ssh_client_stops_every_pyspy_of_the_host(ssh_target, three):
    pids = [w.pid for w in three]
    session = Session()
    started = []

    def kill_ssh() -> None:
        if len(session.sampling) == len(pids) and not started:
            started.append(True)
            for pid in descendants(os.getpid()):
                if command_line(pid).split(" ")[0] == "ssh":
                    os.kill(pid, signal.SIGKILL)

    session.on_sampling = kill_ssh
    with pytest.raises(RemoteError):
        record_many(ssh_target, pids, RecordSettings(duration_s=30, rate=50), session)
    assert started
    assert wait_until(lambda: not any(pyspy_running(pid) for pid in pids), timeout_s=10)


# Seconds between a target's exit and its py-spy's stop being seen (py-spy notices the
# exit on its next sample; the line then crosses a pipe, and ssh for a remote host).
NOTICE_S = 1.0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_pid_keeps_its_own_sampling_span_when_its_process_exits_mid_window(transport, request):
    target = request.getfixturevalue(f"{transport}_target")
    session = Session()
    stays, leaves = start_workload(threads=1), start_workload(threads=1)
    leaves.exit_once_sampled(2.5, session.sampled[leaves.pid])
    try:
        outcome = record_many(target, [stays.pid, leaves.pid], NONBLOCKING_5S, session)
    finally:
        stays.stop()
        leaves.stop()
    gone, full = outcome.results[leaves.pid], outcome.results[stays.pid]
    assert gone.process_exited and not full.process_exited
    spans = {pid: span["stop"] - span["start"] for pid, span in outcome.spans.items()}
    # The session lasted about the window (py-spy may end its own count of duration x
    # rate samples a little early); the leaving process ends 2.5 s after its py-spy
    # starts, and its span ends when that py-spy is seen to stop (NOTICE_S later at
    # most, on a loaded machine).
    assert gone.elapsed_s >= 4 and 0 < spans[leaves.pid] <= 2.5 + NOTICE_S, spans
    assert spans[stays.pid] - spans[leaves.pid] >= 1, spans  # not the session's time
    assert 4 <= spans[stays.pid] <= gone.elapsed_s, spans


def test_each_pid_reports_the_hosts_clock_when_its_py_spy_said_it_samples(local_target, three):
    from runs.remote import guard

    before = time.time()
    outcome = record_many(local_target, [w.pid for w in three], SHORT, Session())
    starts = [guard.sampling_at(outcome.results[w.pid].facts) for w in three]
    assert all(s is not None and before <= s <= time.time() for s in starts), starts
    assert max(starts) - min(starts) < 1.0
    assert all("@@flamedeck-fact@@" not in outcome.logs[w.pid] for w in three)


def test_the_host_clock_offset_is_the_midpoint_of_the_quickest_round_trip(monkeypatch):
    from runs.remote import many

    now = [1000.0]
    monkeypatch.setattr(many.time, "time", lambda: now[0])
    clock = many._HostClock()
    for sent, host, back in ((1000.0, 1005.2, 1000.4), (1001.0, 1006.05, 1001.1)):
        now[0] = sent
        assert clock.ask() == b"clock\n" and clock.waiting()
        now[0] = back
        clock.answer(f"{host}")
        assert not clock.waiting()
    # the second trip took 0.1 s: the host reads 5 s ahead of the worker's midpoint
    assert clock.facts() == {"clock_offset_s": "-5.000000", "clock_trip_s": "0.100000"}
    now[0] = 2000.0
    clock.ask()
    clock.answer("%N")  # a host whose date has no sub-second time: no sample, no wait
    assert not clock.waiting() and clock.facts()["clock_trip_s"] == "0.100000"
    clock.ask()
    now[0] += many.CLOCK_WAIT_S  # an answer lost on the way: the session goes on
    assert not clock.waiting()
