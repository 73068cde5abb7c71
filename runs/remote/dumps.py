"""`dump_many`: `py-spy dump --json` of several PIDs of one host, `repeat` times, in one
session (a whole-job dump, "Dump all ranks": the first button to press when a job hangs).

Each round dumps every PID at once (one py-spy per PID, in the background) and waits
for them all; rounds are `interval_s` apart. With `native`, a PID whose dump fails
with `--native` while it still runs is dumped again without it (py-spy cannot unwind
native frames of every Python build), and that round says so. Everything is printed
once the last round has ended, each dump behind a marker line that carries a nonce
made per session: frame names are the target's text and could hold a fixed marker.
"""

from __future__ import annotations

import math
import re
import secrets
import shlex
import time
from dataclasses import dataclass, field

from .build import classify, clean_stderr, script_head, wrap
from .model import QUICK_TIMEOUT_S, READY, RemoteError, Target, check_pid
from .ops import execute

MAX_REPEAT = 10
MAX_INTERVAL_S = 30.0

_BODY = r"""trap '' PIPE
dir=$(mktemp -d "${TMPDIR:-/tmp}/flamedeck.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
one() {  # PID ROUND: one dump, --native first when asked and again without it
  native=@NATIVE@
  date +%s.%N >"$dir/$1.$2.at"
  if [ "$native" = 1 ]; then
    "$PYSPY" dump --json --native --pid "$1" >"$dir/$1.$2.out" 2>"$dir/$1.$2.err"; rc=$?
    if [ "$rc" -ne 0 ] && kill -0 "$1" 2>/dev/null; then
      mv "$dir/$1.$2.err" "$dir/$1.$2.native"
      native=0
    fi
  fi
  if [ "$native" = 0 ]; then
    "$PYSPY" dump --json --pid "$1" >"$dir/$1.$2.out" 2>"$dir/$1.$2.err"; rc=$?
  fi
  printf '%s %s\n' "$rc" "$native" >"$dir/$1.$2.rc"
}
# When this session could dump (host clock): the next group's instant is learned from it.
printf '\n%s ready %s\n' @MARKER@ "$(date +%s.%N)"
# The group's instant on this host's clock: every host's first round at once.
if [ @AT@ != 0 ]; then
  left=$(awk -v t=@AT@ -v n="$(date +%s.%N 2>/dev/null)" \
    'BEGIN { s = t - n; if (s < 0) s = 0; printf "%.3f", s }')
  sleep "$left"
fi
round=0
while [ "$round" -lt @REPEAT@ ]; do
  for pid in @PIDS@; do one "$pid" "$round" & done
  wait
  round=$((round + 1))
  [ "$round" -lt @REPEAT@ ] && sleep @INTERVAL@
done
round=0
while [ "$round" -lt @REPEAT@ ]; do
  for pid in @PIDS@; do
    read -r rc native <"$dir/$pid.$round.rc"
    at=$(cat "$dir/$pid.$round.at")
    printf '\n%s %s %s %s %s %s\n' @MARKER@ "$pid" "$round" "$rc" "$native" "$at"
    cat "$dir/$pid.$round.out"
    printf '\n%s-err\n' @MARKER@
    cat "$dir/$pid.$round.err"
    [ -f "$dir/$pid.$round.native" ] && sed 's/^/(with --native) /' "$dir/$pid.$round.native"
  done
  round=$((round + 1))
done
exit 0
"""


@dataclass(frozen=True)
class Dump:
    """One `py-spy dump --json` of one PID: what it printed, when (host epoch s)."""

    output: str
    at: float | None
    native: bool


@dataclass
class PidDumps:
    """One PID's dumps in order; the error of the first round that failed, if any (a
    process that exited between dumps keeps the dumps taken before)."""

    dumps: list[Dump] = field(default_factory=list)
    error: RemoteError | None = None
    stderr: str = ""
    ready_at: float | None = None
    """When the host's session could dump (host epoch s), before it waited for the
    group's instant: how far ahead the next instant must lie (profiles.jobs.schedule)."""


def dump_many_script(
    target: Target,
    pids: list[int],
    *,
    repeat: int,
    interval_s: float,
    native: bool,
    marker: str,
    start_at: float | None = None,
) -> str:
    """POSIX sh that dumps every PID `repeat` times, `interval_s` apart (module doc),
    the first round at `start_at` (epoch seconds on the host's clock) when given."""
    if start_at is not None and not (math.isfinite(start_at) and start_at > 0):
        raise ValueError(f"start_at must be an epoch time, not {start_at!r}")
    if not 1 <= repeat <= MAX_REPEAT:
        raise ValueError(f"repeat must be 1 to {MAX_REPEAT}, not {repeat!r}")
    if not 0 <= interval_s <= MAX_INTERVAL_S:
        raise ValueError(f"interval_s must be 0 to {MAX_INTERVAL_S:g}, not {interval_s!r}")
    if not pids:
        raise ValueError("no PIDs to dump")
    body = (
        _BODY.replace("@PIDS@", " ".join(str(check_pid(p)) for p in pids))
        .replace("@REPEAT@", str(int(repeat)))
        .replace("@INTERVAL@", f"{float(interval_s):g}")
        .replace("@NATIVE@", "1" if native else "0")
        .replace("@AT@", f"{start_at:.6f}" if start_at else "0")
        .replace("@MARKER@", shlex.quote(marker))
    )
    return script_head(target) + body


def dump_many(
    target: Target,
    pids: list[int],
    *,
    repeat: int,
    interval_s: float,
    native: bool = True,
    start_at: float | None = None,
) -> dict[int, PidDumps]:
    """Dump every PID `repeat` times in one session; per PID its dumps and first error.
    With `start_at` (epoch seconds), the first round waits for that instant on the
    host's clock (as NTP keeps it: a dump's moments need not be finer than that).

    Raises RemoteError when the session itself failed (host unreachable, key refused,
    py-spy missing): then no PID has a dump.
    """
    marker = f"@@flamedeck-dump-{secrets.token_hex(6)}@@"
    script = dump_many_script(
        target, pids, repeat=repeat, interval_s=interval_s, native=native, marker=marker,
        start_at=start_at,
    )  # fmt: skip
    # Each round waits for its slowest dump: QUICK_TIMEOUT_S bounds a round.
    wait = max(0.0, start_at - time.time()) if start_at else 0.0
    timeout = target.connect_timeout_s + wait + repeat * (interval_s + QUICK_TIMEOUT_S)
    done = execute(target, wrap(target, ["sh", "-c", script]), stdin_open=False,
                    timeout_s=timeout, grace_s=2)  # fmt: skip
    if done.stopped == "killed":
        raise RemoteError("unreachable" if READY not in done.stderr else "unknown",
                          f"no answer within {timeout:.0f} s", transient=False)  # fmt: skip
    error = classify(done.returncode, done.stderr, "")
    if error is not None:
        raise error
    return parse_dump_many(done.text, marker, pids)


def parse_dump_many(text: str, marker: str, pids: list[int]) -> dict[int, PidDumps]:
    """The script's output, per PID (see `dump_many_script`)."""
    ready = re.search(rf"(?:\A|\n){re.escape(marker)} ready (\S+)\n", text)
    ready_at = _float(ready.group(1)) if ready else None
    found = {pid: PidDumps(ready_at=ready_at) for pid in pids}
    for block in text.split(f"\n{marker} ")[1:]:
        head, _, rest = block.partition("\n")
        output, _, stderr = rest.partition(f"\n{marker}-err\n")
        words = head.split()
        if len(words) < 4 or not words[0].isdigit() or int(words[0]) not in found:
            continue
        pid_dumps, rc, native = found[int(words[0])], words[2], words[3] == "1"
        at = _float(words[4]) if len(words) > 4 else None
        stderr = clean_stderr(stderr).strip()
        if rc == "0" and output.strip():
            if pid_dumps.error is None:  # a dump after a failed round would skip a gap
                pid_dumps.dumps.append(Dump(output, at, native))
            continue
        if pid_dumps.error is None:
            pid_dumps.stderr = stderr
            pid_dumps.error = classify(int(rc) if rc.lstrip("-").isdigit() else 1,
                                       f"{READY}\n{stderr}", "") or RemoteError(
                "unknown", f"py-spy dump printed nothing (exit {rc})")  # fmt: skip
    return found


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
