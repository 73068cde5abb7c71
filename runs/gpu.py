"""Each rank's GPU, sampled by nvidia-smi beside py-spy, on the host's clock.

The record scripts run `shell()` on the host when it has nvidia-smi (one sampler per
host, whatever the number of ranks). What it writes, read by `parse_report`:

    # flamedeck-gpu clock 1764441367.123456789 2026/11/29 19:36:07.123456789
    # flamedeck-gpu query timestamp,index,uuid,utilization.gpu,...
    # flamedeck-gpu pid 4242 kids= 4250 4251 env=0,1
    # flamedeck-gpu apps
    4242, GPU-5c1b..., 40312                       (--query-compute-apps, at the start)
    # flamedeck-gpu samples
    2026/11/29 19:36:07.350, 0, GPU-5c1b..., 87, 41, 40321, 81559, 412.30
    ...                                            (--query-gpu ... --loop-ms=250)

or `# flamedeck-gpu missing` when the host has no nvidia-smi. The clock line is one
`date` call: the host's epoch and its local time at the same instant, so nvidia-smi's
local, zone-less timestamps are moved onto the epoch the stacks use (captures'
`sampling_at`). `env=` is the process's CUDA_VISIBLE_DEVICES (`-` when unset, `?` when
/proc/PID/environ cannot be read or the value holds more than GPU ids): no other
variable of the environment leaves the host.

A rank's GPUs (`rank_devices`): those nvidia-smi lists as holding a compute context of
the rank's PID or one of its children; else its CUDA_VISIBLE_DEVICES (indices, or UUID
prefixes); else none, and the reason. Fields a GPU cannot report read "[N/A]",
"[Not Supported]", "[Insufficient Permissions]" (older drivers "N/A"): they become
None, never 0. Standard library only.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

LEGACY_QUERY = "timestamp,index,utilization.gpu,memory.used,memory.total"
QUERY = (
    "timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw"
)
APPS_QUERY = "pid,gpu_uuid,used_memory"
INTERVAL_MS = 250
"""nvidia-smi's loop: the driver's utilisation counter covers 1/6 s to 1 s depending on
the product, so a faster loop mostly repeats a value, and 250 ms keeps a 64-GPU host's
CSV near 100 kB a minute."""
MAX_APPS = 4096  # lines of --query-compute-apps kept: a host runs a few per GPU
MARK = "# flamedeck-gpu"
_MISSING = {
    "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "",
    "[insufficient permissions]", "[gpu is lost]", "[not found]", "[requires root]",
}  # fmt: skip
_COLUMNS = {
    "utilization.gpu": "util",
    "utilization.memory": "mem_util",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "power.draw": "power_w",
}
_ENV_VALUE = re.compile(r"^[A-Za-z0-9,:_-]{0,512}$")


class GpuPoint(TypedDict):
    t: float
    util: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    mem_util: NotRequired[float | None]
    """Memory-controller utilisation, percent of the period the memory was read or written."""
    power_w: NotRequired[float | None]
    """Power draw, watts (None where the board does not report it)."""


class GpuSeries(TypedDict):
    index: int
    points: list[GpuPoint]
    uuid: NotRequired[str | None]
    """The GPU's UUID (`GPU-…`), as nvidia-smi and CUDA_VISIBLE_DEVICES name it."""


class GpuMapping(TypedDict):
    """How the series were attributed to the rank (runs/gpu.py `rank_devices`)."""

    source: Literal["compute-apps", "CUDA_VISIBLE_DEVICES", "host"]
    """`compute-apps`: nvidia-smi lists a compute context of the rank's PID or a child;
    `CUDA_VISIBLE_DEVICES`: its environment names them; `host`: not attributed, every GPU
    of the host is shown and no finding reads them."""
    pids: list[int]
    """The rank's PID and its children's, as the host saw them."""
    gpus: list[int]
    """The indices of the rank's GPUs (empty when not attributed)."""
    note: str | None
    """Why a rank is not attributed, or a caveat of the attribution."""


class GpuTimeline(TypedDict):
    interval_ms: int
    gpus: list[GpuSeries]
    skipped_lines: int
    available: NotRequired[bool]
    """Whether nvidia-smi gave any reading."""
    reason: NotRequired[str | None]
    """Why there is no reading: no nvidia-smi on the host, or what it said."""
    start: NotRequired[float | None]
    """Host epoch seconds of t = 0, the stacks' clock (None: taken before flamedeck kept it)."""
    messages: NotRequired[list[str]]
    """nvidia-smi's own words where a line was no reading (a failed driver)."""
    mapping: NotRequired[GpuMapping]
    """Whose GPUs these are."""


def nvidia_smi_argv(interval_ms: int = INTERVAL_MS) -> list[str]:
    """The sampler: every GPU of the host, one line each per tick."""
    return [
        "nvidia-smi",
        f"--query-gpu={QUERY}",
        "--format=csv,noheader,nounits",
        f"--loop-ms={interval_ms}",
    ]


def apps_argv() -> list[str]:
    """Which processes hold a compute context on which GPU, and its memory."""
    return ["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"]


_SHELL = r"""
# fd_gpu FILE PID...: the rank-to-GPU facts and nvidia-smi's samples into FILE, in the
# background ($fd_gpu_pid); `# flamedeck-gpu missing` without nvidia-smi.
fd_gpu() {
  fd_out=$1; shift
  fd_gpu_pid=
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    printf '%s missing\n' @MARK_Q@ >"$fd_out"; return 0
  fi
  (
    printf '%s clock %s\n' @MARK_Q@ "$(date '+%s.%N %Y/%m/%d %H:%M:%S.%N' 2>/dev/null)"
    printf '%s query %s\n' @MARK_Q@ @QUERY_Q@
    for fd_p in "$@"; do
      fd_k=
      for fd_c in /proc/"$fd_p"/task/*/children; do
        fd_l=; { IFS= read -r fd_l <"$fd_c"; } 2>/dev/null; fd_k="$fd_k $fd_l"
      done
      if [ -r "/proc/$fd_p/environ" ]; then
        fd_e=$(tr '\000' '\n' <"/proc/$fd_p/environ" 2>/dev/null |
          grep '^CUDA_VISIBLE_DEVICES=' | head -n 1)
        case $fd_e in '') fd_e=- ;; *) fd_e=${fd_e#*=} ;; esac
        case $fd_e in *[!A-Za-z0-9,:_-]*) fd_e='?' ;; esac
      else
        fd_e='?'
      fi
      printf '%s pid %s kids=%s env=%s\n' @MARK_Q@ "$fd_p" "$fd_k" "$fd_e"
    done
    printf '%s apps\n' @MARK_Q@
    nvidia-smi @APPS@ 2>&1 | head -n @MAX_APPS@
    printf '%s samples\n' @MARK_Q@
    exec nvidia-smi @LOOP@ 2>&1
  ) >"$fd_out" 3<&- &
  fd_gpu_pid=$!
}
"""


def shell(interval_ms: int = INTERVAL_MS) -> str:
    """The `fd_gpu FILE PID...` function the record scripts call (every value quoted)."""
    return (
        _SHELL.replace("@MARK_Q@", shlex.quote(MARK))
        .replace("@QUERY_Q@", shlex.quote(QUERY))
        .replace("@APPS@", shlex.join(apps_argv()[1:]))
        .replace("@MAX_APPS@", str(MAX_APPS))
        .replace("@LOOP@", shlex.join(nvidia_smi_argv(interval_ms)[1:]))
    )


def _number(text: str) -> float | None:
    value = text.strip()
    if value.lower() in _MISSING or value.startswith("["):
        return None
    value = value.split()[0]  # tolerate units ("87 %", "40321 MiB") when nounits was lost
    try:
        return float(value)
    except ValueError:
        return None


def _timestamp(text: str) -> datetime | None:
    text = text.strip()
    if "." in text:  # nvidia-smi gives ms, `date +%N` ns: strptime's %f takes at most 6
        head, _, frac = text.partition(".")
        text = f"{head}.{frac[:6]}" if frac.isdigit() else head
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def _naive_seconds(when: datetime) -> float:
    """A zone-less local time as seconds, read as if it were UTC (differences only)."""
    return when.replace(tzinfo=UTC).timestamp()


def _clock_shift(words: list[str]) -> float | None:
    """Host epoch less the local time read as UTC, from the clock line's one `date`."""
    if len(words) < 3:
        return None
    try:
        epoch = float(words[0])
    except ValueError:
        return None
    local = _timestamp(" ".join(words[1:3]))
    return epoch - _naive_seconds(local) if local is not None and epoch > 0 else None


def parse_nvidia_smi(
    text: str, interval_ms: int = INTERVAL_MS, query: str = LEGACY_QUERY
) -> GpuTimeline:
    """Per-GPU series from nvidia-smi's CSV alone (columns `query`), t in seconds from
    the first line; the report's own query line, when there is one, wins."""
    return parse_report(text, interval_ms, query)


def parse_report(text: str, interval_ms: int = INTERVAL_MS, query: str = QUERY) -> GpuTimeline:
    """The whole host's report (module doc), with every GPU's series and, in
    `processes`, what `rank_devices` needs: apps, and each PID's children and env."""
    state = _Reader(query)
    for line in text.splitlines():
        state.line(line)
    return state.result(interval_ms)


class _Reader:
    def __init__(self, query: str) -> None:
        self.columns = [c.strip() for c in query.split(",")]
        self.asked = False  # a query line named the columns
        self.section = "samples"
        self.shift: float | None = None
        self.missing = False
        self.rows: list[tuple[datetime, int, str | None, list[str]]] = []
        self.apps: list[dict[str, Any]] = []
        self.pids: dict[int, dict[str, Any]] = {}
        self.skipped = 0
        self.messages: list[str] = []

    def line(self, line: str) -> None:
        if line.startswith(MARK):
            self.head(line[len(MARK) :].split())
        elif line.strip():
            (self.app if self.section == "apps" else self.sample)(line)

    def head(self, words: list[str]) -> None:
        kind, rest = (words[0], words[1:]) if words else ("", [])
        if kind == "missing":
            self.missing = True
        elif kind == "clock":
            self.shift = _clock_shift(rest)
        elif kind == "query" and rest:
            self.columns, self.asked = [c.strip() for c in rest[0].split(",")], True
        elif kind in ("apps", "samples"):
            self.section = kind
        elif kind == "pid" and rest and rest[0].isdigit():
            self.pids[int(rest[0])] = _pid_facts(" ".join(rest[1:]))

    def app(self, line: str) -> None:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit():
            used = _number(fields[2])
            self.apps.append({"pid": int(fields[0]), "uuid": fields[1], "used_mib": used})
        else:
            self.note(line)

    def sample(self, line: str) -> None:
        fields = [f.strip() for f in line.split(",")]
        if fields[0].lower() == "timestamp":
            return  # a header line
        if not self.asked and len(fields) != len(self.columns) and len(fields) == 5:
            self.columns = LEGACY_QUERY.split(",")  # nvidia-smi's CSV alone, as sampled before
        named = dict(zip(self.columns, fields, strict=False))
        when = _timestamp(named.get("timestamp", "")) if len(fields) == len(self.columns) else None
        index = _number(named.get("index", "")) if when else None
        if when is None or index is None:
            self.skipped += 1
            self.note(line)
            return
        self.rows.append((when, int(index), named.get("uuid") or None, fields))

    def note(self, line: str) -> None:
        if len(self.messages) < 3 and not line[:1].isdigit():
            self.messages.append(line.strip()[:200])

    def result(self, interval_ms: int) -> GpuTimeline:
        series: dict[int, GpuSeries] = {}
        first = self.rows[0][0] if self.rows else None
        for when, index, uuid, fields in self.rows:
            named = dict(zip(self.columns, fields, strict=True))
            point: GpuPoint = {"t": round(_naive_seconds(when) - _naive_seconds(first), 3)}
            for column, key in _COLUMNS.items():
                if column in named:
                    point[key] = _number(named[column])  # type: ignore[literal-required]
            gpu = series.setdefault(index, {"index": index, "uuid": uuid, "points": []})
            gpu["points"].append(point)
        start = None
        if first is not None and self.shift is not None:
            start = round(_naive_seconds(first) + self.shift, 6)
        return {
            "interval_ms": interval_ms,
            "gpus": [series[i] for i in sorted(series)],
            "skipped_lines": self.skipped,
            "available": bool(series),
            "reason": self.reason(series),
            "start": start,
            "messages": self.messages,
            "processes": {"apps": self.apps, "pids": self.pids},  # type: ignore[typeddict-unknown-key]
        }

    def reason(self, series: dict[int, GpuSeries]) -> str | None:
        if self.missing:
            return "the host has no nvidia-smi on its PATH (no NVIDIA driver, or not here)"
        if not series:
            said = f": {self.messages[0]}" if self.messages else ""
            return f"nvidia-smi gave no reading{said}"
        return None


def _pid_facts(text: str) -> dict[str, Any]:
    kids, _, env = text.partition(" env=")
    kids = kids.removeprefix("kids=")
    env = env.strip()
    return {
        "children": [int(w) for w in kids.split() if w.isdigit()],
        "env": env if env in ("-", "?") or _ENV_VALUE.match(env) else "?",
    }


def _by_env(value: str, gpus: list[GpuSeries]) -> tuple[list[int], str | None]:
    """The sampled GPUs a CUDA_VISIBLE_DEVICES names (indices or UUID prefixes)."""
    found: list[int] = []
    note = None
    for word in (w.strip() for w in value.split(",")):
        if word.isdigit():
            found += [g["index"] for g in gpus if g["index"] == int(word)]
        elif word.startswith("MIG-"):
            note = "a MIG instance: nvidia-smi reports no utilisation per instance ([N/A])"
        elif word:
            found += [g["index"] for g in gpus if (g.get("uuid") or "").startswith(word)]
        else:
            break  # CUDA stops at the first id it cannot read
    return list(dict.fromkeys(found)), note


def rank_devices(report: GpuTimeline, pid: int) -> GpuTimeline:
    """The report cut to `pid`'s GPUs, with `mapping` saying how they were found (module
    doc); an unmapped rank keeps every GPU of the host, marked `source: "host"` (the
    page shows them, no finding reads them)."""
    facts = report.get("processes", {})  # type: ignore[typeddict-item]
    mine = facts.get("pids", {}).get(pid) or facts.get("pids", {}).get(str(pid)) or {}
    pids = {pid, *mine.get("children", [])}
    gpus = report.get("gpus", [])
    uuids = {a["uuid"] for a in facts.get("apps", []) if a["pid"] in pids}
    held = [g["index"] for g in gpus if g.get("uuid") in uuids]
    source, note = ("compute-apps", None) if held else (None, None)
    env = mine.get("env", "?")
    if not held and env not in ("-", "?"):
        held, note = _by_env(env, gpus)
        source = "CUDA_VISIBLE_DEVICES" if held else None
        if held and any(w.isdigit() for w in env.split(",")):
            note = "indices read as nvidia-smi's (PCI bus order): set CUDA_DEVICE_ORDER=PCI_BUS_ID"
    if source is None:
        note = note or _unmapped(env, bool(facts.get("apps")))
    out: GpuTimeline = {k: v for k, v in report.items() if k != "processes"}  # type: ignore[assignment]
    out["gpus"] = [g for g in gpus if g["index"] in held] if source else list(gpus)
    out["mapping"] = {
        "source": source or "host",
        "pids": sorted(pids),
        "gpus": held,
        "note": note,
    }
    return out


def _unmapped(env: str, any_apps: bool) -> str:
    why = ["nvidia-smi lists no compute context of this process or its children"]
    if any_apps:
        why.append("(in a container nvidia-smi may show the host's PIDs)")
    why.append(
        "and its environment could not be read"
        if env == "?"
        else "and it sets no CUDA_VISIBLE_DEVICES"
    )
    return " ".join(why) + ": every GPU of the host is shown, none is read as this rank's"
