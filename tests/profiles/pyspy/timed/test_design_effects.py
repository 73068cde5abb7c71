"""Design effects (timed/design_effects.py): measured over time blocks of a capture with
time, they make every later interval count autocorrelated samples as the independent draws they are
worth; compare, the watch judge and the job report use them."""

import random

import pytest

from profiles.pyspy.compare.captures import (
    BLOCKS_ASSUMPTION,
    REAL_CHANGE,
    WITHIN_NOISE,
    compare_stats,
)
from profiles.pyspy.compare.comparable import pair_views
from profiles.pyspy.compare.regression import judge
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.stats.intervals import effective, pooled_effect, wilson_interval
from profiles.pyspy.timed.design_effects import design_effects, effect_of
from profiles.pyspy.timed.timed_capture import TimedCapture
from tests.profiles.pyspy.job.test_report import BASE, rank
from tests.profiles.pyspy.stats.test_batch_means import waits
from tests.profiles.pyspy.timeline_data import captured, speedscope

STEP = ["<module> (train.py:90)", "main (train.py:80)", "train_step (train.py:40)"]
WORK = [*STEP, "forward (model.py:12)"]
WAIT = [*STEP, "all_reduce (torch/distributed/distributed_c10d.py:2500)"]


def timed(series: list[int], rate: int = 100) -> TimedCapture:
    """One step thread sampled at `rate`: 1 is a collective wait, 0 the forward pass."""
    text = speedscope([(7, "MainThread", [WAIT if s else WORK for s in series])])
    seconds = len(series) / rate
    split = split_speedscope(text, start=0.0, end=seconds, rate=rate, idle=True)
    return TimedCapture(split.raw_text, split.track)


def test_a_markov_chain_of_waits_measures_the_design_effect_its_runs_imply():
    """Waits 10 samples long at a 30% share: lag-1 correlation 1 - 1/10 - 0.3/7 = 0.857,
    so (1 + rho) / (1 - rho) = 13 samples count as one."""
    effects = design_effects(timed(waits(random.Random(3), n=6000)))
    assert effects["blocks"] == 60 and effects["block_s"] == pytest.approx(1.0)
    collective = effects["step"]["states"]["collective"]
    assert 7 < collective < 22
    assert effects["all"]["states"]["collective"] == collective  # one thread: same scope
    functions = effects["step"]["functions"]
    assert functions["forward (model.py)"] == collective  # the complement varies as much
    assert functions["train_step (train.py)"] == 1.0  # on every sample: nothing varies
    assert effects["step"]["largest"] == max(
        [*effects["step"]["states"].values(), *effects["step"]["functions"].values()]
    )


def test_independent_samples_measure_about_one():
    rng = random.Random(5)
    effects = design_effects(timed([int(rng.random() < 0.3) for _ in range(3000)]))
    assert 1.0 <= effects["step"]["states"]["collective"] < 1.8


def test_wilson_on_the_effective_sample_size_covers_about_95_percent():
    """The naive interval covers under 75% of these chains (stats/test_batch_means.py); counted over
    the design effect it holds its level, 15 s at 100 Hz, 150 runs of the real pipeline."""
    rng, covered, runs = random.Random(11), 0, 150
    for _ in range(runs):
        series = waits(rng)
        deff = design_effects(timed(series))["step"]["states"]["collective"]
        low, high = wilson_interval(*effective((sum(series), len(series)), deff))
        covered += low <= 0.3 <= high
    assert 0.88 <= covered / runs <= 1.0


def test_a_capture_too_short_for_two_blocks_has_none():
    assert design_effects(timed([0, 1] * 60)) is None


def test_on_real_recordings_a_steady_job_is_near_one_and_a_periodic_evaluation_far_above():
    _, steady = captured("steady")
    assert all(v < 1.5 for v in design_effects(steady)["step"]["states"].values())
    _, periodic = captured("periodic_eval")
    functions = design_effects(periodic)["step"]["functions"]
    (evaluate,) = [v for f, v in functions.items() if f.startswith("evaluate (")]
    assert evaluate > 5  # three-second bursts: a window sees 4 or 5 of them


def test_effect_lookup_and_pooling():
    effects = {"states": {"collective": 4.0}, "functions": {"f": 9.0}, "largest": 9.0}
    assert effect_of(effects, "state", "collective") == 4.0
    assert effect_of(effects, "state", "idle") == 4.0  # not sampled there: the largest state
    assert effect_of(effects, "self", "frame") == 9.0
    assert effect_of(None, "state", "collective") == 1.0
    assert pooled_effect([(100, 2.0), (300, 6.0)]) == 5.0
    assert pooled_effect([]) == 1.0


def _stats(share: float, deff: float | None, n: int = 1500) -> dict:
    hits = round(share * n)
    states = [{"state": "collective", "samples": hits, "percent": 100 * share},
              {"state": "compute", "samples": n - hits, "percent": 100 - 100 * share}]  # fmt: skip
    scope = {"samples": n, "states": {"collective": deff, "compute": deff}, "functions": {},
             "largest": deff}  # fmt: skip
    effects = {"method": "m", "block_s": 1.0, "blocks": 15, "step": scope, "all": scope}
    return {
        "total_samples": n,
        "states": states,
        "categories": [],
        "keywords": [],
        "top_self": [],
        "top_total": [],
        "time": {"available": True, "design_effect": effects if deff else None},
    }


def test_compare_counts_samples_over_their_design_effect_and_says_so():
    """30% -> 36% of 1,500 samples: beyond noise for independent samples, within it when
    13 samples count as one; the side carries its design effect."""
    naive = compare_stats(_stats(0.30, None), _stats(0.36, None))
    honest = compare_stats(_stats(0.30, 13.0), _stats(0.36, 13.0))
    (row,) = [r for r in naive["states"] if r["name"] == "collective"]
    assert row["verdict"] == REAL_CHANGE and "design_effect" not in row["before"]
    (row,) = [r for r in honest["states"] if r["name"] == "collective"]
    assert row["verdict"] == WITHIN_NOISE and row["before"]["design_effect"] == 13.0
    assert row["delta_low"] < 0 < row["delta_high"]
    assert honest["method"]["assumption"] == BLOCKS_ASSUMPTION
    assert "optimistic" in naive["method"]["assumption"]
    one_sided = compare_stats(_stats(0.30, 13.0), _stats(0.36, None))["method"]["assumption"]
    assert "the after side keeps none" in one_sided


def test_the_watch_judge_counts_step_threads_over_their_design_effect():
    def step(stats):
        stats["step_threads"] = {"samples": stats["total_samples"], "tids": ["7"],
                                 "names": ["MainThread"], "states": stats["states"]}  # fmt: skip
        stats["threads"] = [{"tid": 7, "name": "MainThread", "states": []}]
        return stats

    naive = judge(*pair_views(step(_stats(0.30, None)), step(_stats(0.40, None))))
    honest = judge(*pair_views(step(_stats(0.30, 25.0)), step(_stats(0.40, 25.0))))
    assert naive["verdict"] == "changed" and naive["options"]["intervals"] == "independent samples"
    assert honest["verdict"] == "unchanged"
    assert honest["options"]["intervals"] == "design effects over time blocks"
    (row,) = [r for r in honest["rows"] if r["key"] == "state:collective"]
    assert row["before"]["design_effect"] == 25.0 and row["p_value"] > 0.05


def _timed(stats: dict, functions: dict[str, float]) -> dict:
    scope = {"samples": 1000, "states": {}, "functions": functions, "largest": 1.0}
    stats["time"] = {"available": True, "design_effect": {"step": scope, "all": scope}}
    return stats


def test_the_straggler_explanation_weighs_each_function_by_its_design_effect():
    """A function 6 points above the others' (9% against 3%) is named for independent
    samples; with 40 samples counting as one (a function in bursts) it is within noise
    and left out, while the big difference stays."""
    slow = {**BASE, "metric_per_sample (train.py)": 400, "log_step (train.py)": 90}
    others = {**BASE, "log_step (train.py)": 30}

    def explained(effect: float) -> list[str]:
        ranks = [(f"rank-{i}", _timed(rank(600, functions=others), {})) for i in range(3)]
        bursty = {"log_step (train.py)": effect, "metric_per_sample (train.py)": 1.0}
        ranks.append(("rank-3", _timed(rank(30, functions=slow, callers=None), bursty)))
        return [i.get("function") for i in analyze_job(ranks)["straggler"]["explanation"]]

    assert explained(1.0)[:2] == ["metric_per_sample (train.py)", "log_step (train.py)"]
    assert explained(40.0) == ["metric_per_sample (train.py)"]


def test_many_functions_tested_at_once_are_corrected_together():
    """Twenty functions each 3 points above the others' (13% against 10%: p = 0.008, beyond
    a 95% interval alone): Holm's correction over the family keeps none of them, and a
    function far above theirs stays."""
    extra = {f"f{i} (train.py)": 100 for i in range(20)}
    ranks = [(f"rank-{i}", rank(600, n=1000, functions={**BASE, **extra})) for i in range(3)]
    mine = {**BASE, **{f: 130 for f in extra}, "metric_per_sample (train.py)": 400}
    ranks.append(("rank-3", rank(30, n=1000, functions=mine, callers=None)))
    explanation = analyze_job(ranks)["straggler"]["explanation"]
    assert [i.get("function") for i in explanation] == ["metric_per_sample (train.py)"]


def test_a_compare_table_is_one_family_corrected_at_one_percent():
    """Six categories each 2 points up on 4,000 samples (p about 0.003 each, every
    interval clear of 0): alone each is a real change; as a table, Holm at 1% keeps only
    the one that moved far."""
    from profiles.pyspy.compare.captures import (
        family_verdicts,
        share_row,
        share_side,
    )

    rows = [share_row(f"c{i}", share_side(400, 4000), share_side(483, 4000)) for i in range(6)]
    assert all(r["verdict"] == REAL_CHANGE for r in rows)
    rows.append(share_row("far", share_side(400, 4000), share_side(800, 4000)))
    verdicts = {r["name"]: r["verdict"] for r in family_verdicts(rows)}
    assert verdicts == {**{f"c{i}": WITHIN_NOISE for i in range(6)}, "far": REAL_CHANGE}


def test_the_whole_job_compare_counts_each_ranks_samples_over_its_design_effect():
    """Four ranks 30% -> 36% collective on 1,500 samples each: a real change pooled over
    6,000 independent samples; within noise when each rank's samples count 25 to one."""
    from profiles.pyspy.compare.jobs import compare_jobs

    def report(share: float, deff: float | None) -> dict:
        ranks = []
        for i in range(4):
            hits = round(share * 1500)
            row = {"name": f"rank-{i}", "samples": 1500,
                   "states": [{"state": "collective", "samples": hits},
                              {"state": "compute", "samples": 1500 - hits}]}  # fmt: skip
            if deff:
                states = {"collective": deff, "compute": deff}
                row["design_effect"] = {"samples": 1500, "blocks": 15, "states": states,
                                        "functions": {}, "largest": deff}  # fmt: skip
            ranks.append(row)
        return {"ranks": ranks}

    def pooled(deff):
        states = compare_jobs(report(0.30, deff), report(0.36, deff))["pooled"]["states"]
        return next(s["verdict"] for s in states if s["state"] == "collective")

    assert pooled(None) == REAL_CHANGE
    assert pooled(25.0) == WITHIN_NOISE
