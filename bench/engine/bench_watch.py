"""How often a regression watch cries wolf, and how often it finds a planted change.

Usage: python bench/engine/bench_watch.py [--pairs 200] [--samples 2000,6000,12000] [--fast]
Each pair is two simulated captures drawn at random from a real torch capture's stacks
(tests/data/pyspy/torch_native_idle.txt; py-spy spaces its samples at random, so a
capture is a multinomial draw), analysed by the real engine (`--fast`: row counts
summed per stack, the same numbers faster) and judged with the watch's defaults
(Benjamini–Yekutieli at 1% across all rows compared, minimum effect 2 points):
- unchanged: both from the capture's own distribution; a pair with any moved row
  is a false alert (target: at most 1%);
- new frame: the second holds a host-sync stack at 3% of its samples;
- grown frame: the second spends 3 points more in `Queue.get` (data wait);
  found = a row that truly moved by 2+ points is among the moved rows (target 90%).
Also: plain Benjamini–Hochberg's false-alert rate, and the time to judge one pair
and to run the series test over 60 captures.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from profiles.pyspy.compare.regression import JudgeOptions, judge  # noqa: E402
from profiles.pyspy.stats.change_points import series_shifts  # noqa: E402
from tests.support import watch_sim  # noqa: E402


def rates(pairs: int, samples: list[int], fast: bool) -> None:
    print(f"{pairs} pairs per cell, {'fast row sums' if fast else 'real engine'}")
    print(
        f"{'samples':>8} {'unchanged: false alerts':>24} {'BH instead':>11} "
        f"{'new frame: found':>17} {'grown frame: found':>19}"
    )
    for n in samples:
        cells = [
            watch_sim.simulate("unchanged", pairs=pairs, samples=n, fast=fast).alert_rate,
            watch_sim.simulate(
                "unchanged",
                pairs=pairs,
                samples=n,
                fast=fast,
                options=JudgeOptions(dependent=False),
            ).alert_rate,
            watch_sim.simulate("new frame", pairs=pairs, samples=n, fast=fast).found_rate,
            watch_sim.simulate("grown frame", pairs=pairs, samples=n, fast=fast).found_rate,
        ]
        print(f"{n:>8} {cells[0]:>24.1%} {cells[1]:>11.1%} {cells[2]:>17.1%} {cells[3]:>19.1%}")


def timings() -> None:
    base = watch_sim.base_distribution()
    rng = random.Random(1)
    before, after = watch_sim.draw(base, 6000, rng), watch_sim.draw(base, 6000, rng)
    start = time.perf_counter()
    for _ in range(20):
        judge(before, after)
    per_pair = (time.perf_counter() - start) / 20
    series = {f"row{i}": [10 + rng.gauss(0, 1) for _ in range(61)] for i in range(30)}
    series["shifted"] = [10 + rng.gauss(0, 1) + (3 if i > 40 else 0) for i in range(61)]
    start = time.perf_counter()
    found = series_shifts(series)
    took = time.perf_counter() - start
    flagged = [s["key"] for s in found if s["significant"]]
    print(f"judge one pair (6,000 samples a side): {per_pair * 1000:.1f} ms")
    print(f"series test, 31 shares x 61 captures: {took:.2f} s; flagged {flagged}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--samples", default="2000,6000,12000")
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args()
    rates(args.pairs, [int(n) for n in args.samples.split(",")], args.fast)
    timings()


if __name__ == "__main__":
    main()
