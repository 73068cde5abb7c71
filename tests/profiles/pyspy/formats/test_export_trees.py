"""Exports of stored flamegraph trees (a whole job's download): the samples the tree
holds, folded or as one speedscope file a process at a time."""

import json

from profiles.pyspy import (
    AnalysisOptions,
    analyze,
    parse_profile_text,
    read_profile,
    to_folded,
    tree_to_folded,
    trees_to_speedscope,
)
from tests.profiles.pyspy.golden import DATA

WHOLE = AnalysisOptions(max_nodes=1_000_000)


def tree_of(name: str, options: AnalysisOptions = WHOLE) -> dict:
    return analyze(read_profile(DATA / name), options)["flamegraph"]


def test_an_unpruned_trees_folded_lines_are_the_samples_folded():
    for name in ("threads.txt", "native.txt", "subprocesses.txt"):
        profile = read_profile(DATA / name)
        assert sorted(tree_to_folded(tree_of(name))) == sorted(to_folded(profile)), name


def test_a_pruned_tree_still_folds_every_sample_under_the_prefix():
    tree = tree_of("native.txt", AnalysisOptions(max_nodes=40))
    lines = list(tree_to_folded(tree, "gpu01:7 rank;0"))
    assert all(line.startswith("gpu01:7 rank:0;") for line in lines)  # `;` would split
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == tree["value"]


def test_trees_become_one_speedscope_file_with_a_profile_per_process_thread():
    tree = tree_of("threads.txt")
    single = analyze(read_profile(DATA / "threads.txt"), WHOLE)
    doc = json.loads("".join(trees_to_speedscope([("rank-0", tree), ("rank-1", tree)], "job")))
    assert doc["name"] == "job" and doc["activeProfileIndex"] == 0
    expected = {
        f'{rank} · Thread {t["tid"]} "{t["name"]}"': t["samples"]
        for rank in ("rank-0", "rank-1")
        for t in single["threads"]
    }
    assert {p["name"]: sum(p["weights"]) for p in doc["profiles"]} == expected
    frames = [(f["name"], f.get("file"), f.get("line")) for f in doc["shared"]["frames"]]
    assert len(frames) == len(set(frames))  # the ranks share their frames
    again = analyze(parse_profile_text(json.dumps(doc)), AnalysisOptions(include_flamegraph=False))
    assert again["total_samples"] == 2 * single["total_samples"]


def test_no_trees_make_an_empty_but_valid_speedscope_file():
    doc = json.loads("".join(trees_to_speedscope([], "nothing")))
    assert doc["profiles"] == [] and doc["shared"] == {"frames": []}
