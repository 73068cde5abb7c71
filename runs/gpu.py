"""nvidia-smi's CSV, sampled beside py-spy, into a per-GPU timeline.

The record script runs, when the host has nvidia-smi:
    nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total
               --format=csv,noheader,nounits --loop-ms=250
which prints one line per GPU per tick, e.g.
    2026/11/29 19:36:07.123, 0, 87, 40321, 81559
Fields a GPU cannot report read "[N/A]" or "[Not Supported]" (older drivers also
"N/A"); they become None, never 0. Standard library only.
"""

from datetime import datetime
from typing import TypedDict

QUERY = "timestamp,index,utilization.gpu,memory.used,memory.total"
INTERVAL_MS = 250
_MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", ""}


class GpuPoint(TypedDict):
    t: float
    util: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None


class GpuSeries(TypedDict):
    index: int
    points: list[GpuPoint]


class GpuTimeline(TypedDict):
    interval_ms: int
    gpus: list[GpuSeries]
    skipped_lines: int


def nvidia_smi_argv(interval_ms: int = INTERVAL_MS) -> list[str]:
    return [
        "nvidia-smi",
        f"--query-gpu={QUERY}",
        "--format=csv,noheader,nounits",
        f"--loop-ms={interval_ms}",
    ]


def _number(text: str) -> float | None:
    value = text.strip()
    if value.lower() in _MISSING:
        return None
    value = value.split()[0]  # tolerate units ("87 %", "40321 MiB") when nounits was lost
    try:
        return float(value)
    except ValueError:
        return None


def _timestamp(text: str) -> datetime | None:
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    return None


def parse_nvidia_smi(text: str, interval_ms: int = INTERVAL_MS) -> GpuTimeline:
    """Per-GPU series of utilisation (%) and memory (MiB), t in seconds from the first line."""
    series: dict[int, list[GpuPoint]] = {}
    start: datetime | None = None
    skipped = 0
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if not line.strip() or fields[0].lower() == "timestamp":
            continue
        when = _timestamp(fields[0]) if len(fields) == 5 else None
        index = _number(fields[1]) if when else None
        if when is None or index is None:
            skipped += 1
            continue
        start = start or when
        series.setdefault(int(index), []).append(
            {
                "t": round((when - start).total_seconds(), 3),
                "util": _number(fields[2]),
                "mem_used_mib": _number(fields[3]),
                "mem_total_mib": _number(fields[4]),
            }
        )
    gpus: list[GpuSeries] = [{"index": i, "points": pts} for i, pts in sorted(series.items())]
    return {"interval_ms": interval_ms, "gpus": gpus, "skipped_lines": skipped}
