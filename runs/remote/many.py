"""Record several processes of one host in one session, all sampling one window.

A whole-job capture runs one session per host (one ssh connection, not one per
rank) and gives every host the same instant to sample from (`start_at`, this
machine's epoch seconds). The host script starts and says it is waiting, with its
clock; the worker measures the host's clock offset from a few `clock` round trips
(the quickest one: its error is at most half that trip) and writes `at T`, the
instant on the host's clock. The host then starts every py-spy at once, so that
py-spy's attach (a second or more on a busy torch rank with `--native`) happens
before T, not after, and stops them all itself at T + duration. What py-spy sampled
before T is cut from the record when it is split (profiles.pyspy.formats.split, by the fact
`window_at`), so each rank's first kept sample is at T, or at its own start if that
came later. `go` instead starts now, for as long as the worker lets it run (a rank
recorded again after the window).

py-spy's stdout streams back line by line, each line prefixed with its PID. `stop
PID` on stdin stops one py-spy (a cancel); end-of-file stops them all with SIGINT, as
for a single record. After the last py-spy exits, each one's exit code, stderr and
raw file come back framed with byte counts, then the GPU CSV.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import shlex
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from runs import gpu

from . import guard, runner
from .build import classify, record_flags, script_head, stderr_tail
from .build import wrap as _wrap
from .model import (
    END_MARKER,
    READY,
    SAMPLING_LINE,
    STARTUP_S,
    RecordResult,
    RecordSettings,
    RemoteError,
    Target,
    check_pid,
)

WAITING = "@@flamedeck-waiting@@"  # stdout: the script runs and waits for `go`
CLOCK = "@@flamedeck-clock@@"  # stdout: the host's `date +%s.%N`, asked by `clock`
CLOCK_TRIPS = 3  # `clock` round trips per session; the quickest gives the offset
CLOCK_WAIT_S = 2.0  # a `clock` unanswered this long counts as lost
LEAST_WINDOW_S = 1.0  # a host that comes up after the window's end still samples this
STOP_SLACK_S = 3.0  # past T + duration the worker stops a host that did not stop itself
SPOOL_OVER_BYTES = 1 << 20  # a host's results past this go to a temporary file
# A scheduled session's host stops itself: the worker wakes less often (lines still
# come at once), since a worker holds one such session per host.
SCHEDULED_POLL_S = 0.25
EXITED = "@@flamedeck-exited@@"  # tagged stdout line: that py-spy closed its stdout
STOPPED = "Stopped sampling"  # py-spy's line when the process exits (or a stop)

_MANY_BODY = """\
trap '' PIPE
dir=$(mktemp -d "${TMPDIR:-/tmp}/flamedeck.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
exec 3<&0 </dev/null
for p in @PIDS@; do fd_before "$p"; done
printf '%s %s\\n' @WAITING@ "$(date +%s.%N 2>/dev/null)"
# `clock` answers the host's time (the worker measures this host's offset from the
# round trips); `go` starts now; `at T` starts now too, samples through the scheduled
# instant T (host epoch seconds) and stops every py-spy at T + duration by itself.
go=
while read -r cmd arg <&3; do
  case $cmd in
    clock) printf '%s %s\\n' @CLOCK@ "$(date +%s.%N 2>/dev/null)" ;;
    go) go=now; break ;;
    at) case $arg in '' | *[!0-9.]*) break ;; esac; go=$arg; break ;;
    *) break ;;
  esac
done
[ -n "$go" ] || exit 0
# Every fifo first: a failure here must not leave a started py-spy behind.
set --
for p in @PIDS@; do set -- "$@" "$dir/$p.fifo"; done
mkfifo "$@" || exit 1
spies= taggers=
for p in @PIDS@; do
  (
    while IFS= read -r l || [ -n "$l" ]; do
      # The host's own clock when py-spy says it samples: the start skew is measured
      # here, not where the worker reads the line after ssh and its own scheduling.
      case $l in "@SAMPLING@"*) fd_fact "$p" "sampling_at=$(date +%s.%N 2>/dev/null)" ;; esac
      printf '%s %s\\n' "$p" "$l"
    done <"$dir/$p.fifo"
    printf '%s %s\\n' "$p" @EXITED@
  ) 3<&- &
  taggers="$taggers $!"
  eval "flag=\\$fd_flag_$p"
  # py_spy=warn: each failed sample is named with its PID on stderr, so a child's
  # (a DataLoader worker's, with --subprocesses) are not taken for the rank's.
  (
    # Where a chrometrace's clock (microseconds since py-spy started) begins on the
    # host's: read in the child that becomes py-spy, so no fork lies between them.
    fd_fact "$p" "spawned_at=$(date +%s.%N 2>/dev/null)"
    RUST_LOG=py_spy=warn; export RUST_LOG
    exec "$PYSPY" record --pid "$p" @FLAGS@ $flag -o "$dir/$p.out" \
      >"$dir/$p.fifo" 2>"$dir/$p.err"
  ) 3<&- &
  echo "$!" >"$dir/$p.spy"
  spies="$spies $!"
done
for p in @PIDS@; do fd_children "$p" children_start; done
gpu=
if [ @GPU@ = 1 ]; then
  fd_gpu "$dir/gpu.csv" @PIDS@
  gpu=$fd_gpu_pid
fi
# Repeated: an INT that lands before py-spy installs its handler is ignored.
stop_spies() {
  n=0
  while [ "$n" -lt @KILL_AFTER@ ]; do
    alive=
    for s in "$@"; do kill -INT "$s" && alive=1; done
    [ -n "$alive" ] || return 0
    sleep 1 3<&-; n=$((n + 1))
  done
  for s in "$@"; do kill -KILL "$s"; done
}
(
  while read -r cmd arg <&3; do
    case $arg in '' | *[!0-9]*) continue ;; esac
    if [ "$cmd" = stop ] && [ -f "$dir/$arg.spy" ]; then stop_spies "$(cat "$dir/$arg.spy")" & fi
  done
  stop_spies $spies
) >/dev/null 2>&1 &
watch=$!
timer=
if [ "$go" != now ]; then
  for p in @PIDS@; do fd_fact "$p" "window_at=$go"; done
  (
    left=$(awk -v t="$go" -v d=@DURATION@ -v n="$(date +%s.%N 2>/dev/null)" \\
      'BEGIN { s = t + d - n; if (s < @LEAST@) s = @LEAST@; printf "%.3f", s }')
    sleep "$left"
    stop_spies $spies
  ) >/dev/null 2>&1 3<&- &
  timer=$!
fi
exec 3<&-
trap 'for s in $spies; do kill -INT "$s" 2>/dev/null; done' HUP TERM
for p in @PIDS@; do
  s=$(cat "$dir/$p.spy") code=
  while [ -z "$code" ]; do
    wait "$s"; rc=$?
    kill -0 "$s" 2>/dev/null || code=$rc
  done
  echo "$code" >"$dir/$p.rc"
  fd_fact "$p" "ended_at=$(date +%s.%N 2>/dev/null)"
done
for p in @PIDS@; do fd_children "$p" children_end; done
kill "$watch" $timer 2>/dev/null
[ -n "$gpu" ] && kill "$gpu" 2>/dev/null && wait "$gpu" 2>/dev/null
for t in $taggers; do wait "$t"; done
for p in @PIDS@; do fd_after "$p"; done
size() { if [ -f "$1" ]; then wc -c <"$1" | tr -d ' '; else echo 0; fi; }
for p in @PIDS@; do
  has=0; [ -f "$dir/$p.out" ] && has=1
  printf '\\n%s %s %s %s %s %s\\n' @MARKER@ "$p" "$(cat "$dir/$p.rc")" "$has" \\
    "$(size "$dir/$p.err")" "$(size "$dir/$p.out")"
  cat "$dir/$p.err"
  [ "$has" = 1 ] && cat "$dir/$p.out"
done
printf '\\n%s gpu %s\\n' @MARKER@ "$(size "$dir/gpu.csv")"
[ -s "$dir/gpu.csv" ] && cat "$dir/gpu.csv"
exit 0
"""


def record_many_script(
    target: Target,
    pids: list[int],
    settings: RecordSettings,
    *,
    kill_after_s: float = 30,
    early_s: float = 0.0,
) -> str:
    """POSIX sh that records every PID of `pids` on one host, started by one `go`.

    Protocol: the script prints WAITING on stdout, reads `go` from stdin, starts
    one py-spy per PID and streams `PID LINE` for each line py-spy prints (`PID
    EXITED` when it ends). `stop PID` on stdin stops one py-spy with SIGINT;
    end-of-file stops all (SIGKILL follows `kill_after_s` later). Then, per PID:
    `END_MARKER PID CODE HAS_RAW ERR_BYTES RAW_BYTES` + stderr + raw, and last
    `END_MARKER gpu BYTES` + the GPU report (runs.gpu). Each PID's children when py-spy
    starts and after it stopped come as facts (guard.children): with `--subprocesses`
    (a whole-job capture's default) they say how many DataLoader workers ran at once.
    `early_s`: how long before a scheduled instant py-spy may start; its own
    `--duration` (a count of samples, not a bound) then covers that too.
    """
    checked = [check_pid(pid) for pid in pids]
    if not checked or len(set(checked)) != len(checked):
        raise ValueError(f"record_many needs distinct PIDs, not {pids!r}")
    body = _MANY_BODY.replace("@PIDS@", " ".join(str(pid) for pid in checked))
    longer = settings.duration_s + math.ceil(early_s) + STOP_SLACK_S if early_s > 0 else None
    flags = replace(settings, native=False, duration_s=longer or settings.duration_s)
    body = body.replace("@FLAGS@", shlex.join(record_flags(flags)))
    body = body.replace("@KILL_AFTER@", str(max(1, math.ceil(kill_after_s))))
    body = body.replace("@GPU@", "1" if settings.gpu else "0")
    body = body.replace("@WAITING@", WAITING).replace("@EXITED@", EXITED)
    body = body.replace("@CLOCK@", CLOCK).replace("@DURATION@", f"{settings.duration_s:g}")
    body = body.replace("@LEAST@", f"{LEAST_WINDOW_S:g}")
    body = body.replace("@SAMPLING@", SAMPLING_LINE)
    head = script_head(target) + guard.shell(settings.native) + gpu.shell()
    return head + body.replace("@MARKER@", END_MARKER)


class Session(Protocol):
    """The caller's side of a multi-PID record; every method runs in the calling thread."""

    def on_ready(self) -> None:
        """The script runs on the host and waits for `go`."""

    def may_start(self) -> bool:
        """Polled after on_ready until True: start every py-spy now."""

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None:
        """One line of py-spy's stdout for `pid` (lag warnings included)."""

    def pids_to_stop(self) -> Iterable[int]:
        """Polled while py-spy runs (heartbeats go here): PIDs to stop now (cancels)."""


@dataclass
class ManyResult:
    """Per PID: a RecordResult, or the RemoteError that ended that PID's capture.

    `spans[pid]` is when that py-spy sampled, in seconds of the session: `start` at
    its "Sampling process" line, `stop` at its "Stopped sampling" line (the process
    exited), else when it ended. A PID that never announced sampling has no `start`.
    `RecordResult.elapsed_s` is the whole session's time, the same for every PID.
    """

    results: dict[int, RecordResult | RemoteError]
    logs: dict[int, str] = field(default_factory=dict)
    gpu_csv: str | None = None
    spans: dict[int, dict[str, float]] = field(default_factory=dict)


class _HostClock:
    """This host's clock offset (this machine's clock less the host's), from `clock`
    round trips: NTP's estimate, the midpoint of the trip with the smallest delay."""

    def __init__(self) -> None:
        self.asked_at: float | None = None
        self.trips = 0
        self.best: tuple[float, float] | None = None  # (round trip s, offset s)

    def ask(self) -> bytes:
        self.asked_at, self.trips = time.time(), self.trips + 1
        return b"clock\n"

    def answer(self, host_epoch: str) -> None:
        asked, self.asked_at = self.asked_at, None
        try:
            host = float(host_epoch)
        except ValueError:
            return
        if asked is None or not math.isfinite(host) or host <= 0:
            return
        now = time.time()
        trip = now - asked
        if self.best is None or trip < self.best[0]:
            self.best = (trip, (asked + now) / 2 - host)

    def waiting(self) -> bool:
        """A `clock` is out and was asked under CLOCK_WAIT_S ago (a lost answer does not
        hold the session: the next trip, or the first offset, goes on)."""
        return self.asked_at is not None and time.time() - self.asked_at < CLOCK_WAIT_S

    def facts(self) -> dict[str, str]:
        if self.best is None:
            return {}
        trip, offset = self.best
        return {"clock_offset_s": f"{offset:.6f}", "clock_trip_s": f"{trip:.6f}"}


class _ManyWatch:
    """Clock, go gate, per-PID stops and line routing for one host session."""

    def __init__(
        self, pids: list[int], duration_s: float, session: Session, start_at: float | None
    ) -> None:
        self.pids, self.duration_s, self.session = pids, duration_s, session
        self.start_at = start_at
        self.ready = self.started = False
        self.sampling: dict[int, float] = {}
        self.exited: set[int] = set()
        self.stopped: set[int] = set()
        self.logs: dict[int, list[str]] = {pid: [] for pid in pids}
        self.spans: dict[int, dict[str, float]] = {pid: {} for pid in pids}
        self.facts: dict[int, dict[str, str]] = {pid: {} for pid in pids}
        self.clock: dict[str, str] = {}
        self.host_clock = _HostClock()
        self.window_elapsed: float | None = None  # T in seconds of the session
        self.zero = time.monotonic()
        self.in_log = True

    def on_line(self, line: str, elapsed_s: float) -> None:
        if END_MARKER in line:
            self.in_log = False
        if not self.in_log:
            return
        word, _, rest = line.partition(" ")
        if word == WAITING:
            # WAITING carries the host's clock: this host's offset, for one timeline.
            self.zero = time.monotonic() - elapsed_s
            self.clock = guard.clock_offset(rest)
            self.ready = True
            self.session.on_ready()
            return
        if word == CLOCK:
            self.host_clock.answer(rest)
            return
        fact = guard.read_fact(line)
        if fact is not None:
            if fact[0] in self.facts:
                self.facts[fact[0]][fact[1]] = fact[2]
            return
        pid = int(word) if word.isdigit() else None
        if pid not in self.logs:
            return
        self._pid_line(pid, rest, elapsed_s)

    def _pid_line(self, pid: int, text: str, elapsed_s: float) -> None:
        if text == EXITED:
            self.exited.add(pid)
            self.spans[pid].setdefault("stop", elapsed_s)
            return
        if pid not in self.sampling and text.startswith(SAMPLING_LINE):
            self.sampling[pid] = time.monotonic()
            self.spans[pid].setdefault("start", elapsed_s)
        elif STOPPED in text and "start" in self.spans[pid]:
            self.spans[pid].setdefault("stop", elapsed_s)
        self.logs[pid].append(text)
        self.session.on_line(pid, text, elapsed_s)

    def feed(self) -> bytes:
        if not self.ready:
            return b""
        if not self.started:
            return self._start()
        stops = [p for p in self.session.pids_to_stop() if p in self.logs and p not in self.stopped]
        self.stopped.update(stops)
        return b"".join(f"stop {pid}\n".encode() for pid in stops)

    def _start(self) -> bytes:
        if self.start_at is None:
            self.started = self.session.may_start()
            return b"go\n" if self.started else b""
        if self.host_clock.waiting():
            return b""
        if self.host_clock.trips < CLOCK_TRIPS and time.time() < self.start_at:
            return self.host_clock.ask()
        self.clock = self.host_clock.facts() or self.clock
        offset = float(self.clock.get("clock_offset_s", 0.0))
        self.started = True
        self.window_elapsed = self.start_at - time.time() + time.monotonic() - self.zero
        return f"at {self.start_at - offset:.6f}\n".encode()

    def should_stop(self) -> bool:
        """Every py-spy has started (or ended) and the last to start sampled long enough;
        with a scheduled instant, only when the host did not stop them by itself."""
        if self.start_at is not None:
            return self.started and time.time() >= self.start_at + self.duration_s + STOP_SLACK_S
        if not self.sampling or not set(self.pids) <= set(self.sampling) | self.exited:
            return False
        return time.monotonic() - max(self.sampling.values()) >= self.duration_s

    def close_spans(self, elapsed_s: float) -> None:
        """Each span ends when the session did, if nothing ended it before, and starts no
        earlier than the scheduled instant (the samples before it are cut)."""
        for span in self.spans.values():
            if "start" not in span:
                continue
            span.setdefault("stop", elapsed_s)
            if self.window_elapsed is not None:
                span["start"] = min(span["stop"], max(span["start"], self.window_elapsed))


def _frames(stdout: bytes) -> tuple[dict[int, tuple[int, bool, str, bytes]], str | None] | None:
    """Per PID (exit code, has raw, stderr, raw) and the GPU CSV; None if cut short."""
    marker = b"\n" + END_MARKER.encode() + b" "
    at, found, gpu_csv = stdout.find(marker), {}, None
    while at >= 0:
        head_end = stdout.find(b"\n", at + 1)
        words = stdout[at + len(marker) : head_end].decode(errors="replace").split()
        body = head_end + 1
        if head_end < 0 or not all(w.isdigit() for w in words[1:]) or not words:
            return None
        if words[0] == "gpu" and len(words) == 2:
            size = int(words[1])
            gpu_csv = stdout[body : body + size].decode(errors="replace") if size else None
            return found, gpu_csv
        if len(words) != 5 or not words[0].isdigit():
            return None
        pid, code, has, err_n, raw_n = (int(w) for w in words)
        err = stdout[body : body + err_n].decode(errors="replace")
        raw = stdout[body + err_n : body + err_n + raw_n]
        found[pid] = (code, bool(has), err, raw)
        at = stdout.find(marker, body + err_n + raw_n)
    return None


def _pid_result(
    pid: int,
    frame: tuple[int, bool, str, bytes],
    log: str,
    stopped_by: str,
    elapsed_s: float,
    facts: dict[str, str],
) -> RecordResult | RemoteError:
    code, has_raw, err, raw = frame
    if not has_raw:
        # READY says the script ran: a silent failure is py-spy's, not the prefix's.
        error = classify(code or 1, f"{READY}\n{err}", log)
        if error is not None and not (stopped_by == "cancel" and error.cause == "unknown"):
            return guard.with_versions(error, facts)
    exited = "Stopped sampling because process exited" in log or facts.get("target") == "gone"
    return RecordResult(
        raw if has_raw else None, log, err, code, stopped_by, elapsed_s, exited, facts=facts
    )


def record_many(
    target: Target,
    pids: list[int],
    settings: RecordSettings,
    session: Session,
    *,
    margin_s: float = 30.0,
    start_within_s: float = 30.0,
    start_at: float | None = None,
    gate: AbstractContextManager | None = None,
    finish: Callable[[ManyResult], Any] | None = None,
) -> Any:
    """Record every PID of `pids` on one host, over one connection, in one window.

    With `start_at` (this machine's epoch seconds) py-spy starts for all PIDs as soon
    as the host's clock offset is measured, and every rank's window is `start_at` to
    `start_at + settings.duration_s` (module doc). Without it, py-spy starts when
    `session.may_start()` says so, and the capture ends when the last py-spy to
    announce sampling has sampled `settings.duration_s` seconds. Either ends early per
    PID on a cancel. A host that cannot be reached, or a session that dies, raises
    RemoteError (for every PID; `ManyResult` is not returned); a PID whose py-spy
    failed gets its own RemoteError in `results`.

    What the host sends back is spooled to a file past SPOOL_OVER_BYTES, not held in
    memory, and read into each PID's result only inside `gate` (a semaphore shared by
    the host sessions of a worker: every host of a whole-job capture ends at the same
    instant); `finish`, when given, takes the ManyResult inside the gate too, and what
    it returns is returned.
    """
    if start_at is not None:
        start_within_s = max(0.0, start_at - time.time())
    early_s = start_within_s if start_at is not None else 0.0
    script = record_many_script(target, pids, settings, kill_after_s=margin_s, early_s=early_s)
    watch = _ManyWatch(list(pids), settings.duration_s, session, start_at)
    bound = target.connect_timeout_s + start_within_s + STARTUP_S + settings.duration_s
    argv = _wrap(target, ["sh", "-c", script])
    try:
        done = runner.run(
            argv, stdin_open=True, timeout_s=bound, grace_s=margin_s,
            poll_s=0.05 if start_at is None else SCHEDULED_POLL_S,
            on_line=watch.on_line, should_stop=watch.should_stop, feed=watch.feed,
            spool_over_bytes=SPOOL_OVER_BYTES,
        )  # fmt: skip
    except OSError as exc:
        raise RemoteError("unknown", f"cannot start the record session ({exc})") from exc
    with gate or contextlib.nullcontext():
        try:
            outcome = _outcome(pids, watch, done)
        finally:
            if isinstance(done.stdout, mmap.mmap):
                done.stdout.close()
        return finish(outcome) if finish is not None else outcome


def _outcome(pids: list[int], watch: _ManyWatch, done: runner.Completed) -> ManyResult:
    logs = {pid: "\n".join(lines) for pid, lines in watch.logs.items()}
    if done.stopped == "killed":
        raise RemoteError("bound_exceeded", detail=stderr_tail(done.stderr))
    framed = _frames(done.stdout)
    if framed is None or set(framed[0]) != set(pids):
        error = classify(done.returncode or 1, done.stderr, "\n".join(logs.values()))
        raise error or RemoteError("unknown", "the record session ended without its results")
    frames, gpu_csv = framed
    default = "bound" if done.trigger == "timeout" else "duration"
    results = {
        pid: _pid_result(
            pid,
            frames[pid],
            logs[pid],
            "cancel" if pid in watch.stopped else default,
            done.elapsed_s,
            {**watch.facts[pid], **watch.clock},
        )  # fmt: skip
        for pid in pids
    }
    watch.close_spans(done.elapsed_s)
    return ManyResult(results, logs, gpu_csv, watch.spans)
