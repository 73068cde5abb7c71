"""Parallel layouts: the ranks' places said in words, and the whole-job report and dump
naming the parallel group of the ranks they single out; without layouts, nothing changes."""

import json

import pytest

from profiles.pyspy.job.dump_verdict import analyze_stacks
from profiles.pyspy.job.layout import MAX_COORDINATE, Layouts, layout_problem
from profiles.pyspy.job.report import analyze_job
from tests.profiles.pyspy.job.test_dump_verdict import LOCK, WAIT, job
from tests.profiles.pyspy.job.test_report import BASE, rank
from tests.profiles.pyspy.job.test_stuck import hung_rank, rules, waiting_rank


def grid(ranks: int, dp: int) -> dict[str, dict[str, int]]:
    """Ranks `rank-N` laid out as data-parallel replica N // stages, stage N % stages."""
    stages = ranks // dp
    return {f"rank-{n}": {"dp": n // stages, "pp": n % stages} for n in range(ranks)}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"dp": 7, "tp": 0, "pp": 3}, None),
        ({}, None),
        ({"dp_shard": 1, "dp_replicate": 0, "cp": 0, "ep": 2, "sp": 0, "fsdp": 1}, None),
        ([7, 3], 'give an object of axis -> coordinate, e.g. {"dp": 7, "pp": 3}'),
        (
            {"dpp": 7},
            "unknown axis 'dpp': use cp, dp, dp_replicate, dp_shard, ep, fsdp, pp, sp, tp",
        ),
        ({"dp": "7"}, "dp: give a whole number"),
        ({"dp": True}, "dp: give a whole number"),
        ({"pp": -1}, f"pp: give a number from 0 to {MAX_COORDINATE}"),
        ({"pp": MAX_COORDINATE + 1}, f"pp: give a number from 0 to {MAX_COORDINATE}"),
        ({f"x{i}": 0 for i in range(9)}, "at most 8 axes"),
    ],
)
def test_a_layout_is_a_small_dict_of_known_axes_to_small_numbers(value, problem):
    assert layout_problem(value) == problem


def test_a_place_is_said_innermost_first_and_a_group_by_what_its_ranks_share():
    places = Layouts({**grid(32, dp=8), "rank-32": None, "rank-33": {"dp": 9, "tp": 9}})
    assert places.place(["rank-29"]) == "pipeline stage 1 of data-parallel replica 7"
    assert places.place(["rank-1", "rank-5"]) == "pipeline stage 1"
    assert places.place([f"rank-{n}" for n in range(4, 8)]) == "all of data-parallel replica 1"
    assert places.place(["rank-3", "rank-7", "rank-11"]) == "pipeline stage 3"
    assert places.place([f"rank-{n}" for n in range(3, 32, 4)]) == "all of pipeline stage 3"
    assert places.place(["rank-33"]) == "tensor-parallel rank 9 of data-parallel replica 9"
    # Nothing shared, a rank without a layout, or none known: nothing said.
    assert places.place(["rank-0", "rank-5"]) == ""
    assert places.place(["rank-0", "rank-32"]) == ""
    assert Layouts().named("rank-3", ["rank-3"]) == "rank-3"
    assert Layouts({"rank-0": {"dpp": 1}}).place(["rank-0"]) == ""


def test_the_dump_verdict_names_the_pipeline_stage_of_the_rank_that_stands_apart():
    ranks = job([WAIT, WAIT, LOCK, WAIT, WAIT, WAIT, WAIT, WAIT])
    report = analyze_stacks(ranks, layouts=grid(8, dp=2))
    assert report["verdict"]["explanation"] == (
        "rank-2 (pipeline stage 2 of data-parallel replica 0) stands in "
        "`wait_for_lock (train.py:62)` (idle) while ranks 0-1, 3-7 wait in a collective at "
        "`main (train.py:93)`; no step thread moved across 3 dumps."
    )
    waiting, odd = report["classes"]
    assert odd["ranks"] == ["rank-2"]
    assert odd["group"] == "pipeline stage 2 of data-parallel replica 0"
    assert "group" not in waiting  # ranks of every stage and replica share nothing


def test_a_whole_pipeline_stage_standing_apart_is_named_as_such():
    stacks = [LOCK if n % 4 == 3 else WAIT for n in range(8)]
    report = analyze_stacks(job(stacks), layouts=grid(8, dp=2))
    assert report["verdict"]["odd"] == ["rank-3", "rank-7"]
    assert report["verdict"]["explanation"].startswith(
        "ranks 3, 7 (all of pipeline stage 3) stand in `wait_for_lock (train.py:62)`"
    )


def test_the_straggler_and_its_finding_name_its_parallel_group():
    ranks = [(f"rank-{i}", rank(600, functions=BASE)) for i in range(3)]
    ranks.append(("rank-3", rank(30, functions={**BASE, "metric (train.py)": 400}, callers=None)))
    report = analyze_job(ranks, layouts=grid(4, dp=2))
    assert report["straggler"]["group"] == "pipeline stage 1 of data-parallel replica 1"
    (finding,) = [f for f in report["findings"] if f["rule"] == "straggler"]
    assert finding["title"] == (
        "The other ranks wait for rank-3 (pipeline stage 1 of data-parallel replica 1) "
        "in collectives"
    )
    assert (
        "for rank-3 (pipeline stage 1 of data-parallel replica 1), which spends"
        in (finding["advice"])
    )
    label = next(c["label"] for c in report["classes"] if c["ranks"] == ["rank-3"])
    assert label.startswith("rank 3 (pipeline stage 1 of data-parallel replica 1): 97% compute")


def test_the_stuck_finding_names_the_parallel_group_of_the_rank_that_hangs():
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1, 3)] + [("rank-2", hung_rank())]
    stuck = rules(analyze_job(ranks, layouts=grid(4, dp=2)))["stuck"]
    assert stuck["title"] == (
        "rank-2 (pipeline stage 0 of data-parallel replica 1) stands in "
        "`wait_for_lock (train.py:62)` (idle) while the other ranks wait in collectives"
    )
    assert (
        "while rank-2 (pipeline stage 0 of data-parallel replica 1) spends the window"
        in (stuck["advice"])
    )
    assert "Find out why rank-2 stands there" in stuck["advice"]


def test_without_layouts_or_with_empty_ones_the_reports_are_what_they_were():
    ranks = [(f"rank-{i}", waiting_rank()) for i in (0, 1, 3)] + [("rank-2", hung_rank())]
    plain = json.dumps(analyze_job(ranks))
    assert json.dumps(analyze_job(ranks, layouts={})) == plain
    assert json.dumps(analyze_job(ranks, layouts={"rank-2": None, "rank-0": {}})) == plain
    dumps = job([WAIT, WAIT, LOCK, WAIT])
    assert analyze_stacks(dumps, layouts={"rank-9": {"pp": 1}}) == analyze_stacks(dumps)
