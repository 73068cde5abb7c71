"""DataLoader workers under py-spy: one `--subprocesses` sampler, or a sampler per child.

Starts bench/targets/loader_job/train.py (2 gloo ranks, CPU; rank 1's 2 DataLoader workers
spend their items in `data.tokenize`) and samples rank 1 (native, idle, threads,
20 Hz: a whole-job capture's settings) over windows of `--duration` s, each way in
turn, twice:
- `none`: no py-spy (the job's own pace);
- `rank`: one py-spy on the rank (whole-job captures before workers were sampled);
- `subprocesses`: one py-spy on the rank with `--subprocesses`;
- `per_child`: a py-spy on the rank and one on each child, started as children appear
  (polled every 100 ms, as py-spy's own monitor does).
For each: the rank's items a second against `none` (the overhead on an input-bound
rank is the workers' pace), the rank's main-thread samples against the rounds asked,
py-spy's worst lag, the share of the workers' life their samples cover, and the share
of the workers' samples in `tokenize` against the job's own clock. Run once with
persistent workers and once with workers respawned every epoch; then a worker killed
mid-window, and a rank with a non-Python child (py-spy#846).

Run: `.venv/bin/python bench/engine/bench_workers.py` (needs `make torchenv`; ~4 min).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from profiles.pyspy.job.loader_workers import split_processes, worker_summary  # noqa: E402
from tests.support.sshd import free_port  # noqa: E402

JOB = ROOT / "bench" / "targets" / "loader_job" / "train.py"
PY_SPY = str(ROOT / ".venv" / "bin" / "py-spy")
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", str(ROOT / ".torchenv" / "bin" / "python"))
RATE = 20
FLAGS = ["--rate", str(RATE), "--format", "raw", "--native", "--threads", "--idle"]
CLOCK = re.compile(r"clock rank=\d+ t=(\S+) steps=\d+ tokenize_s=(\S+) augment_s=\S+ "
                   r"worker_s=(\S+) items=(\d+)")  # fmt: skip


class Job:
    """The two ranks, with the slow rank's latest clock line kept up to date."""

    def __init__(self, *extra: str) -> None:
        port, self.clock, self.lines = free_port(), None, []
        self.ranks = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))  # fmt: skip
            argv = [TORCH_PYTHON, str(JOB), "--seconds", "400", *extra]
            self.ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True))  # fmt: skip
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()
        assert self.ready.wait(120), "the job did not start"
        self.pid = self.ranks[1].pid

    def _read(self) -> None:
        for line in self.ranks[1].stdout:
            self.lines.append(line)
            if line.startswith("ready"):
                self.ready.set()
            if match := CLOCK.match(line):
                self.clock = tuple(float(g) for g in match.groups())

    def _drain(self) -> None:
        for _ in self.ranks[0].stdout:
            pass

    def children(self) -> list[int]:
        found = []
        for task in Path(f"/proc/{self.pid}/task").glob("*"):
            try:
                found += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                pass
        return found

    def stop(self) -> None:
        for proc in self.ranks:
            proc.kill()
            proc.wait()


def spy(pid: int, out: Path, duration: int, *extra: str) -> subprocess.Popen:
    argv = [PY_SPY, "record", "--pid", str(pid), *FLAGS, "--duration", str(duration)]
    return subprocess.Popen([*argv, *extra, "-o", str(out)], stdout=subprocess.PIPE, text=True)


def _rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match.group(1)) if match else 0


def lag_of(log: str) -> float:
    behind = [float(m) for m in re.findall(r"([\d.]+)s behind", log)]
    return max(behind, default=0.0)


def window(job: Job, mode: str, duration: int, folder: Path, kill_at: float = 0) -> dict:
    """One window of `mode`: the figures it gives."""
    before, t0 = job.clock, time.monotonic()
    spies, seen = [], set()
    if mode in ("rank", "subprocesses", "per_child"):
        extra = ["--subprocesses"] if mode == "subprocesses" else []
        spies.append(spy(job.pid, folder / f"{mode}-rank.raw", duration, *extra))
    killed, rss = None, 0
    while time.monotonic() - t0 < duration + (1.0 if spies else 0):
        if mode == "per_child":
            for child in set(job.children()) - seen:
                seen.add(child)
                spies.append(spy(child, folder / f"{mode}-{child}.raw", duration))
        if kill_at and killed is None and time.monotonic() - t0 >= kill_at:
            killed = job.children()[0]
            os.kill(killed, signal.SIGKILL)
        if spies and spies[0].poll() is not None:
            break
        rss = max(rss, sum(_rss_kb(s.pid) for s in spies if s.poll() is None))
        time.sleep(0.1)
    for child_spy in spies[1:]:  # the rank's window is over: the workers' too
        if child_spy.poll() is None:
            child_spy.send_signal(signal.SIGINT)
    logs = [s.communicate()[0] for s in spies]
    after = job.clock
    pace = (after[3] - before[3]) / (after[0] - before[0])
    figures = {"mode": mode, "items_per_s": round(pace, 1)}
    clock_share = (after[1] - before[1]) / max(1e-9, after[2] - before[2])
    figures["clock_tokenize"] = round(100 * clock_share, 1)
    if not spies:
        return figures
    lines = []
    for path in sorted(folder.glob(f"{mode}-*.raw")):
        lines += _tagged(path, job.pid)
        path.unlink()
    split = split_processes(lines)
    rounds = duration * RATE
    figures["rank_rounds_kept"] = round(100 * split.rounds / rounds, 1)
    figures["pyspy_rss_mb"] = round(rss / 1024, 1)
    figures["lag_s"] = lag_of(logs[0])
    figures["rank_log_end"] = [x for x in logs[0].splitlines() if "Stopped" in x or "Wrote" in x]
    summary = worker_summary(split.children, rounds=split.rounds)
    if summary:
        figures["workers_life_sampled"] = round(100 * summary["samples"] / (2 * rounds), 1)
        top = summary["functions"][0] if summary["functions"] else {"function": "-", "percent": 0}
        figures["samples_top"] = f"{top['function']} {top['percent']}%"
        figures["processes"] = len(summary["pids"])
    if killed:
        figures["killed"] = killed
    return figures


def _tagged(path: Path, rank: int) -> list[str]:
    """Lines of one py-spy's raw file, as `--subprocesses` would have written them."""
    text = path.read_text()
    name = path.stem.rsplit("-", 1)[1]
    if name == "rank" or "process " in text.split(";", 1)[0]:
        return [f'process {rank}:"rank";{x}' if not x.startswith("process ") else x
                for x in text.splitlines() if x]  # fmt: skip
    return [f'process {rank}:"rank";process {name}:"worker";{x}' for x in text.splitlines() if x]


def run(title: str, job_args: list[str], modes: list[str], duration: float, **kw) -> None:
    job = Job(*job_args)
    try:
        time.sleep(2)
        with tempfile.TemporaryDirectory() as folder:
            for mode in modes:
                figures = window(job, mode, duration, Path(folder), **kw)
                print(f"{title}: {figures}", flush=True)
        died = [x.strip() for x in job.lines if x.startswith("worker died")]
        if died:
            print(f"{title}: the job said {died[:1]}")
    finally:
        job.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=8)
    args = parser.parse_args()
    modes = ["none", "rank", "subprocesses", "per_child"] * 2
    run("persistent workers", ["--persistent"], modes, args.duration)
    run("respawned workers", [], modes, args.duration)
    run("a worker killed mid-window", ["--persistent"], ["subprocesses"], args.duration,
        kill_at=args.duration / 2)  # fmt: skip
    run("a non-Python child", ["--non-python-child"], ["subprocesses"], args.duration)


if __name__ == "__main__":
    main()
