"""Properties of the whole-job report on generated rank stats (zeros, idle-only ranks,
single ranks, ranks without collectives, missing keys, empty stats): analyze_job never
raises, and its output is the documented JobReport (profiles/pyspy/core/types.py)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles.pyspy.core.types import JobReport
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.rules.findings import RULES_BY_NAME
from profiles.pyspy.rules.state_rules import STATES
from tests.profiles.pyspy.typed_schema import problems

CALLERS = ["main (train.py:93)", "wait_for_lock (train.py:62)", "(no user frame)"]
FUNCTIONS = ["main (train.py)", "wait_for_lock (train.py)", "augment (train.py)"]
THREAD_NAMES = ["MainThread", "trainer", "loader", ""]
# A state's samples: mostly 0, or a few, or many (enough for findings to be judged).
COUNTS = st.one_of(st.just(0), st.just(0), st.integers(1, 5), st.integers(50, 400))
KNOWN_RULES = {*RULES_BY_NAME, "straggler", "stuck", "peer_or_device", "too_few_samples",
               "waits_hidden", "sampler_unreliable"}  # fmt: skip


@st.composite
def state_rows(draw, samples_by_state):
    rows = []
    for state, count in samples_by_state.items():
        frames = draw(st.lists(st.sampled_from(CALLERS), unique=True, max_size=2))
        shares = [count // (i + 1) for i in range(len(frames))]
        callers = [
            {"frame": f, "samples": n, "percent": 0.0} for f, n in zip(frames, shares, strict=True)
        ]
        rows.append({"state": state, "samples": count, "percent": 0.0, "user_callers": callers})
    return rows


@st.composite
def threads(draw, tid):
    counts = {state: draw(COUNTS) for state in draw(st.sets(st.sampled_from(STATES)))}
    samples = sum(counts.values())
    thread = {
        "name": draw(st.sampled_from(THREAD_NAMES)),
        "tid": tid,
        "pid": None,
        "samples": samples,
        "percent": 0.0,
        "states": draw(state_rows(counts)),
        "active_percent": draw(st.one_of(st.none(), st.floats(0, 100))),
    }
    for key in draw(st.sets(st.sampled_from(["states", "active_percent", "name", "samples"]))):
        if draw(st.integers(0, 5)) == 0:  # now and then a key is missing
            del thread[key]
    return thread


@st.composite
def functions(draw, thread):
    samples = thread.get("samples") or 0
    names = draw(st.lists(st.sampled_from(FUNCTIONS), unique=True, max_size=3))
    rows = [
        {"function": f, "frame": f.replace(")", ":9)"), "samples": draw(st.integers(0, samples))}
        for f in names
    ]
    return {"thread": thread.get("name", ""), "tid": thread["tid"], "samples": samples,
            "functions": [r for r in rows if r["samples"]]}  # fmt: skip


@st.composite
def rank_stats(draw):
    if draw(st.integers(0, 9)) == 0:
        return {}  # a failed capture: nothing stored
    rows = [draw(threads(tid)) for tid in range(1, draw(st.integers(0, 3)) + 1)]
    stats = {
        "total_samples": sum(t.get("samples") or 0 for t in rows),
        "threads": rows,
        "states": [],
        "idle_included": draw(st.sampled_from([True, False, None])),
        "rounds": draw(st.one_of(st.none(), st.integers(0, 500))),
        "thread_functions": [draw(functions(t)) for t in rows],
        "lag": draw(st.sampled_from([None, {"verdict": "unreliable", "achieved_fraction": 0.3}])),
    }
    for key in draw(st.sets(st.sampled_from(sorted(stats)))):
        if draw(st.integers(0, 3)) == 0:
            del stats[key]
    return stats


@st.composite
def jobs(draw):
    count = draw(st.integers(0, 6))
    return [(f"rank-{i}", draw(rank_stats())) for i in range(count)]


def check_report(report, names):
    assert problems(report, JobReport) == []
    assert sorted(r["name"] for r in report["ranks"]) == sorted(names)
    assert sorted(n for c in report["classes"] for n in c["ranks"]) == sorted(names)
    for finding in report["findings"]:
        assert finding["rule"] in KNOWN_RULES
        low, high = finding["interval"]
        assert low <= high
        assert set(finding.get("ranks", [])) <= set(names)
    for rank in report["ranks"]:
        for state in rank["states"]:
            assert 0 <= state["percent"] <= 100
    rules = [f["rule"] for f in report["findings"]]
    assert not ("stuck" in rules and "straggler" in rules)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs(), st.sampled_from([(), ("trainer",), ("nobody",)]))
def test_the_job_report_never_raises_and_matches_its_schema(ranks, step_names):
    check_report(analyze_job(ranks, step_names), [name for name, _ in ranks])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rank_stats(), min_size=1, max_size=1))
def test_a_single_rank_job_never_raises(stats):
    check_report(analyze_job([("rank-0", stats[0])]), ["rank-0"])
