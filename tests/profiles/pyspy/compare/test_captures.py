"""Comparing two captures (profiles/pyspy/compare/captures.py): verdicts on shares, frames
and states, and differential trees (the intervals themselves: stats/test_intervals.py)."""

import random

from profiles.pyspy.compare import captures as compare


def stats(total, categories=(), keywords=(), top_self=(), top_total=(), lag=None):
    def rows(pairs, key):
        return [{key: n, "samples": s, "percent": round(100 * s / total, 2)} for n, s in pairs]

    return {
        "total_samples": total,
        "categories": rows(categories, "category"),
        "keywords": [
            {"keyword": k, "category": c, "samples": s, "percent": round(100 * s / total, 2)}
            for k, c, s in keywords
        ],
        "top_self": rows(top_self, "frame"),
        "top_total": rows(top_total, "frame"),
        "lag": lag,
    }


def test_a_two_point_move_on_300_samples_is_within_noise():
    assert compare.change_verdict((90, 300), (96, 300)) == "within noise"


def test_a_drop_from_31_to_6_percent_on_2000_samples_is_a_real_change():
    assert compare.change_verdict((620, 2000), (120, 2000)) == "real change"


def test_the_same_two_point_move_on_many_samples_is_a_real_change():
    assert compare.change_verdict((30_000, 100_000), (32_000, 100_000)) == "real change"


def test_a_capture_without_samples_gives_no_verdict():
    assert compare.change_verdict((0, 0), (10, 100)) == "not measured"


def test_category_rows_carry_both_shares_their_intervals_and_the_change():
    before = stats(2000, categories=[("sync", 620), ("launch", 200)])
    after = stats(2000, categories=[("sync", 120), ("launch", 210)])
    rows = {r["name"]: r for r in compare.compare_categories(before, after)}
    sync = rows["sync"]
    assert sync["before"]["percent"] == 31.0 and sync["after"]["percent"] == 6.0
    assert sync["before"]["low"] < 31.0 < sync["before"]["high"]
    assert sync["delta_points"] == -25.0
    assert sync["delta_low"] < -25.0 < sync["delta_high"] < 0
    assert sync["verdict"] == "real change"
    assert rows["launch"]["verdict"] == "within noise"


def test_real_changes_are_listed_first():
    before = stats(2000, categories=[("launch", 200), ("sync", 620)])
    after = stats(2000, categories=[("launch", 210), ("sync", 120)])
    assert [r["name"] for r in compare.compare_categories(before, after)] == ["sync", "launch"]


def test_a_keyword_missing_from_one_keyword_set_is_not_measured_rather_than_zero():
    before = stats(300, keywords=[("nccl", "comm", 30)])
    after = stats(300, keywords=[("nccl", "comm", 30), ("futex", "wait", 60)])
    rows = {r["name"]: r for r in compare.compare_keywords(before, after)}
    assert rows["futex"]["verdict"] == "not measured"
    assert rows["futex"]["before"] is None and rows["futex"]["delta_points"] is None
    assert rows["futex"]["category"] == "wait"
    assert rows["nccl"]["verdict"] == "within noise"


def test_a_frame_in_both_top_lists_has_an_exact_delta():
    before = stats(1000, top_self=[("cuStreamSynchronize (libcuda.so.1)", 300), ("f", 10)])
    after = stats(1000, top_self=[("cuStreamSynchronize (libcuda.so.1)", 60), ("f", 10)])
    row = compare.compare_frames(before, after, "top_self")[0]
    assert row["frame"].startswith("cuStreamSynchronize")
    assert (row["before_percent"], row["after_percent"]) == (30.0, 6.0)
    assert row["delta_points"] == -24.0 and row["delta_bound"] == "exact"
    assert row["verdict"] == "real change"


def test_a_frame_that_left_the_top_list_gets_a_bound_not_a_made_up_zero():
    before = stats(1000, top_self=[("gone", 300), ("f", 20)])
    after = stats(1000, top_self=[("f", 20), ("g", 15)])
    row = next(r for r in compare.compare_frames(before, after, "top_self") if r["frame"] == "gone")
    assert row["after_percent"] is None and row["after_below"] == 1.5
    assert row["delta_bound"] == "at most" and row["delta_points"] == -28.5
    assert row["verdict"] == "real change"


def test_a_bound_that_does_not_fix_the_direction_is_within_noise():
    before = stats(1000, top_self=[("small", 5), ("f", 200)])
    after = stats(1000, top_self=[("f", 200), ("g", 100)])
    row = next(
        r for r in compare.compare_frames(before, after, "top_self") if r["frame"] == "small"
    )
    assert row["delta_bound"] == "at most" and row["delta_points"] > 0
    assert row["verdict"] == "within noise"


def test_lag_on_either_side_is_reported_and_ok_lag_is_not():
    lag_bad = {"verdict": "unreliable", "max_behind_s": 4.2, "recommended_rate": 10}
    warnings = compare.lag_warnings(stats(10, lag={"verdict": "ok"}), stats(10, lag=lag_bad))
    assert warnings == [
        {"side": "after", "verdict": "unreliable", "max_behind_s": 4.2, "recommended_rate": 10}
    ]
    assert compare.lag_warnings(stats(10), stats(10)) == []


def test_the_comparison_names_its_method_and_its_independence_assumption():
    result = compare.compare_stats(stats(10), stats(20))
    assert result["before_samples"] == 10 and result["after_samples"] == 20
    assert "Wilson" in result["method"]["share"]
    assert "Newcombe" in result["method"]["difference"]
    assert "optimistic" in result["method"]["assumption"]


def tree(name, value, *children, **extra):
    return {"name": name, "value": value, "children": list(children), **extra}


BEFORE = tree("all", 100, tree("main", 100, tree("sync", 60), tree("compute", 40)))
AFTER = tree("all", 200, tree("main", 200, tree("sync", 20), tree("compute", 140), tree("new", 40)))


def names(node):
    return {c["name"]: c for c in node["children"]}


def test_the_after_tree_is_coloured_by_the_change_in_normalised_share():
    diff = compare.diff_flamegraph(AFTER, BEFORE, shown_is_after=True)
    main = names(diff)["main"]
    kids = names(main)
    assert diff["value"] == 200 and diff["delta"] == 0.0
    assert kids["sync"]["delta"] == -50.0  # 60% -> 10%
    assert kids["compute"]["delta"] == 30.0  # 40% -> 70%
    assert kids["new"]["delta"] == 20.0 and kids["new"]["other_value"] == 0


def test_the_before_tree_shows_frames_that_vanished_as_shrinkage():
    after = tree("all", 100, tree("main", 100, tree("compute", 100)))
    diff = compare.diff_flamegraph(BEFORE, after, shown_is_after=False)
    kids = names(names(diff)["main"])
    assert diff["value"] == 100
    assert kids["sync"]["delta"] == -60.0 and kids["sync"]["other_value"] == 0
    assert kids["compute"]["delta"] == 60.0


def test_pruned_mass_nodes_have_no_delta():
    shown = tree("all", 10, tree("[pruned: 3 frames]", 10, pruned_frames=3))
    diff = compare.diff_flamegraph(shown, tree("all", 10), shown_is_after=True)
    assert names(diff)["[pruned: 3 frames]"]["delta"] is None


def test_a_stack_deeper_than_the_recursion_limit_is_diffed():
    deep = leaf = tree("root", 1)
    for depth in range(5000):
        child = tree(f"f{depth}", 1)
        leaf["children"].append(child)
        leaf = child
    diff = compare.diff_flamegraph(deep, deep)
    node, depth = diff, 0
    while node["children"]:
        node, depth = node["children"][0], depth + 1
    assert depth == 5000 and node["delta"] == 0.0


def test_the_diff_does_not_depend_on_child_order():
    shuffled = tree(
        "all", 200, tree("main", 200, *random.sample(AFTER["children"][0]["children"], 3))
    )
    a = compare.diff_flamegraph(AFTER, BEFORE)
    b = compare.diff_flamegraph(shuffled, BEFORE)
    assert names(names(a)["main"]) == names(names(b)["main"])


def test_share_of_finds_a_category_or_keyword_and_says_none_when_unmeasured():
    s = stats(400, categories=[("sync", 100)], keywords=[("nccl", "comm", 40)])
    assert compare.share_of(s, "category", "sync")["percent"] == 25.0
    assert compare.share_of(s, "keyword", "nccl")["samples"] == 40
    assert compare.share_of(s, "category", "gil") is None
    assert compare.share_of(None, "category", "sync") is None


def state_rows(*pairs):
    total = sum(n for _, n in pairs)
    return [{"state": s, "samples": n, "percent": 100 * n / total} for s, n in pairs]


def test_states_compare_with_the_categories_maths_and_read_before_to_after():
    before = {**stats(1000), "states": state_rows(("compute", 380), ("collective", 620),
                                                  ("gil", 0))}  # fmt: skip
    after = {**stats(1000), "states": state_rows(("compute", 690), ("collective", 310),
                                                 ("gil", 0))}  # fmt: skip
    rows = {r["name"]: r for r in compare.compare_states(before, after)}
    assert set(rows) == {"compute", "collective"}  # no samples on either side: left out
    collective = rows["collective"]
    assert (collective["before"]["percent"], collective["after"]["percent"]) == (62.0, 31.0)
    assert collective["verdict"] == compare.REAL_CHANGE and collective["delta_high"] < 0
    assert collective == compare.share_row(
        "collective", compare.share_side(620, 1000), compare.share_side(310, 1000)
    )
    # Biggest move first; the same 31 points either way, so the larger share leads.
    assert [r["name"] for r in compare.compare_stats(before, after)["states"]] == [
        "compute",
        "collective",
    ]


def test_a_side_analysed_before_states_existed_is_not_measured():
    before = {"total_samples": 100, "categories": []}
    after = {"total_samples": 100, "states": state_rows(("compute", 100))}
    (row,) = compare.compare_states(before, after)
    assert (row["name"], row["before"], row["verdict"]) == ("compute", None, compare.NOT_MEASURED)
