"""Record periodic_job.py with the real py-spy, as a capture keeps time.

    python tests/data/timeline/record.py CASE SECONDS RATE [--chrometrace] [JOB ARGS...]

writes CASE.speedscope.json (py-spy record --format speedscope --idle --threads; with
`--chrometrace`, CASE.chrometrace.json in that format, as whole-job captures record) and
CASE.clock.json: the host epoch read right before py-spy starts and right after it
stops (`start`, `end`), the rate, and the job's own printout (`ready`, `bursts`). The
job runs SECONDS + 4 s; py-spy attaches once the job is ready and is stopped with
SIGINT after SECONDS. Needs root (ptrace) and .venv/bin/py-spy.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY_SPY = HERE.parents[2] / ".venv" / "bin" / "py-spy"


def record(
    out: Path, seconds: float, rate: int, job_args: list[str], fmt: str = "speedscope"
) -> dict:
    """Record the job into `out`.FMT.json; returns (and writes) the clock."""
    job = subprocess.Popen(
        [sys.executable, str(HERE / "periodic_job.py"), str(seconds + 4), *job_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(job.stdout.readline())["ready"]
        start = time.time()
        spy = subprocess.Popen(
            [str(PY_SPY), "record", "--format", fmt, "--idle", "--threads"]
            + ["--rate", str(rate), "-o", f"{out}.{fmt}.json", "--pid", str(job.pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        time.sleep(seconds)
        spy.send_signal(signal.SIGINT)
        log = spy.communicate(timeout=30)[0].decode()
        end = time.time()
    finally:
        job.kill()
    printed = [json.loads(line) for line in job.communicate()[0].splitlines() if line.strip()]
    bursts = [[p["burst_start"], p["burst_end"]] for p in printed if "burst_start" in p]
    clock = {"start": start, "end": end, "rate": rate, "ready": ready, "bursts": bursts}
    clock["args"] = job_args
    clock["pyspy_log"] = log.splitlines()
    Path(f"{out}.clock.json").write_text(json.dumps(clock, indent=1) + "\n")
    return clock


if __name__ == "__main__":
    case, seconds, rate, *rest = sys.argv[1:]
    fmt = "chrometrace" if "--chrometrace" in rest else "speedscope"
    rest = [arg for arg in rest if arg != "--chrometrace"]
    print(json.dumps(record(HERE / case, float(seconds), int(rate), rest, fmt))[:400])
