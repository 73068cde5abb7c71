"""Simulated capture pairs for the regression watch (tests and bench/engine/bench_watch.py).

A real torch capture (tests/data/pyspy/torch_native_idle.txt: 5 threads, --idle,
--native) is the distribution of stacks. A simulated capture draws N samples from it
at random (py-spy spaces its samples at random, so a capture is a multinomial draw)
and runs the real engine on them; a pair is judged with the real `judge`.

- unchanged: both captures from the base distribution; any moved row is a false alert.
- new frame: the second capture gets a host-sync stack (`loss.item()` →
  `_local_scalar_dense` → `cudaStreamSynchronize`) holding 3% of its samples.
- grown frame: the second capture's `Queue.get` waits (data wait) hold 3 points more.
A planted change is found when a moved row is one whose expected share moved by at
least 2 points (computed from the two distributions themselves, without noise).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from profiles import pyspy
from profiles.pyspy.compare.regression import JudgeOptions, judge
from profiles.pyspy.rules.state_rules import STATES

BASE = Path(__file__).resolve().parents[1] / "data" / "pyspy" / "torch_native_idle.txt"
TRAIN = (
    "thread (8591): trainer;0x7f6a22d278ec (libc.so.6);0x7f6a22ca71f5 (libc.so.6);"
    "thread_run (libpython3.11.so.1.0);Thread._bootstrap (threading.py:1002);"
    "Thread._bootstrap_inner (threading.py:1045);Thread.run (threading.py:982);"
    "train (torch_target.py:63)"
)
SYNC_STACK = (
    f"{TRAIN};train_step (torch_target.py:75);Tensor.item (torch/_tensor.py:1);"
    "at::_local_scalar_dense (libtorch_cpu.so);cudaStreamSynchronize (libcudart.so.12)"
)
GROWN_FRAME = "Queue.get (queue.py:182)"
OPTIONS = pyspy.AnalysisOptions(include_flamegraph=False)


def base_distribution(path: Path = BASE) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            counts[stack] = counts.get(stack, 0) + float(count)
    total = sum(counts.values())
    return {stack: n / total for stack, n in counts.items()}


def plant_new_frame(dist: dict[str, float], points: float) -> dict[str, float]:
    share = points / 100
    planted = {stack: p * (1 - share) for stack, p in dist.items()}
    planted[SYNC_STACK] = planted.get(SYNC_STACK, 0) + share
    return planted


def plant_grown_frame(dist: dict[str, float], points: float) -> dict[str, float]:
    """Scale the stacks through GROWN_FRAME up and the rest down, +`points` in all."""
    inside = sum(p for s, p in dist.items() if GROWN_FRAME in s)
    target = inside + points / 100
    return {
        s: p * (target / inside if GROWN_FRAME in s else (1 - target) / (1 - inside))
        for s, p in dist.items()
    }


def stats_of(counts: Counter | dict[str, float]) -> dict:
    lines = [f"{stack} {int(n)}" for stack, n in counts.items() if int(n) > 0]
    return dict(pyspy.analyze(pyspy.parse_raw_lines(lines), OPTIONS))


def sample(dist: dict[str, float], n: int, rng: random.Random) -> Counter:
    stacks = list(dist)
    return Counter(rng.choices(stacks, weights=[dist[s] for s in stacks], k=n))


def draw(dist: dict[str, float], n: int, rng: random.Random, fast: StackRows | None = None) -> dict:
    counts = sample(dist, n, rng)
    return fast.stats(counts) if fast else stats_of(counts)


class StackRows:
    """Which rows each stack counts in, from the engine run on that stack alone. Every
    figure the judge reads counts a sample at most once per row, so a capture's row
    counts are sums over its stacks: the fast path of the simulation (tested equal
    to the engine's own output)."""

    TOP_N = 50  # the engine's default list length

    def __init__(self, stacks: list[str]) -> None:
        options = pyspy.AnalysisOptions(include_flamegraph=False, top_n=1000)
        self.rows: dict[str, dict] = {}
        for stack in stacks:
            stats = dict(pyspy.analyze(pyspy.parse_raw_lines([f"{stack} 1"]), options))
            self.rows[stack] = {
                "states": [r["state"] for r in stats.get("states") or [] if r["samples"]],
                "categories": [r["category"] for r in stats["categories"] if r["samples"]],
                "self": [r["frame"] for r in stats["top_self"]],
                "total": [r["frame"] for r in stats["top_total"]],
            }
            self.categories = [r["category"] for r in stats["categories"]]
            self.has_states = "states" in stats

    def stats(self, counts: Counter) -> dict:
        sums = {field: Counter() for field in ("states", "categories", "self", "total")}
        for stack, n in counts.items():
            for field, names in self.rows[stack].items():
                for name in names:
                    sums[field][name] += n
        result = {
            "total_samples": sum(counts.values()),
            "categories": [
                {"category": c, "samples": sums["categories"][c]} for c in self.categories
            ],
            "top_self": self._ranked(sums["self"]),
            "top_total": self._ranked(sums["total"]),
        }
        if self.has_states:
            # Like the engine: every state of the vocabulary, in order, zeros included.
            result["states"] = [{"state": s, "samples": sums["states"][s]} for s in STATES]
        return result

    def _ranked(self, counts: Counter) -> list[dict]:
        top = sorted(((-n, f) for f, n in counts.items() if n))[: self.TOP_N]
        return [{"frame": f, "samples": -n} for n, f in top]


def truly_moved(before: dict[str, float], after: dict[str, float], options: JudgeOptions) -> set:
    """Rows whose expected share differs by at least the minimum effect (no noise)."""
    scale = 10**7
    exact = judge(
        stats_of({s: p * scale for s, p in before.items()}),
        stats_of({s: p * scale for s, p in after.items()}),
        options,
    )
    return {r["key"] for r in exact["rows"] if abs(r["delta_points"]) >= options.min_effect_points}


@dataclass
class Rates:
    pairs: int
    samples: int
    alerted: int
    found: int

    @property
    def alert_rate(self) -> float:
        return self.alerted / self.pairs

    @property
    def found_rate(self) -> float:
        return self.found / self.pairs


def simulate(
    scenario: str,
    *,
    pairs: int,
    samples: int,
    seed: int = 1,
    options: JudgeOptions | None = None,
    fast: bool = False,
) -> Rates:
    """Judge `pairs` simulated pairs of `samples` samples each; see the module doc.
    `fast`: row counts summed per stack (StackRows) instead of the engine per capture."""
    options = options or JudgeOptions()
    base = base_distribution()
    changed = {"unchanged": base, "new frame": None, "grown frame": None}[scenario]
    if scenario == "new frame":
        changed = plant_new_frame(base, 3)
    elif scenario == "grown frame":
        changed = plant_grown_frame(base, 3)
    expected = truly_moved(base, changed, options) if scenario != "unchanged" else set()
    rng = random.Random(seed)
    rows = StackRows(list(dict.fromkeys([*base, *changed]))) if fast else None
    rates = Rates(pairs=pairs, samples=samples, alerted=0, found=0)
    for _ in range(pairs):
        before, after = draw(base, samples, rng, rows), draw(changed, samples, rng, rows)
        moved = {r["key"] for r in judge(before, after, options)["moved"]}
        rates.alerted += bool(moved)
        rates.found += bool(moved & expected)
    return rates
