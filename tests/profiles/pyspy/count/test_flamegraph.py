"""Flamegraph JSON: budget, explicit pruned mass, thread selection on stored trees."""

from profiles.pyspy import (
    AnalysisOptions,
    analyze,
    parse_raw_lines,
    prune_flamegraph,
    read_profile,
    select_threads,
)
from tests.profiles.pyspy.golden import DATA


def walk(node):
    stack = [node]
    while stack:
        item = stack.pop()
        yield item
        stack.extend(item["children"])


def assert_well_formed(tree, max_nodes):
    nodes = list(walk(tree))
    assert len(nodes) <= max_nodes
    for node in nodes:
        assert sum(c["value"] for c in node["children"]) <= node["value"]
        assert sum(1 for c in node["children"] if "pruned_frames" in c) <= 1


def test_it_keeps_the_root_value_equal_to_total_samples_under_any_budget():
    profile = read_profile(DATA / "native.txt")
    for budget in (2, 3, 7, 50, 8192):
        stats = analyze(profile, AnalysisOptions(max_nodes=budget))
        assert stats["flamegraph"]["value"] == stats["total_samples"]
        assert_well_formed(stats["flamegraph"], budget)


def test_it_shows_pruned_mass_as_an_explicit_node_not_as_self_time():
    tree = analyze(parse_raw_lines(["a;b 5", "a;c 3", "a;d 2"]), AnalysisOptions(max_nodes=4))[
        "flamegraph"
    ]
    a = tree["children"][0]
    assert a["name"] == "a"
    assert [c["name"] for c in a["children"]] == ["b", "[pruned: 2 frames]"]
    assert a["children"][1]["value"] == 5
    assert a["children"][1]["pruned_frames"] == 2


def test_prune_flamegraph_prunes_a_stored_tree_like_the_engine_does():
    profile = read_profile(DATA / "subprocesses.txt")
    full = analyze(profile)["flamegraph"]
    for budget in (2, 10, 40):
        pruned = prune_flamegraph(full, budget)
        assert pruned["value"] == full["value"]
        assert_well_formed(pruned, budget)
        assert pruned == analyze(profile, AnalysisOptions(max_nodes=budget))["flamegraph"]


def test_prune_flamegraph_can_prune_an_already_pruned_tree():
    full = analyze(read_profile(DATA / "native.txt"), AnalysisOptions(max_nodes=60))["flamegraph"]
    again = prune_flamegraph(full, 12)
    assert again["value"] == full["value"]
    assert_well_formed(again, 12)


def test_select_threads_matches_the_engine_thread_filter():
    profile = read_profile(DATA / "subprocesses.txt")
    full = analyze(profile)["flamegraph"]
    wanted = frozenset({"target-0"})
    filtered = analyze(profile, AnalysisOptions(threads=wanted))
    assert select_threads(full, wanted) == filtered["flamegraph"]
    tid = str(filtered["threads"][0]["tid"])
    assert select_threads(full, {tid})["value"] == filtered["threads"][0]["samples"]


def test_select_threads_gives_an_empty_root_when_nothing_matches():
    full = analyze(read_profile(DATA / "threads.txt"))["flamegraph"]
    assert select_threads(full, {"nobody"}) == {"name": "all", "value": 0, "children": []}


def test_it_folds_frames_deeper_than_the_json_limit_into_a_pruned_node():
    deep = ";".join(f"f{i} (a.py:{i})" for i in range(1500)) + " 3"
    tree = analyze(parse_raw_lines([deep]), AnalysisOptions(max_nodes=5000))["flamegraph"]
    depth, node = 0, tree
    while node["children"]:
        node, depth = node["children"][0], depth + 1
    assert depth <= 401
    assert node["name"].startswith("[pruned:")
    assert node["value"] == 3
