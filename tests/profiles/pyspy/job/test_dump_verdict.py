"""The whole-job dump: each rank's step thread, classes of ranks standing at one call path,
the odd ranks, and a verdict (stuck, progressing, unclear) a paged engineer can read."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles.pyspy.core.frames import is_native, split_location
from profiles.pyspy.core.types import Stacks
from profiles.pyspy.job.dump_verdict import analyze_stacks
from tests.profiles.pyspy.typed_schema import problems

WAIT = [
    "<module> (train.py:99)",
    "main (train.py:93)",
    "all_reduce (torch/distributed/distributed_c10d.py:3252)",
    "c10d::Work::wait (libtorch_cpu.so)",
    "pthread_cond_wait (libc.so.6)",
    "0x7f00a3f16 (libc.so.6)",
]
LOCK = [
    "<module> (train.py:99)",
    "main (train.py:91)",
    "wait_for_lock (train.py:62)",
    "time_sleep (libpython3.11.so.1.0)",
    "clock_nanosleep (libc.so.6)",
]
JOIN = ["<module> (train.py:99)", "main (train.py:120)", "Thread.join (threading.py:1112)"]


def step(line):
    return ["<module> (train.py:99)", "main (train.py:93)", f"forward (train.py:{line})",
            "at::addmm (libtorch_cpu.so)"]  # fmt: skip


def frame(text):
    name, location = split_location(text)
    return {"name": name, "location": location, "native": is_native(text)}


def thread(stack, name="MainThread", tid=1, pid=1, active=False, rank=0):
    """A dump thread from a stack given root first; `rank` shifts its addresses, as
    another process's address space would."""
    frames = [frame(f) for f in reversed(stack)]
    for f in frames:
        if f["name"].startswith("0x"):
            f["name"] = hex(int(f["name"], 16) + (rank << 24))
    return {"pid": pid, "tid": tid, "name": name, "status": "", "active": active,
            "idle": not active, "gil": False, "frames": frames}  # fmt: skip


def job(stacks_by_rank, dumps=3):
    """Ranks `rank-N` whose main thread stands at the given stacks (one for every dump,
    or one per dump)."""
    ranks = []
    for r, stacks in enumerate(stacks_by_rank):
        per_dump = stacks if isinstance(stacks[0], list) else [stacks] * dumps
        ranks.append((f"rank-{r}", [[thread(s, tid=r, pid=r, rank=r)] for s in per_dump]))
    return ranks


def test_a_rank_standing_in_its_own_code_while_the_others_wait_is_named_with_both_places():
    report = analyze_stacks(job([WAIT, WAIT, LOCK, WAIT]))
    verdict = report["verdict"]
    assert verdict == {
        "kind": "stuck",
        "odd": ["rank-2"],
        "explanation": "rank-2 stands in `wait_for_lock (train.py:62)` (idle) while ranks "
        "0-1, 3 wait in a collective at `main (train.py:93)`; no step thread moved across "
        "3 dumps.",
        "user_frame": "wait_for_lock (train.py:62)",
        "state": "idle",
        "framework_frame": None,  # no training framework on these stacks
    }
    assert [c["ranks"] for c in report["classes"]] == [["rank-0", "rank-1", "rank-3"], ["rank-2"]]
    assert problems(report, Stacks) == []


def test_ranks_at_one_call_path_form_one_class_whatever_their_addresses():
    classes = analyze_stacks(job([WAIT] * 4))["classes"]
    (only,) = classes
    assert only["ranks"] == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert only["frames"] == WAIT[:-1]  # root first, the unsymbolised address left out
    assert (only["state"], only["user_frame"], only["moving"]) == (
        "collective",
        "main (train.py:93)",
        False,
    )


def test_step_threads_that_move_between_dumps_make_a_progressing_job_with_no_odd_rank():
    moving = [step(40), step(41), step(42)]
    report = analyze_stacks(job([moving, [step(41), step(40), step(40)], moving, WAIT]))
    assert report["verdict"]["kind"] == "progressing"
    assert report["verdict"]["odd"] == []
    assert "moved between the 3 dumps: the job is progressing" in report["verdict"]["explanation"]
    assert [r["moving"] for r in report["ranks"]] == [True, True, True, False]


def test_one_dump_per_rank_cannot_tell_stuck_from_progressing():
    verdict = analyze_stacks(job([WAIT, WAIT, LOCK, WAIT], dumps=1))["verdict"]
    assert verdict["kind"] == "unclear" and verdict["odd"] == ["rank-2"]
    assert verdict["explanation"].endswith("dump again (repeat 2 or more).")


def test_the_others_unmoved_in_a_collective_while_one_rank_moves_is_unclear():
    spinning = [step(40), step(41), step(40)]
    verdict = analyze_stacks(job([WAIT, WAIT, spinning, WAIT]))["verdict"]
    assert verdict["kind"] == "unclear" and verdict["odd"] == ["rank-2"]
    assert "only rank-2 moved across 3 dumps" in verdict["explanation"]


def test_a_rank_that_gave_fewer_dumps_is_said_and_counted():
    ranks = job([WAIT, WAIT, WAIT, LOCK])
    ranks[3] = (ranks[3][0], ranks[3][1][:1])
    report = analyze_stacks(ranks)
    assert report["ranks"][3]["dumps"] == 1 and report["ranks"][0]["dumps"] == 3
    assert report["verdict"]["kind"] == "stuck"
    assert report["verdict"]["explanation"].endswith(" rank-3 gave 1 dump of 3.")


def test_a_rank_in_another_collective_apart_from_the_waiting_majority_is_odd():
    collective = "barrier (torch/distributed/distributed_c10d.py:4800)"
    barrier = [*WAIT[:2], "teardown (train.py:130)", collective, *WAIT[3:]]
    verdict = analyze_stacks(job([WAIT, WAIT, barrier, WAIT]))["verdict"]
    assert verdict["odd"] == ["rank-2"] and verdict["state"] == "collective"
    assert verdict["explanation"].startswith(
        "rank-2 waits in a collective at `teardown (train.py:130)` while ranks 0-1, 3 wait"
    )


def test_no_rank_is_odd_without_a_majority_to_stand_apart_from():
    other = [*LOCK[:2], "load (train.py:70)", *LOCK[3:]]
    verdict = analyze_stacks(job([LOCK, other, LOCK, other]))["verdict"]
    assert verdict["odd"] == []
    assert verdict["explanation"].startswith("The ranks stand in 2 places, the most (ranks 0, 2)")


def test_the_step_thread_is_the_one_in_a_collective_over_a_main_thread_that_joins():
    trainer = [
        "Thread._bootstrap (threading.py:1002)",
        "Job.train (train.py:150)",
        "train_step (train.py:97)",
        *WAIT[2:],
    ]
    ranks = [
        (f"rank-{r}", [[thread(JOIN, tid=1), thread(trainer, "trainer", tid=2)]] * 2)
        for r in range(3)
    ]
    # The hung rank's trainer is in its own code: it is still the step thread (by name).
    lock = ["Thread._bootstrap (threading.py:1002)", "Job.train (train.py:150)", *LOCK[2:]]
    ranks.append(("rank-3", [[thread(JOIN, tid=1), thread(lock, "trainer", tid=2)]] * 2))
    report = analyze_stacks(ranks)
    assert [r["thread"] for r in report["ranks"]] == ["trainer"] * 4
    assert report["verdict"]["odd"] == ["rank-3"]
    assert report["verdict"]["user_frame"] == "wait_for_lock (train.py:62)"


def test_step_thread_names_given_for_the_run_choose_the_thread():
    ranks = [("rank-0", [[thread(WAIT, tid=1), thread(LOCK, "writer", tid=2)]] * 2)]
    assert analyze_stacks(ranks, ["writer"])["ranks"][0]["thread"] == "writer"
    assert analyze_stacks(ranks, ["2"])["ranks"][0]["thread"] == "writer"
    assert analyze_stacks(ranks)["ranks"][0]["thread"] == "MainThread"


def test_a_python_only_stack_of_an_inactive_thread_is_idle_and_of_an_active_one_compute():
    python_only = LOCK[:3]
    idle = analyze_stacks([("rank-0", [[thread(python_only, active=False)]])])
    busy = analyze_stacks([("rank-0", [[thread(python_only, active=True)]])])
    assert idle["ranks"][0]["state"] == "idle" and busy["ranks"][0]["state"] == "compute"


def test_empty_dumps_threads_and_stacks_give_an_unclear_verdict_not_an_error():
    assert analyze_stacks([]) == {
        "verdict": {"kind": "unclear", "odd": [], "user_frame": None, "state": None,
                    "explanation": "No rank gave a dump with a thread in it: nothing to tell.",
                    "framework_frame": None},
        "classes": [],
        "ranks": [],
    }  # fmt: skip
    report = analyze_stacks([("rank-0", []), ("rank-1", [[]]), ("rank-2", [[thread([])]])])
    assert report["verdict"]["kind"] == "unclear"
    assert [r["dumps"] for r in report["ranks"]] == [0, 1, 1]
    assert problems(report, Stacks) == []


def test_ranks_read_in_natural_order_and_the_biggest_class_comes_first():
    stacks = [LOCK if r == 7 else WAIT for r in range(12)]
    report = analyze_stacks(list(reversed(job(stacks))))
    assert [r["name"] for r in report["ranks"]][:3] == ["rank-0", "rank-1", "rank-2"]
    assert report["classes"][0]["ranks"][-1] == "rank-11"
    assert report["verdict"]["explanation"].startswith("rank-7 stands in")
    assert "while ranks 0-6, 8-11 wait" in report["verdict"]["explanation"]


def test_a_big_job_names_its_odd_ranks_in_short_and_the_rest_as_the_other_ranks():
    stacks = [LOCK if r % 8 == 3 else WAIT for r in range(64)]
    verdict = analyze_stacks(job(stacks, dumps=2))["verdict"]
    assert len(verdict["odd"]) == 8
    assert verdict["explanation"].startswith(
        "8 ranks: 3, 11, 19, 27, 35, …, 59 stand in `wait_for_lock (train.py:62)` (idle) "
        "while the other 56 ranks wait in a collective at `main (train.py:93)`"
    )


STACKS = [WAIT, LOCK, JOIN, step(40), step(41), [], ["0x7f01 (libc.so.6)"]]


@st.composite
def dumped_jobs(draw):
    ranks = []
    for r in range(draw(st.integers(0, 6))):
        dumps = []
        for _ in range(draw(st.integers(0, 3))):
            count = draw(st.integers(0, 2))
            name = st.sampled_from(["MainThread", "t", ""])
            active = st.sampled_from([True, False, None])
            dumps.append([
                thread(draw(st.sampled_from(STACKS)), draw(name), tid=t, pid=r,
                       active=draw(active), rank=r)
                for t in range(count)
            ])  # fmt: skip
        ranks.append((f"rank-{r}", dumps))
    return ranks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dumped_jobs(), st.sampled_from([(), ("t",), ("nobody",)]))
def test_any_dumps_give_a_verdict_in_the_documented_shape(ranks, step_names):
    report = analyze_stacks(ranks, step_names)
    assert problems(report, Stacks) == []
    names = sorted(name for name, _ in ranks)
    assert sorted(r["name"] for r in report["ranks"]) == names
    assert sorted(n for c in report["classes"] for n in c["ranks"]) == names
    assert set(report["verdict"]["odd"]) <= set(names)
    assert report["verdict"]["explanation"]
