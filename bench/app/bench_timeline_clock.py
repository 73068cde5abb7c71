"""How far a rank's timeline lies from the job's own clock (issue 48 item 5).

A real DDP job (bench/targets/eval_job.py: torch gloo on CPU, `--ranks` ranks on this machine)
evaluates for 1.0-1.35 s every `--eval-every` steps and writes each evaluation's start
and end on its clock. Every rank is recorded at once through the product's whole-job
host script (runs.remote.many: one scheduled instant, py-spy started early, what came
before the instant cut) and what py-spy wrote is split as the worker splits it
(profiles.captures.timekeeping.timed_result) into raw text and a time track; then,
per evaluation inside the window, on each rank's step thread:
- begin error: the time of the first sample in `evaluate` less the job's start;
- end error: the time of the last sample in `evaluate` less the job's end;
- inside: the share of the 0.2 s timeline buckets wholly inside the evaluation whose
  dominant state is `compute` (what evaluate does: forward passes).
Printed for each record format, one capture after the other on the same job:
`speedscope` (rounds placed linearly between py-spy's start and end: the product
before) and `chrometrace` (rounds at py-spy's own times: after), with p50 / p90 / max
of the absolute errors and the share within 100 ms.

Run (root, the torch venv in .torchenv or TORCH_PYTHON):
    .venv/bin/python bench/app/bench_timeline_clock.py [--ranks 4] [--duration 40] [--rate 50]
        [--formats speedscope,chrometrace] [--subprocesses] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from profiles.captures.timekeeping import timed_result  # noqa: E402
from profiles.pyspy.formats.time_track import load_track  # noqa: E402
from profiles.pyspy.timed.timed_capture import TimedCapture, with_states  # noqa: E402
from profiles.pyspy.timed.timeline import timeline  # noqa: E402
from runs.remote.many import record_many  # noqa: E402
from runs.remote.model import RecordResult, RecordSettings, Target  # noqa: E402

JOB = ROOT / "bench" / "targets" / "eval_job.py"
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", str(ROOT / ".torchenv" / "bin" / "python"))
PYSPY = str(ROOT / ".venv" / "bin" / "py-spy")
BUCKET_S = 0.2
WITHIN_S = 0.1


def start_job(ranks: int, seconds: float, clock: Path, eval_every: int) -> list:
    """The job's ranks; returns once every one said `ready`."""
    port = 29700 + os.getpid() % 200
    procs = []
    for rank in range(ranks):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(ranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
        argv = [TORCH_PYTHON, str(JOB), "--clock", str(clock), "--seconds", str(seconds),
                "--eval-every", str(eval_every)]  # fmt: skip
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    for proc in procs:
        line = proc.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit(f"rank {proc.pid} did not start: {line!r}")
    return procs


class _Session:
    """The host session's caller: starts at the instant, stops nothing early."""

    def on_ready(self) -> None: ...

    def may_start(self) -> bool:
        return True

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None: ...

    def pids_to_stop(self) -> list[int]:
        return []


def record(
    pids: list[int], fmt: str, duration: float, rate: int, native: bool, subprocesses: bool = False
) -> dict:
    """Each pid's RecordResult, recorded at once from an instant 2 s ahead."""
    settings = RecordSettings(
        duration_s=duration, rate=rate, native=native, threads=True, idle=True, gil=False,
        nonblocking=False, subprocesses=subprocesses, format=fmt, gpu=False,
    )  # fmt: skip
    target = Target(transport="local", py_spy=PYSPY)
    outcome = record_many(target, pids, settings, _Session(), start_at=time.time() + 2.0)
    return outcome.results


def timed_capture(pid: int, result: RecordResult, rate: int, duration: float) -> TimedCapture:
    """The rank's raw text and track, split as the worker splits them."""
    if not isinstance(result, RecordResult) or not result.raw:
        raise SystemExit(f"rank {pid} recorded nothing: {result}")
    capture = SimpleNamespace(pk=pid, idle=True, gil=False, rate=rate, duration=duration)
    split, track_text = timed_result(capture, result)
    if track_text is None:
        raise SystemExit(f"rank {pid}: no time track ({result.facts})")
    text = split.raw.decode()
    return TimedCapture(text, with_states(load_track(track_text), text))


def _main_thread(capture: TimedCapture):
    return next(t for t in capture.timed() if t.name == "MainThread")


def _in_evaluate(stack: str) -> bool:
    return any(frame.startswith("evaluate (") for frame in stack.split(";"))


def _runs(flags: bytes, track) -> list[tuple[float, float]]:  # noqa: ANN001
    """(first, last) time of each run of consecutive samples in `evaluate`."""
    runs, begin = [], None
    for k, flag in enumerate([*flags, 0]):
        if flag and begin is None:
            begin = k
        elif not flag and begin is not None:
            runs.append((track.at(begin), track.at(k - 1)))
            begin = None
    return runs


def _distance(run: tuple[float, float], start: float, end: float) -> float:
    """How far a run lies from the job's window: less its overlap (the best, lowest)."""
    overlap = min(run[1], end) - max(run[0], start)
    return -overlap if overlap > 0 else abs((run[0] + run[1]) / 2 - (start + end) / 2)


def windows(capture: TimedCapture, evaluations: list[dict]) -> list[dict]:
    """Per evaluation wholly inside the capture: begin and end errors (s) and the share
    of the 0.2 s buckets inside it that read `compute` (module doc)."""
    track, thread = capture.track, _main_thread(capture)
    marks = bytes([*(_in_evaluate(capture.stack(r)) for r in range(len(capture.lines))), 0])
    flags = capture.flags(thread, marks)
    line = timeline(capture, BUCKET_S)
    row = next(t for t in line["threads"] if t["tid"] == thread.tid)
    runs = _runs(flags, track)
    found = []
    for ev in evaluations:
        start, end = ev["start"] - track.start, ev["end"] - track.start
        if start < 0.5 or end > track.duration_s - 0.5:
            continue
        if not runs:
            found.append({"begin": None, "end": None, "compute": 0.0, "states": []})
            continue
        first, last = min(runs, key=lambda r: _distance(r, start, end))
        cells = range(int(start / BUCKET_S) + 1, int(end / BUCKET_S))
        states = [row["dominant"][i] for i in cells if i < len(row["dominant"])]
        compute = sum(s == "compute" for s in states) / len(states) if states else 0.0
        found.append(
            {"begin": first - start, "end": last - end, "compute": compute, "states": states}
        )
    return found


def summary(found: list[dict]) -> dict:
    """p50 / p90 / max of the absolute errors, and the share within WITHIN_S."""
    out: dict = {"windows": len(found)}
    for key in ("begin", "end"):
        errors = sorted(abs(f[key]) if f[key] is not None else 99.0 for f in found)
        if not errors:
            continue
        out[key] = {
            "p50_s": round(statistics.median(errors), 3),
            "p90_s": round(errors[min(len(errors) - 1, int(0.9 * len(errors)))], 3),
            "max_s": round(errors[-1], 3),
            "within_100ms": round(sum(e <= WITHIN_S for e in errors) / len(errors), 3),
        }
    both = [f for f in found if f["begin"] is not None]
    out["both_within_100ms"] = round(
        sum(abs(f["begin"]) <= WITHIN_S and abs(f["end"]) <= WITHIN_S for f in both)
        / max(len(found), 1),
        3,
    )
    out["inside_compute"] = round(statistics.fmean(f["compute"] for f in found), 3) if found else 0
    inside = Counter(s for f in found for s in f.get("states", ()))
    out["inside_states"] = {k: round(v / max(inside.total(), 1), 3) for k, v in inside.items()}
    return out


def measure(pids: list[int], clock: Path, fmt: str, args: argparse.Namespace) -> dict:
    results = record(pids, fmt, args.duration, args.rate, args.native, args.subprocesses)
    evaluations = [json.loads(line) for line in clock.read_text().splitlines() if line]
    found, per_rank = [], {}
    for rank, pid in enumerate(pids):
        capture = timed_capture(pid, results[pid], args.rate, args.duration)
        mine = [e for e in evaluations if e["rank"] == rank]
        rows = windows(capture, mine)
        per_rank[f"rank-{rank}"] = summary(rows)
        found += rows
    return {"format": fmt, **summary(found), "ranks": per_rank, "samples": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--duration", type=float, default=40)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--formats", default="speedscope,chrometrace")
    parser.add_argument("--no-native", dest="native", action="store_false")
    parser.add_argument("--subprocesses", action="store_true", help="as a whole job records")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    formats = args.formats.split(",")
    with tempfile.TemporaryDirectory() as folder:
        clock = Path(folder, "clock.jsonl")
        seconds = len(formats) * (args.duration + 15) + 10
        procs = start_job(args.ranks, seconds, clock, args.eval_every)
        try:
            for fmt in formats:
                report = measure([p.pid for p in procs], clock, fmt, args)
                samples = report.pop("samples")
                if args.json:
                    print(json.dumps(report), flush=True)
                    continue
                print(f"{fmt}: {args.ranks} ranks, {args.duration:g} s at {args.rate} Hz, "
                      f"{report['windows']} evaluation windows")  # fmt: skip
                for key in ("begin", "end"):
                    row = report.get(key, {})
                    print(
                        f"  {key} error |s|: p50 {row.get('p50_s')} p90 {row.get('p90_s')} "
                        f"max {row.get('max_s')}; within 100 ms {row.get('within_100ms')}"
                    )
                print(f"  both ends within 100 ms: {report['both_within_100ms']}; buckets "
                      f"inside reading compute: {report['inside_compute']} "
                      f"(dominant states inside: {report['inside_states']})")  # fmt: skip
                signed = [(round(s["begin"], 3), round(s["end"], 3)) for s in samples
                          if s["begin"] is not None]  # fmt: skip
                print(f"  (begin, end) errors, s: {signed}", flush=True)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
