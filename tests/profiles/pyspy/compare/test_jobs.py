"""profiles.pyspy.compare.jobs on small job reports: roles aligned by name, the others
listed apart, findings by rule and rank, functions per class."""

from profiles.pyspy.compare.jobs import compare_jobs, rank_functions


def rank(name: str, samples: int, **states: int) -> dict:
    rows = [{"state": s, "samples": n, "percent": 100 * n / samples} for s, n in states.items()]
    return {"name": name, "samples": samples, "states": rows}


def finding(rule: str, *ranks: str) -> dict:
    return {"rule": rule, "title": rule.title(), "severity": "high", "ranks": list(ranks)}


BEFORE = {
    "ranks": [
        rank("rank-0", 1000, compute=500, collective=500),
        rank("rank-1", 1000, compute=900, collective=100),
    ],
    "straggler": {"name": "rank-1"},
    "classes": [],
    "findings": [finding("straggler", "rank-1"), finding("data_starved", "rank-0")],
    "captures": {"rank-0": 10, "rank-1": 11},
}
AFTER = {
    "ranks": [
        rank("rank-0", 1000, compute=800, collective=200),
        rank("rank-2", 1000, compute=1000),
    ],
    "straggler": None,
    "classes": [{"label": "ranks 0, 2", "ranks": ["rank-0", "rank-2"]}],
    "findings": [finding("data_starved", "rank-0", "rank-2"), {"rule": "gil", "title": "GIL"}],
    "captures": {"rank-0": 20, "rank-2": 22},
}


def test_roles_both_have_are_compared_and_the_others_listed_apart():
    result = compare_jobs(BEFORE, AFTER)
    assert [r["role"] for r in result["roles"]] == ["rank-0"]
    assert (result["roles"][0]["a"], result["roles"][0]["b"]) == (10, 20)
    assert result["only_a"] == ["rank-1"] and result["only_b"] == ["rank-2"]
    collective = next(s for s in result["roles"][0]["states"] if s["state"] == "collective")
    assert (collective["a_percent"], collective["b_percent"], collective["delta"]) == (50, 20, -30)
    assert collective["verdict"] == "real change" and collective["interval"][1] < 0
    assert result["pooled"]["roles"] == 1


def test_findings_are_resolved_new_or_persisting_by_rule_and_rank():
    found = compare_jobs(BEFORE, AFTER)["findings"]
    assert [(f["rule"], f["ranks"]) for f in found["resolved"]] == [("straggler", ["rank-1"])]
    assert [(f["rule"], f["ranks"]) for f in found["new"]] == [
        ("data_starved", ["rank-2"]),
        ("gil", ["job"]),
    ]
    assert [(f["rule"], f["ranks"]) for f in found["persisting"]] == [("data_starved", ["rank-0"])]
    assert compare_jobs(BEFORE, AFTER)["straggler"] == {"a": {"name": "rank-1"}, "b": None}


def test_the_functions_that_moved_most_are_listed_per_class():
    functions_a = {"rank-0": (1000, {"load (train.py)": (100, "load (train.py:3)")})}
    functions_b = {
        "rank-0": (
            1000,
            {
                "load (train.py)": (400, "load (train.py:3)"),
                "step (train.py)": (1, "step (train.py:9)"),
            },
        )
    }
    rows = compare_jobs(BEFORE, AFTER, functions_a, functions_b)["functions"]
    assert rows[0]["function"] == "load (train.py)" and rows[0]["label"] == "ranks 0, 2"
    assert (rows[0]["a_percent"], rows[0]["b_percent"], rows[0]["delta"]) == (10, 40, 30)
    assert rows[0]["verdict"] == "real change" and rows[0]["ranks"] == ["rank-0"]


def test_a_ranks_functions_are_its_step_threads_only():
    stats = {
        "step_threads": {"tids": ["1"], "samples": 50},
        "thread_functions": [
            {
                "tid": 1,
                "functions": [{"function": "f (a.py)", "frame": "f (a.py:1)", "samples": 5}],
            },
            {
                "tid": 2,
                "functions": [{"function": "g (a.py)", "frame": "g (a.py:2)", "samples": 9}],
            },
        ],
    }
    assert rank_functions(stats) == (50, {"f (a.py)": (5, "f (a.py:1)")})
    assert rank_functions({}) == (0, {})


def test_a_page_of_roles_is_compared_one_by_one_and_every_class_pooled():
    before = {"ranks": [rank(f"rank-{n}", 100, compute=90, collective=10) for n in range(4)]}
    after = {
        "ranks": [rank(f"rank-{n}", 100, compute=50 if n == 3 else 90, collective=10)
                  for n in range(4)],
        "classes": [{"label": "ranks 0-2", "ranks": ["rank-0", "rank-1", "rank-2"]},
                    {"label": "rank 3", "ranks": ["rank-3"]}],
    }  # fmt: skip
    result = compare_jobs(before, after, roles=["rank-3", "rank-9", "rank-0"])
    assert [r["role"] for r in result["roles"]] == ["rank-3", "rank-0"]
    assert result["pooled"]["roles"] == 4
    assert [(c["label"], c["roles"]) for c in result["classes"]] == [
        ("ranks 0-2", 3),
        ("rank 3", 1),
    ]
    functions = {f"rank-{n}": (100, {"f (a.py)": (10 * n, "f (a.py:1)")}) for n in range(4)}
    rows = compare_jobs(
        before, after, functions, functions, function_classes=[("ranks 0-2", ["rank-1"])]
    )["functions"]
    assert all(row["ranks"] == ["rank-1"] for row in rows)
