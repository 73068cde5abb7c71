"""py-spy's failure modes, routed around: the shell the record scripts run before and
after py-spy, and the reading of what it reports (no I/O here).

Before py-spy starts, for each target PID:
- when `--native` is asked: py-spy's version (`py-spy --version`) and whether it was
  built with native unwinding (`record --help` lists `--native` only then; without it
  py-spy refuses `--native`);
- the target's Python version, from the name of /proc/PID/exe (`python3.11`), else
  from the libpython its memory maps hold;
- `--native` is dropped, with the reason, when this py-spy was built without it or is
  older than NATIVE_MIN_PYSPY for that Python (it could not merge native frames).
After py-spy ends:
- a target left stopped (state T in /proc/PID/stat, when it was not stopped before) is
  sent SIGCONT: a py-spy killed while it held the process paused leaves it so;
- a target that is gone (or a zombie) is reported even when py-spy did not notice.
In a whole-job record, each target's child PIDs when py-spy starts and after it has
stopped (`children_start`, `children_end`; `children` reads them).
Facts travel as `FACT PID key=value` lines on stdout and never reach py-spy's log.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from .model import RemoteError

FACT = "@@flamedeck-fact@@"
# The first py-spy that merges native frames of each Python: 3.11 (py-spy PR #635,
# released in 0.4.0) and 3.12/3.13 (PR #751, in 0.4.1). Older ones fail every sample
# with "Failed to merge native and python frames".
NATIVE_MIN_PYSPY = {"3.11": "0.4.0", "3.12": "0.4.1", "3.13": "0.4.1"}
# py-spy lost at least this share of its sampling rounds to errors: native unwinding
# failed (py-spy's reason is nearly always "Failed to merge native and python frames").
NATIVE_FAILED_SHARE = 0.25
_WROTE = re.compile(r"Samples: (\d+) Errors: (\d+)")

# Builtins where it can: on a loaded host every fork before `go` delays the ready line.
_SHELL = r"""
fd_fact() { printf '%s %s %s\n' @FACT@ "$1" "$2"; }
# The process's state letter in fd_s (no subshell: a fork a PID on a loaded host).
fd_state() {
  fd_s=
  { IFS= read -r fd_s <"/proc/$1/stat"; } 2>/dev/null || return 0
  fd_s=${fd_s##*) }
  fd_s=${fd_s%% *}
}
fd_pyver() {
  fd_v=$(readlink "/proc/$1/exe" 2>/dev/null)
  fd_v=${fd_v##*/}
  case $fd_v in python[0-9]*.[0-9]*) fd_v=${fd_v#python} ;; *) fd_v= ;; esac
  fd_v=${fd_v%%[!0-9.]*}
  [ -n "$fd_v" ] || fd_v=$(grep -o 'libpython[0-9][0-9]*\.[0-9][0-9]*' "/proc/$1/maps" 2>/dev/null |
    head -n 1 | sed 's/libpython//')
}
fd_older() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, "."); split(b, y, ".")
    for (i = 1; i <= 3; i++) { if (x[i] + 0 < y[i] + 0) exit 0; if (x[i] + 0 > y[i] + 0) exit 1 }
    exit 1 }'
}
# Asked of py-spy only for --native, and bounded: a py-spy that hangs here would hold
# the capture before it starts.
fd_pyspy= fd_built=
if [ @NATIVE@ = 1 ]; then
  fd_t=; command -v timeout >/dev/null 2>&1 && fd_t="timeout 5"
  fd_pyspy=$($fd_t "$PYSPY" --version 2>/dev/null)
  fd_pyspy=${fd_pyspy##* }
  fd_built=0
  case $($fd_t "$PYSPY" record --help 2>/dev/null) in *--native*) fd_built=1 ;; esac
fi
fd_before() {
  p=$1 flag=
  fd_pyver "$p"
  fd_state "$p"
  eval "fd_was_$p=\$fd_s"
  fd_fact "$p" "python=$fd_v"
  if [ @NATIVE@ = 1 ]; then
    fd_fact "$p" "py_spy=$fd_pyspy"
    fd_fact "$p" "native_built=$fd_built"
    need=
    case $fd_v in @NEED@ esac
    if [ "$fd_built" != 1 ]; then
      fd_fact "$p" "native_dropped=unbuilt"
    elif [ -n "$need" ] && [ -n "$fd_pyspy" ] && fd_older "$fd_pyspy" "$need"; then
      fd_fact "$p" "native_dropped=old:$need"
    else
      flag=--native
    fi
  fi
  eval "fd_flag_$p=\$flag"
}
# The PIDs of a process's children now (its threads' /proc children lists), as the fact
# KEY: how many DataLoader workers a rank runs at once (a --subprocesses record has no
# time in it, and samples of a worker py-spy attached late undercount it).
fd_children() {
  fd_c=
  for fd_k in /proc/"$1"/task/*/children; do
    fd_l=
    { IFS= read -r fd_l <"$fd_k"; } 2>/dev/null
    fd_c="$fd_c $fd_l"
  done
  fd_fact "$1" "$2=$fd_c"
}
fd_after() {
  p=$1
  fd_state "$1"
  state=$fd_s
  eval "was=\$fd_was_$p"
  if [ -z "$state" ] || [ "$state" = Z ]; then
    fd_fact "$p" "target=gone"
  elif [ "$state" = T ] && [ "$was" != T ]; then
    kill -CONT "$p" 2>/dev/null && fd_fact "$p" "target=continued"
  fi
}
"""


def shell(native: bool) -> str:
    """The functions and py-spy facts the record scripts use: `fd_before PID` (facts,
    then `fd_flag_PID` holds `--native` or nothing) and `fd_after PID`."""
    if not isinstance(native, bool):
        raise ValueError(f"native must be a bool, not {native!r}")
    need = " ".join(f"{v}) need={m} ;;" for v, m in NATIVE_MIN_PYSPY.items())
    return (
        _SHELL.replace("@FACT@", FACT)
        .replace("@NATIVE@", "1" if native else "0")
        .replace("@NEED@", need)
    )


def read_fact(line: str) -> tuple[int, str, str] | None:
    """`FACT PID key=value` -> (pid, key, value); None for any other line."""
    if not line.startswith(FACT + " "):
        return None
    pid, _, pair = line[len(FACT) + 1 :].partition(" ")
    key, sep, value = pair.partition("=")
    return (int(pid), key, value) if pid.isdigit() and sep else None


def children(facts: dict[str, str]) -> list[list[int]]:
    """The child PIDs the host saw at the start and at the end of the record (the
    facts `children_start`, `children_end`), each moment that was reported."""
    return [
        [int(word) for word in facts[key].split() if word.isdigit()]
        for key in ("children_start", "children_end")
        if key in facts
    ]


def clock_offset(host_epoch: str) -> dict[str, str]:
    """The fact `clock_offset_s` (this machine's clock minus the host's, in seconds) from
    the host's `date +%s.%N`, read as it arrives: the line's trip (milliseconds on a
    network, far under a timeline's bucket) counts in it. Nothing for a host without
    `date +%N`."""
    try:
        host = float(host_epoch)
    except ValueError:
        return {}
    if not math.isfinite(host) or host <= 0:
        return {}
    return {"clock_offset_s": f"{time.time() - host:.6f}"}


def host_time(key: str, clock: dict[str, str]) -> dict[str, str]:
    """`key` = now on the host's clock (this machine's now less the offset), if known."""
    if "clock_offset_s" not in clock:
        return {}
    return {key: f"{time.time() - float(clock['clock_offset_s']):.6f}"}


def split_facts(text: str) -> tuple[str, dict[str, str]]:
    """A single record's log without its fact lines, and the facts."""
    kept, facts = [], {}
    for line in text.split("\n"):
        fact = read_fact(line)
        if fact is None:
            kept.append(line)
        else:
            facts[fact[1]] = fact[2]
    return "\n".join(kept), facts


def native_dropped(facts: dict[str, str]) -> str | None:
    """Why `--native` was not passed to py-spy, in words, or None."""
    reason = facts.get("native_dropped")
    if not reason:
        return None
    py_spy = facts.get("py_spy") or "?"
    if reason == "unbuilt":
        return f"this py-spy ({py_spy}) was built without native unwinding"
    need = reason.partition(":")[2]
    return (
        f"py-spy {py_spy} cannot merge native frames of Python {facts.get('python') or '?'} "
        f"(py-spy {need} or later can)"
    )


def native_failure(log: str, *, rate: int, sampled_s: float | None) -> dict[str, Any] | None:
    """How a native record failed, or None: py-spy's closing line counts more errors
    than NATIVE_FAILED_SHARE of the rounds it should have taken (or no sample at all)."""
    match = _WROTE.search(log)
    if match is None:
        return None
    samples, errors = int(match.group(1)), int(match.group(2))
    rounds = max(1, round((sampled_s or 0) * rate))
    if errors == 0 or (samples and errors < NATIVE_FAILED_SHARE * rounds):
        return None
    return {"samples": samples, "errors": errors, "rounds": rounds}


def with_versions(error: RemoteError, facts: dict[str, str]) -> RemoteError:
    """`error`, naming the target's Python and py-spy's version when py-spy could not
    read that Python (the fix is a newer py-spy)."""
    if error.cause != "python_unsupported" or not facts.get("python"):
        return error
    said = f"the target runs Python {facts['python']}"
    said += f", py-spy is {facts['py_spy']}" if facts.get("py_spy") else ""
    return RemoteError(error.cause, f"{error.message} ({said})", detail=error.detail,
                       transient=error.transient)  # fmt: skip


_EPOCH = re.compile(r"\d{9,12}\.\d+\Z")


def sampling_at(facts: dict[str, str]) -> float | None:
    """The host's epoch time when py-spy said it samples (`date +%s.%N` in the
    script), or None where the host's `date` gives no sub-second time."""
    value = facts.get("sampling_at", "")
    return float(value) if _EPOCH.match(value) else None
