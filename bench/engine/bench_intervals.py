"""False alarms and detection of the interval engines on back-to-back captures (issue 39).

Simulates one continuous run of an unchanged training job sampled at 100 Hz (py-spy
`--idle --threads`, speedscope): a step thread running a semi-Markov loop (sometimes a
DataLoader wait burst, forward / backward / optimizer compute ~120 +- 20 ms, `.item()`,
a DDP all-reduce wait lasting an exponential ~60 ms; every EVAL_EVERY steps a ~0.8 s
evaluation) and a loader thread alternating work and a blocked `Queue.put`. The run is
cut into back-to-back captures of --seconds each; every capture goes through the
product's pipeline: speedscope -> split_speedscope -> raw text + time track ->
profiles.captures.analysis.engine_outputs (stats) and timed_outputs (stats["time"],
with each share's design effect over time blocks).

Then, for consecutive captures (i, i+1) of the unchanged job:
- compare: compare_stats (the compare page) - a false alarm is a pair with any state
  row "real change"; also per state row;
- watch: regression.judge on comparable.pair_views (the watch) - a false alarm is a
  pair judged "changed";
each with the design effects (new: batch means over time blocks) and with them removed
(stats["time"]["design_effect"] = None: the old independent intervals). Target: false
alarms <= 1% with the new intervals.

Planted changes: capture i of the unchanged run against capture i of a second run whose
all-reduce wait is longer, so the collective share rises by ~--strong and ~--weak
points; detection = the collective row is "real change" (compare) or moved (watch).

Run: `.venv/bin/python bench/engine/bench_intervals.py [--captures 300] [--seconds 15]
[--planted 100] [--seed 1] [--jobs 2]`.
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.speedscope_doc import speedscope  # noqa: E402 - as the time tests build them

RATE = 100
EVAL_EVERY = 50
"""Steps between evaluations (~11 s at these durations: one or two per capture)."""
FRAME = "{name} ({file}:{line})"
TRAIN = "/work/job/train.py"
MODEL = "/work/job/model.py"
SITE = "/usr/lib/python3.11/site-packages/torch"
ROOT_FRAMES = [f"<module> ({TRAIN}:212)", f"main ({TRAIN}:190)", f"train ({TRAIN}:160)"]
STEP = [*ROOT_FRAMES, f"train_step ({TRAIN}:120)"]
MODULE = f"{SITE}/nn/modules/module.py"


# --- the job ---------------------------------------------------------------------------


def _layer(name: str, line: int) -> list[str]:
    return [
        f"_wrapped_call_impl ({MODULE}:1736)",
        f"_call_impl ({MODULE}:1747)",
        f"{name} ({MODEL}:{line})",
    ]


def stacks() -> dict[str, list[list[str]]]:
    """The step thread's stacks by phase (a sample picks one of its phase's at random)."""
    ops = ["linear", "layer_norm", "gelu", "softmax", "matmul", "dropout"]
    tails = [
        ["at::_ops::{op}::call (libtorch_cpu.so)", "cudaLaunchKernel (libcudart.so.12)"],
        ["at::_ops::{op}::call (libtorch_cpu.so)", "at::native::{op}_cuda (libtorch_cuda.so)"],
    ]
    forward = [
        [
            *STEP,
            *_layer("forward", 88),
            *_layer(sub, line),
            f"{op} ({SITE}/nn/functional.py:{2000 + 7 * len(op)})",
            *[t.format(op=op) for t in tail],
        ]
        for sub, line in (("attention", 61), ("mlp", 75), ("norm", 30))
        for op in ops
        for tail in tails
    ]
    engine = "torch::autograd::Engine::{f} (libtorch_cpu.so)"
    backward = [
        [
            *STEP,
            f"backward ({SITE}/_tensor.py:626)",
            f"_engine_run_backward ({SITE}/autograd/graph.py:823)",
            engine.format(f="execute"),
            f"torch::autograd::generated::{op.title()}Backward0::apply (libtorch_cpu.so)",
            *[t.format(op=op) for t in tail],
        ]
        for op in ops
        for tail in tails
    ]
    optimizer = [
        [
            *STEP,
            f"step ({SITE}/optim/adamw.py:220)",
            f"_multi_tensor_adamw ({SITE}/optim/adamw.py:{600 + i})",
            "at::_ops::_foreach_mul_::call (libtorch_cpu.so)",
        ]
        for i in range(8)
    ]
    data = [
        [
            *ROOT_FRAMES,
            f"__next__ ({SITE}/utils/data/dataloader.py:701)",
            f"_next_data ({SITE}/utils/data/dataloader.py:1448)",
            "get (/usr/lib/python3.11/queue.py:180)",
            "wait (/usr/lib/python3.11/threading.py:359)",
            "PyThread_acquire_lock_timed (libpython3.11.so.1.0)",
            "pthread_cond_timedwait (libc.so.6)",
        ]
    ]
    allreduce = [
        [
            *STEP,
            f"backward ({SITE}/_tensor.py:626)",
            f"_engine_run_backward ({SITE}/autograd/graph.py:823)",
            engine.format(f="execute"),
            "c10d::Reducer::finalize_backward (libtorch_cpu.so)",
            "c10d::Work::wait (libtorch_cpu.so)",
            "std::condition_variable::wait (libstdc++.so.6)",
            "pthread_cond_wait (libc.so.6)",
        ]
    ]
    item = [
        [
            *STEP,
            f"log_loss ({TRAIN}:131)",
            "at::_ops::_local_scalar_dense::call (libtorch_cpu.so)",
            "cudaStreamSynchronize (libcudart.so.12)",
        ]
    ]
    evaluate = [[*ROOT_FRAMES, f"evaluate ({TRAIN}:71)", *s[len(STEP) :]] for s in forward]
    return {
        "data": data,
        "forward": forward,
        "backward": backward,
        "optimizer": optimizer,
        "item": item,
        "allreduce": allreduce,
        "evaluate": evaluate,
    }


STACKS = stacks()


LOADER = {
    "load": [
        [
            "_bootstrap (/usr/lib/python3.11/threading.py:1002)",
            "run (/usr/lib/python3.11/threading.py:982)",
            f"produce ({TRAIN}:{line})",
            f"decode ({TRAIN}:{40 + line % 3})",
        ]
        for line in (52, 53, 55)
    ],
    "put": [
        [
            "_bootstrap (/usr/lib/python3.11/threading.py:1002)",
            "run (/usr/lib/python3.11/threading.py:982)",
            f"produce ({TRAIN}:58)",
            "put (/usr/lib/python3.11/queue.py:140)",
            "wait (/usr/lib/python3.11/threading.py:355)",
            "PyThread_acquire_lock_timed (libpython3.11.so.1.0)",
            "pthread_cond_timedwait (libc.so.6)",
        ]
    ],
}


class Job:
    """The job's parameters (seconds); `allreduce_mean` is what a planted change moves."""

    def __init__(self, allreduce_mean: float = 0.060) -> None:
        self.data_p, self.data_burst, self.data_short = 0.15, 0.120, 0.003
        self.forward, self.backward, self.optimizer = (0.045, 0.010), (0.060, 0.014), (0.015, 0.005)
        self.item = 0.008
        self.allreduce_mean = allreduce_mean
        self.eval_s = (0.8, 0.1)

    def other_mean(self) -> float:
        """Mean seconds per step outside the all-reduce (evaluation spread over steps)."""
        data = self.data_p * self.data_burst + (1 - self.data_p) * self.data_short
        compute = self.forward[0] + self.backward[0] + self.optimizer[0]
        return data + compute + self.item + self.eval_s[0] / EVAL_EVERY

    def collective_share(self) -> float:
        return self.allreduce_mean / (self.other_mean() + self.allreduce_mean)

    def with_share(self, share: float) -> Job:
        """The same job with the all-reduce mean that gives this collective share."""
        return Job(allreduce_mean=share * self.other_mean() / (1 - share))


def _normal(rng: random.Random, mean_sd: tuple[float, float]) -> float:
    return max(0.002, rng.gauss(*mean_sd))


def step_segments(job: Job, rng: random.Random, seconds: float) -> tuple[list[float], list[str]]:
    """The step thread's phases over `seconds`: (end times, phase names)."""
    ends: list[float] = []
    phases: list[str] = []
    now, step = rng.uniform(0, 0.2), rng.randrange(EVAL_EVERY)
    while now < seconds:
        burst = rng.random() < job.data_p
        parts = [
            ("data", rng.expovariate(1 / (job.data_burst if burst else job.data_short))),
            ("forward", _normal(rng, job.forward)),
            ("backward", _normal(rng, job.backward)),
            ("allreduce", rng.expovariate(1 / job.allreduce_mean)),
            ("optimizer", _normal(rng, job.optimizer)),
            ("item", rng.expovariate(1 / job.item)),
        ]
        step += 1
        if step % EVAL_EVERY == 0:
            parts.append(("evaluate", _normal(rng, job.eval_s)))
        for phase, duration in parts:
            now += duration
            ends.append(now)
            phases.append(phase)
    return ends, phases


def loader_segments(rng: random.Random, seconds: float) -> tuple[list[float], list[str]]:
    ends: list[float] = []
    phases: list[str] = []
    now = 0.0
    while now < seconds:
        for phase, mean in (("load", 0.050), ("put", 0.080)):
            now += rng.expovariate(1 / mean)
            ends.append(now)
            phases.append(phase)
    return ends, phases


def sampled(
    segments: tuple[list[float], list[str]], table: dict, rng: random.Random, start: float, n: int
) -> list[list[str]]:
    """n samples from `start` at RATE Hz (py-spy's jitter: a sample within its round)."""
    ends, phases = segments
    out = []
    for k in range(n):
        t = start + (k + rng.random()) / RATE
        phase = phases[min(bisect.bisect_right(ends, t), len(phases) - 1)]
        out.append(rng.choice(table[phase]))
    return out


def run_segments(job: Job, seed: int, seconds: float) -> tuple:
    """One continuous run's phases (the step thread's and the loader's) over `seconds`."""
    rng = random.Random(seed)
    return step_segments(job, rng, seconds + 1), loader_segments(rng, seconds + 1)


def capture_doc(run: tuple, seed: int, index: int, seconds: float) -> str:
    """Capture `index` of a run cut into back-to-back captures: its speedscope document
    (its own random stream for the sampling, so captures can be built in any order)."""
    rng = random.Random(seed * 1_000_003 + index)
    n = round(seconds * RATE)
    start = index * seconds
    steps, loader = run
    return speedscope(
        [
            (1001, "MainThread", sampled(steps, STACKS, rng, start, n)),
            (1017, "loader", sampled(loader, LOADER, rng, start, n)),
        ],
        rate=RATE,
    )


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def analysed(doc: str, start: float, seconds: float) -> dict[str, Any]:
    """One capture's stored stats, as profiles.captures.analysis builds them."""
    from django.conf import settings

    from profiles import pyspy
    from profiles.captures.analysis import engine_outputs, timed_outputs
    from profiles.pyspy.formats.split import split_speedscope
    from profiles.pyspy.formats.time_track import track_json

    split = split_speedscope(doc, start=start, end=start + seconds, rate=RATE, idle=True)
    options = pyspy.AnalysisOptions(
        keywords=tuple(pyspy.GPU_KEYWORDS),
        max_nodes=settings.FLAMEDECK_FLAMEGRAPH_NODES,
        idle=True,
    )
    with tempfile.TemporaryDirectory() as folder:
        raw, track = Path(folder, "raw.txt"), Path(folder, "time.json")
        raw.write_text(split.raw_text)
        track.write_text(track_json(split.track))
        stats, _tree, _tables, _export = engine_outputs(str(raw), options, None, "raw")
        names = stats["step_threads"]["names"]
        summary, stalls, _track = timed_outputs(str(raw), str(track), options, names)
    stats["time"] = summary
    stats["findings"] = [*stats.get("findings", []), *stalls]
    return stats


def analyse_runs(
    runs: list[tuple[float, int, int, float]], jobs: int, chunk: int = 25
) -> list[list[dict[str, Any]]]:
    """Each run's captures analysed, in parallel by chunks of consecutive captures (the
    run is simulated whole in each worker, same seed, so the chunks are one run)."""
    tasks, owners = [], []
    for r, (mean, seed, captures, seconds) in enumerate(runs):
        for first in range(0, captures, chunk):
            tasks.append((mean, seed, captures, seconds, first, min(captures, first + chunk)))
            owners.append(r)
    results: list[list[dict[str, Any]]] = [[] for _ in runs]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, initializer=_setup) as pool:
            outputs = list(pool.map(_analyse_chunk, tasks))
    else:
        outputs = [_analyse_chunk(t) for t in tasks]
    for r, out in zip(owners, outputs, strict=True):
        results[r].extend(out)
    return results


_RUNS: dict[tuple, tuple] = {}


def _analyse_chunk(task: tuple) -> list[dict[str, Any]]:
    mean, seed, captures, seconds, first, last = task
    key = (mean, seed, captures, seconds)
    if key not in _RUNS:
        _RUNS[key] = run_segments(Job(mean), seed, captures * seconds)
    run = _RUNS[key]
    return [
        analysed(capture_doc(run, seed, i, seconds), 1.8e9 + i * seconds, seconds)
        for i in range(first, last)
    ]


# --- the judgements --------------------------------------------------------------------


def without_effects(stats: dict[str, Any]) -> dict[str, Any]:
    """The stats as the old intervals saw them: samples independent."""
    return {**stats, "time": {**stats["time"], "design_effect": None}}


def judged(before: dict[str, Any], after: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(state rows compare_stats calls a real change, rows the watch's judge moved)."""
    from profiles.pyspy.compare.captures import REAL_CHANGE, compare_stats
    from profiles.pyspy.compare.comparable import pair_views
    from profiles.pyspy.compare.regression import judge

    compared = compare_stats(before, after)
    real = {r["name"] for r in compared["states"] if r["verdict"] == REAL_CHANGE}
    verdict = judge(*pair_views(before, after))
    moved = {r["key"] for r in verdict["moved"]}
    return real, moved


class Tally:
    def __init__(self) -> None:
        self.pairs = 0
        self.compare = 0
        self.watch = 0
        self.compare_rows: Counter[str] = Counter()
        self.watch_rows: Counter[str] = Counter()
        self.found_compare = 0
        self.found_watch = 0

    def add(self, real: set[str], moved: set[str]) -> None:
        self.pairs += 1
        self.compare += bool(real)
        self.watch += bool(moved)
        self.compare_rows.update(real)
        self.watch_rows.update(moved)
        self.found_compare += "collective" in real
        self.found_watch += "state:collective" in moved


def tallies(pairs: list[tuple[dict, dict]]) -> dict[str, Tally]:
    out = {"new": Tally(), "old": Tally()}
    for before, after in pairs:
        out["new"].add(*judged(before, after))
        out["old"].add(*judged(without_effects(before), without_effects(after)))
    return out


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}%" if d else "    -"


def _rows(counter: Counter[str], pairs: int, limit: int = 6) -> str:
    return ", ".join(f"{k} {_pct(n, pairs).strip()}" for k, n in counter.most_common(limit)) or "-"


def effects_summary(captures: list[dict[str, Any]]) -> str:
    """The median design effect of each step-scope state, and the blocks per capture."""
    found: dict[str, list[float]] = {}
    blocks = []
    for stats in captures:
        effects = stats["time"].get("design_effect") or {}
        blocks.append(effects.get("blocks", 0))
        for state, d in ((effects.get("step") or {}).get("states") or {}).items():
            found.setdefault(state, []).append(d)
    medians = {s: sorted(v)[len(v) // 2] for s, v in found.items()}
    shown = ", ".join(f"{s} {d:.1f}" for s, d in sorted(medians.items(), key=lambda kv: -kv[1]))
    return f"{sorted(blocks)[len(blocks) // 2]} blocks; step-thread states: {shown}"


def shares_summary(captures: list[dict[str, Any]]) -> str:
    """Mean and sd across captures of each step-thread state's share (points)."""
    per: dict[str, list[float]] = {}
    for stats in captures:
        step = stats["step_threads"]
        for row in step["states"]:
            per.setdefault(row["state"], []).append(row["percent"])
    out = []
    for state, values in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        values += [0.0] * (len(captures) - len(values))
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))
        out.append(f"{state} {mean:.1f}+-{sd:.1f}")
    return ", ".join(out)


def step_share(stats: dict[str, Any], state: str) -> float:
    rows = stats["step_threads"]["states"]
    return next((r["percent"] for r in rows if r["state"] == state), 0.0)


def planted_summary(unchanged: list[dict], runs: list[tuple[str, list[dict]]]) -> str:
    """The collective share each run really has, and the sd of the difference of two
    back-to-back captures of the unchanged job (what a planted change is measured in)."""
    shares = [step_share(s, "collective") for s in unchanged]
    diffs = [b - a for a, b in zip(shares, shares[1:], strict=False)]
    sd = math.sqrt(sum(d * d for d in diffs) / max(1, len(diffs)))
    out = [f"unchanged {sum(shares) / len(shares):.1f}%"]
    for label, captures in runs:
        if captures:
            mean = sum(step_share(s, "collective") for s in captures) / len(captures)
            out.append(f"{label} {mean:.1f}%")
    return f"{', '.join(out)}; sd of a back-to-back difference {sd:.1f} points"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--captures", type=int, default=300, help="back-to-back captures")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per capture")
    parser.add_argument("--planted", type=int, default=100, help="pairs per planted change")
    parser.add_argument("--strong", type=float, default=10.0, help="points (collective)")
    parser.add_argument("--weak", type=float, default=5.0, help="points (collective)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-intervals-") as var:
        os.environ.setdefault("FLAMEDECK_VAR_DIR", var)  # the workers inherit it
        _setup()
        report(args)


def report(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    base = Job()
    share = base.collective_share()
    strong = base.with_share(share + args.strong / 100)
    weak = base.with_share(share + args.weak / 100)
    runs = [
        (base.allreduce_mean, args.seed, args.captures, args.seconds),
        (strong.allreduce_mean, args.seed + 1, args.planted, args.seconds),
        (weak.allreduce_mean, args.seed + 2, args.planted, args.seconds),
    ]
    unchanged, grown, grown_weak = analyse_runs(runs, args.jobs)
    analysed_s = time.perf_counter() - began
    count = args.captures + 2 * args.planted
    print(
        f"{args.captures} back-to-back captures of {args.seconds:g} s at {RATE} Hz "
        f"(seed {args.seed}), + 2 x {args.planted} planted; analysed {count} captures "
        f"in {analysed_s:.1f} s ({1000 * analysed_s / count * args.jobs:.0f} ms each, "
        f"{args.jobs} workers)"
    )
    print(f"step-thread shares across captures (percent): {shares_summary(unchanged)}")
    print(f"design effects (median): {effects_summary(unchanged)}")
    print(
        f"planted: all-reduce mean {1000 * base.allreduce_mean:.0f} ms -> "
        f"{1000 * strong.allreduce_mean:.0f} ms (+{args.strong:g} points expected) and "
        f"{1000 * weak.allreduce_mean:.0f} ms (+{args.weak:g})"
    )
    labels = [(f"+{args.strong:g}", grown), (f"+{args.weak:g}", grown_weak)]
    print(f"step-thread collective share: {planted_summary(unchanged, labels)}")
    started = time.perf_counter()
    null = tallies(list(zip(unchanged, unchanged[1:], strict=False)))
    found = tallies(list(zip(unchanged, grown, strict=False)))
    found_weak = tallies(list(zip(unchanged, grown_weak, strict=False)))
    judged_s = time.perf_counter() - started
    pairs = null["new"].pairs
    print()
    print(f"{'':34} {'new (blocks)':>13} {'old (indep.)':>13}")
    print(f"{'compare: false alarms, any state':34}", end="")
    print(f" {_pct(null['new'].compare, pairs):>13} {_pct(null['old'].compare, pairs):>13}")
    print(f"{'watch:   false alarms (changed)':34}", end="")
    print(f" {_pct(null['new'].watch, pairs):>13} {_pct(null['old'].watch, pairs):>13}")
    for label, result in ((f"+{args.strong:g}", found), (f"+{args.weak:g}", found_weak)):
        n = result["new"].pairs
        print(f"{f'compare: {label} points collective found':34}", end="")
        print(
            f" {_pct(result['new'].found_compare, n):>13} "
            f"{_pct(result['old'].found_compare, n):>13}"
        )
        print(f"{f'watch:   {label} points collective found':34}", end="")
        print(f" {_pct(result['new'].found_watch, n):>13} {_pct(result['old'].found_watch, n):>13}")
    print()
    for side in ("new", "old"):
        print(f"false alarms by row, {side}:")
        print(f"  compare: {_rows(null[side].compare_rows, pairs)}")
        print(f"  watch:   {_rows(null[side].watch_rows, pairs)}")
    print()
    print(
        f"{pairs} unchanged pairs, 2 x {found['new'].pairs} planted pairs, each judged "
        f"new and old in {judged_s:.1f} s; wall time {time.perf_counter() - began:.1f} s"
    )


if __name__ == "__main__":
    main()
