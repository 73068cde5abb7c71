"""py-spy's stdout log: requested rate, how far the sampler fell behind, a verdict.

py-spy prints `Sampling process R times a second for D seconds.` first, then at
most once a second, once the delay passes 1 s, `X.XXs behind in sampling, results
may be inaccurate...` (X is the cumulative drift since the start, not a per-second
figure), and last `Wrote raw flamegraph data to 'F'. Samples: N Errors: M`. Lines
may carry a `py-spy> ` prefix and ANSI colour codes. `Samples` counts stack traces
(one per active thread per sampling round), so it cannot give the round rate; the
achieved fraction comes from the drift instead:
- finished by duration (a `Wrote` line, no `Stopped sampling` line): it took exactly R*D rounds in
  D + drift seconds, so fraction = D / (D + max_behind);
- otherwise, from the growth of the drift between warnings (about one per second):
  fraction = 1 - (last - first) / (warnings - 1), and with a single warning
  1 - behind / elapsed with elapsed taken as max(D, behind + 1).
Verdict: "ok" when py-spy never reported falling behind; once it did,
"unreliable" when it took under half the rounds it was asked for (fraction < 0.5)
or errors exceed 10% of samples + errors, otherwise "degraded".
recommended_rate = floor(R * fraction * 0.8) (20% headroom), at least 1 and always
below R once py-spy fell behind (None when the log lacks the first line).
A line longer than MAX_LOG_LINE_CHARS is not py-spy's and is ignored, and numbers
are read with bounded repeats, so a crafted log costs time linear in its size.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable

from ..core.types import LagPoint, LagReport
from ..limits import MAX_LOG_LINE_CHARS
from ..thresholds import HEADROOM, SAMPLER_ERRORS, SAMPLER_UNRELIABLE

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\r")
_START = re.compile(r"Sampling process (\d{1,9}) times a second(?: for (\d{1,9}) seconds)?")
_BEHIND = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)(ns|µs|us|ms|s)\s{1,8}behind in sampling")
_WROTE = re.compile(r"Samples: (\d{1,18}) Errors: (\d{1,18})")
_STOPPED = re.compile(r"Stopped sampling because (.*?)\s*$")
_ERROR = re.compile(r"^(?:py-spy> )?Error: (.+?)\s*$")
_UNIT = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def analyze_lag(log_text: str | Iterable[str]) -> LagReport | None:
    """Read py-spy's stdout (text, or its lines); None when it holds none of py-spy's lines.

    py-spy's `Error: ...` line (a missing PID, no permission) counts as one of its
    lines: the report then carries it in `error` and the verdict is "unreliable".
    """
    rate = duration = samples = errors = None
    stop_reason: str | None = None
    error: str | None = None
    behind: list[float] = []
    # Line by line, never split into one list: a crafted log of short lines costs an
    # object per line (a 16 MiB log of 10-byte lines was 100 MB as a list).
    lines = io.StringIO(log_text) if isinstance(log_text, str) else log_text
    for raw_line in lines:
        if len(raw_line) > MAX_LOG_LINE_CHARS:
            continue
        line = _ANSI.sub("", raw_line).strip()
        if error is None and (m := _ERROR.match(line)) is not None:
            error = m.group(1)
        elif (m := _START.search(line)) is not None:
            rate, duration = int(m.group(1)), _int_or_none(m.group(2))
        elif (m := _BEHIND.search(line)) is not None:
            behind.append(round(float(m.group(1)) * _UNIT[m.group(2)], 3))
        elif (m := _WROTE.search(line)) is not None:
            samples, errors = int(m.group(1)), int(m.group(2))
        elif (m := _STOPPED.search(line)) is not None:
            stop_reason = m.group(1)
    if rate is None and not behind and samples is None and stop_reason is None and error is None:
        return None
    report = _report(rate, duration, samples, errors, stop_reason, behind)
    if error is not None:
        report["error"] = error
        report["verdict"] = "unreliable"
        report["explanation"] = f"py-spy stopped with an error: {error}"
    return report


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text else None


def achieved_fraction(behind: list[float], duration: int | None, finished: bool) -> float | None:
    """Share of the requested sampling rounds py-spy managed (None: no sign of lag).

    `finished` means py-spy stopped on its own after its R*D rounds.
    """
    if not behind:
        return None
    worst = max(behind)
    if duration and finished:
        fraction = duration / (duration + worst)
    elif len(behind) >= 2:
        fraction = 1.0 - (behind[-1] - behind[0]) / (len(behind) - 1)
    else:
        fraction = 1.0 - worst / max(float(duration or 0), worst + 1.0)
    return min(max(fraction, 0.01), 0.99)


def _report(
    rate: int | None,
    duration: int | None,
    samples: int | None,
    errors: int | None,
    stop_reason: str | None,
    behind: list[float],
) -> LagReport:
    finished = samples is not None and stop_reason is None
    fraction = achieved_fraction(behind, duration, finished)
    worst = max(behind, default=0.0)
    elapsed = round(worst / (1.0 - fraction), 1) if fraction is not None else None
    return {
        "requested_rate": rate,
        "requested_duration_s": duration,
        "max_behind_s": worst,
        "warnings": len(behind),
        "samples_reported": samples,
        "errors_reported": errors,
        "verdict": _verdict(fraction, samples, errors),
        "recommended_rate": _recommended(rate, fraction),
        "achieved_fraction": None if fraction is None else round(fraction, 3),
        "effective_rate": None if fraction is None or rate is None else round(rate * fraction, 1),
        "elapsed_s_estimate": elapsed,
        "stop_reason": stop_reason,
        "series": _series(behind, fraction),
        "explanation": _explain(rate, worst, fraction, elapsed),
        "error": None,
    }


def _verdict(fraction: float | None, samples: int | None, errors: int | None) -> str:
    if fraction is None:
        return "ok"
    error_share = (errors or 0) / max((samples or 0) + (errors or 0), 1)
    if fraction < SAMPLER_UNRELIABLE / 100 or error_share > SAMPLER_ERRORS / 100:
        return "unreliable"
    return "degraded"


def _recommended(rate: int | None, fraction: float | None) -> int | None:
    if rate is None:
        return None
    if fraction is None:
        return rate
    return max(1, min(rate - 1, math.floor(rate * fraction * HEADROOM)))


def _series(behind: list[float], fraction: float | None) -> list[LagPoint]:
    # Warnings come about once a second; the first one lands when the drift,
    # growing at (1 - fraction) s per s, first passes 1 s.
    slope = 1.0 - fraction if fraction is not None else 1.0
    first_s = behind[0] / slope if behind else 0.0
    return [
        {"t_index": i, "approx_s": round(first_s + i, 1), "behind_s": value}
        for i, value in enumerate(behind)
    ]


def _explain(rate: int | None, worst: float, fraction: float | None, elapsed: float | None) -> str:
    if fraction is None:
        return "py-spy kept up with the requested rate: it never reported falling behind."
    asked = f"{rate} Hz" if rate else "the requested rate"
    return (
        f"py-spy fell {worst:.2f} s behind: that figure is cumulative drift since the start, "
        f"so over about {elapsed or 0:.0f} s it took roughly {fraction:.0%} of the samples it "
        f"was asked for ({asked}). A sampler that falls behind samples less often, not "
        "evenly, so shares lean toward long-running states (waits, syncs, long kernels) "
        "and short bursts are under-counted. Record again at the recommended rate, or "
        "drop --native / use --nonblocking."
    )
