"""The whole-job report from per-rank stats: the straggler only beyond noise and explained
by what it does more, classes of alike ranks, findings across ranks."""

from profiles.pyspy.job.report import CLASS_GAP, analyze_job, natural, ranks_label
from profiles.pyspy.job.straggler import STRAGGLER_GAP
from tests.profiles.pyspy.rules.test_findings import stats_of, thread


def rank(collective, n=1000, functions=None, tid=7, idle=True, rounds=None, **states):
    """One rank's stats: a trainer with `collective` (and other states) in samples and
    its user functions {function: samples}."""
    trainer = thread("trainer", n, tid=tid, collective=collective, **states)
    rows = [
        {
            "thread": "trainer",
            "tid": tid,
            "samples": n,
            "functions": [
                {"function": f, "frame": f.replace(")", ":10)"), "samples": c}
                for f, c in sorted((functions or {}).items(), key=lambda kv: -kv[1])
            ],
        }
    ]
    stats = stats_of(trainer, thread("loader", n, tid=tid + 1, backpressure=n - 10), idle=idle,
                     functions=rows)  # fmt: skip
    stats["rounds"] = rounds
    return stats


BASE = {"Job.train (train.py)": 1000, "train_step (train.py)": 990}


def test_the_straggler_is_the_rank_the_others_wait_for_explained_by_what_it_does_more():
    ranks = [(f"rank-{i}", rank(600, functions=BASE)) for i in range(3)]
    slow = {**BASE, "metric_per_sample (train.py)": 400}
    ranks.append(("rank-3", rank(30, functions=slow, callers=None)))
    report = analyze_job(ranks)
    straggler = report["straggler"]
    assert straggler["name"] == "rank-3"
    assert (straggler["wait_percent"], straggler["others_wait_percent"]) == (3.0, 60.0)
    first = straggler["explanation"][0]
    assert first["function"] == "metric_per_sample (train.py)"
    assert (first["percent"], first["others_percent"], first["delta"]) == (40.0, 0.0, 40.0)
    assert 0 < first["interval"][0] < 40 < first["interval"][1]
    assert all(item["delta"] > 0 for item in straggler["explanation"])
    (finding,) = [f for f in report["findings"] if f["rule"] == "straggler"]
    assert finding["ranks"] == ["rank-3"] and finding["value"] == 60.0
    assert "+40.0 pts more than them in `metric_per_sample (train.py)`" in finding["advice"]


def test_no_straggler_when_one_peer_waits_as_little_however_much_the_rest_wait():
    ranks = [("rank-0", rank(600)), ("rank-1", rank(600)), ("rank-2", rank(30)),
             ("rank-3", rank(30 + 10 * STRAGGLER_GAP - 20))]  # fmt: skip
    assert analyze_job(ranks)["straggler"] is None


def test_no_straggler_when_nobody_waits_in_collectives():
    ranks = [(f"rank-{i}", rank(c)) for i, c in enumerate([40, 60, 50, 5])]
    assert analyze_job(ranks)["straggler"] is None


def test_no_straggler_from_ranks_with_too_few_samples():
    assert analyze_job([("rank-0", rank(50, n=90)), ("rank-1", rank(2, n=90))])["straggler"] is None


def test_what_the_straggler_does_less_never_explains_it():
    ranks = [(f"rank-{i}", rank(600, functions={**BASE, "augment (train.py)": 300}))
             for i in range(3)]  # fmt: skip
    ranks.append(("rank-3", rank(30, functions=BASE)))
    explanation = analyze_job(ranks)["straggler"]["explanation"]
    assert "augment (train.py)" not in [i.get("function") for i in explanation]


def test_a_function_cut_from_the_others_top_lists_is_counted_at_its_most_there():
    """Others' lists are full (TOP_FUNCTIONS entries): a function missing there may hold up
    to their smallest entry, so the delta is not overstated."""
    many = {f"f{i} (train.py)": 30 for i in range(20)}
    ranks = [(f"rank-{i}", rank(600, functions=many)) for i in range(3)]
    ranks.append(("rank-3", rank(30, functions={"extra (train.py)": 100})))
    (item,) = [i for i in analyze_job(ranks)["straggler"]["explanation"] if "function" in i]
    assert item["others_percent"] == 3.0 and item["delta"] == 7.0


def test_a_waiting_state_at_a_call_site_explains_a_straggler_that_waits_for_its_own_input():
    ranks = [(f"rank-{i}", rank(800)) for i in range(3)]
    starved = rank(90, data_wait=700, callers={"data_wait": {"Job.train (train.py:151)": 700}})
    report = analyze_job([*ranks, ("rank-3", starved)])
    (item,) = report["straggler"]["explanation"]
    assert (item["state"], item["frame"]) == ("data_wait", "Job.train (train.py:151)")
    assert item["delta"] == 70.0
    assert "data_wait at `train.py:151` (in `Job.train`)" in report["findings"][0]["advice"]


def test_without_idle_samples_the_straggler_is_the_rank_blocked_least_of_its_rounds():
    """Without --idle a waiting trainer leaves no sample: 400 rounds, 150 samples seen."""
    ranks = [(f"rank-{i}", rank(10, n=150, idle=False, rounds=400)) for i in range(3)]
    slow = rank(10, n=380, idle=False, rounds=400, functions={"metric (train.py)": 190})
    report = analyze_job([*ranks, ("rank-3", slow)])
    assert report["straggler"]["name"] == "rank-3"
    assert report["straggler"]["others_wait_percent"] == 65.0  # 250 blocked + 10 of 400
    assert report["straggler"]["explanation"][0]["percent"] == 50.0  # of the samples seen


def test_alike_ranks_form_one_class_labelled_by_their_main_state_and_call_site():
    waits = {"collective": {"all_reduce_grads (train.py:97)": 600}}
    ranks = [(f"rank-{i}", rank(600, callers=waits)) for i in range(63)]
    odd = rank(20, functions={"augment (train.py)": 320})
    classes = analyze_job([*ranks, ("rank-63", odd)])["classes"]
    assert [len(c["ranks"]) for c in classes] == [63, 1]
    assert classes[0]["label"].startswith(
        "ranks 0-62: 60% collective at `train.py:97` (in `all_reduce_grads`)"
    )
    assert classes[1]["label"].endswith("; 32% in `augment (train.py)`")
    assert classes[1]["distinctive"]["function"] == "augment (train.py)"


def test_ranks_split_into_classes_only_beyond_noise_and_the_gap():
    near = [(f"rank-{i}", rank(600 + 10 * (i % 3))) for i in range(6)]
    far = ("rank-6", rank(600 - 10 * CLASS_GAP - 100))
    assert len(analyze_job(near)["classes"]) == 1
    assert len(analyze_job([*near, far])["classes"]) == 2


def test_a_class_split_by_a_state_says_which_state_and_by_how_much():
    """Split off by a state other than its main one, a class says how it differs: the
    live hostsync job's rank 1 read '57% compute' beside '49% compute' and nothing else."""
    ranks = [(f"rank-{i}", rank(380, compute=490, host_sync=130)) for i in (0, 2, 3)]
    ranks.append(("rank-1", rank(170, compute=570, host_sync=260)))
    classes = analyze_job(sorted(ranks))["classes"]
    assert [c["ranks"] for c in classes] == [["rank-0", "rank-2", "rank-3"], ["rank-1"]]
    assert classes[0]["label"].endswith("% compute; collective 38% (the other ranks 17%)")
    assert classes[1]["label"].endswith("% compute; collective 17% (the other ranks 38%)")
    # Where the main state is what differs, the label says it once.
    ranks[-1] = ("rank-1", rank(600, compute=390, host_sync=10))
    labels = [c["label"] for c in analyze_job(sorted(ranks))["classes"]]
    assert labels[1] == "rank 1: 60% collective", labels


def test_a_rank_with_the_same_states_but_a_function_of_its_own_is_a_class_of_its_own():
    """As in a live 4-rank gloo job: the slow rank spent 31% of its step thread in
    `metric_per_sample` (0% elsewhere), yet its states were within the gap of the
    others' (64% vs 54% compute), so the page read 'ranks 0-3' and named nothing."""
    ranks = [(f"rank-{i}", rank(450, functions=BASE, compute=540)) for i in range(3)]
    slow = {**BASE, "metric_per_sample (train.py)": 310}
    ranks.append(("rank-3", rank(350, functions=slow, compute=640)))
    report = analyze_job(ranks)
    assert report["straggler"] is None  # the waits differ by 10 points, not beyond them
    classes = report["classes"]
    assert [c["ranks"] for c in classes] == [["rank-0", "rank-1", "rank-2"], ["rank-3"]]
    assert classes[1]["distinctive"]["function"] == "metric_per_sample (train.py)"
    assert classes[1]["label"].endswith("; 31% in `metric_per_sample (train.py)`")
    # Within the gap (beyond noise or not), a function's share keeps ranks together.
    near = {**BASE, "metric_per_sample (train.py)": 50}
    ranks[3] = ("rank-3", rank(450, functions=near, compute=540))
    assert len(analyze_job(ranks)["classes"]) == 1
    # A function every rank runs, at different shares, splits nothing by itself: the
    # states say what differs (a label could not name it as the class's own).
    ranks = [(f"rank-{i}", rank(450, functions={**BASE, "log (train.py)": 400}, compute=540))
             for i in range(3)]  # fmt: skip
    ranks.append(("rank-3", rank(450, functions={**BASE, "log (train.py)": 150}, compute=540)))
    assert len(analyze_job(ranks)["classes"]) == 1


def test_a_rule_on_some_ranks_only_names_them_and_one_on_all_pools_them():
    ranks = [(f"rank-{i}", rank(300)) for i in range(3)]
    ranks.append(("rank-3", rank(300, host_sync=200)))
    ranks.append(("rank-4", rank(300, gil=200)))
    ranks = [*ranks, *((f"rank-{i}", rank(300, gil=200)) for i in range(5, 8))]
    found = {f["rule"]: f for f in analyze_job(ranks)["findings"]}
    assert found["host_sync"]["ranks"] == ["rank-3"] and found["host_sync"]["value"] == 20.0
    assert found["gil"]["ranks"] == ["rank-4", "rank-5", "rank-6", "rank-7"]
    assert found["gil"]["value"] == 10.0  # all eight ranks' step threads together


def test_ranks_read_in_natural_order_and_labels_fold_runs_of_numbers():
    assert sorted(["rank-10", "rank-2", "rank-1"], key=natural) == ["rank-1", "rank-2", "rank-10"]
    assert ranks_label(["rank-0", "rank-1", "rank-2", "rank-5", "rank-7", "rank-8"]) == (
        "ranks 0-2, 5, 7-8"
    )
    assert ranks_label(["rank-3"]) == "rank 3"
    assert ranks_label([f"rank-{i}" for i in range(1, 62, 3)]) == "21 ranks: 1, 4, 7, 10, 13, …, 61"
    assert ranks_label(["a", "b"]) == "a, b"
    assert ranks_label([f"h{i}x" for i in range(10)]).endswith("and 2 more")


def test_each_rank_lists_its_step_threads_states_and_every_thread():
    report = analyze_job([("rank-0", rank(600))])
    (row,) = report["ranks"]
    assert row["step_threads"] == ["trainer"] and row["detected_by"] == "collective"
    states = {s["state"]: s["percent"] for s in row["states"]}
    assert states["collective"] == 60.0 and states["compute"] == 40.0
    assert [t["name"] for t in row["threads"]] == ["trainer", "loader"]
    assert all("states" in t and "active_percent" in t for t in row["threads"])


def test_step_thread_names_given_for_the_job_override_the_guess():
    report = analyze_job([("rank-0", rank(600))], step_names=["loader"])
    assert report["ranks"][0]["step_threads"] == ["loader"]
    assert report["ranks"][0]["detected_by"] == "named"


def test_an_empty_job_reports_nothing():
    report = analyze_job([])
    model = report.pop("wait_model")
    assert report == {"ranks": [], "straggler": None, "classes": [], "findings": []}
    assert (model["kind"], model["waiting_states"], model["ranks"]) == (
        "blocking",
        ["collective"],
        [],
    )
