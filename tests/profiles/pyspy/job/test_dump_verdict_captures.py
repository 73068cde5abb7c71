"""Real hung 4-rank gloo DDP jobs (tests/data/dumps, bench/recorders/record_dumps.py): the whole-job
dump names the planted rank and where it stands, and the recorded capture of the same
hang (tests/data/jobs/hung) has a `stuck` finding and no straggler finding.

Each case is also checked whole against its reviewed `stacks.expected.json` (rewrite with
FLAMEDECK_UPDATE_GOLDEN=1 after re-recording, then review the diff). The planted lines
are found by their markers in bench/targets/hang_train.py: after editing it, re-record."""

import json
import random
from pathlib import Path

import pytest

from profiles.pyspy.formats.dump import parse_dump
from profiles.pyspy.job.dump_verdict import analyze_stacks
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.jobcli import analyze_rank
from tests.profiles.pyspy.golden import check_golden

ROOT = Path(__file__).resolve().parents[4]
DUMPS = ROOT / "tests" / "data" / "dumps"
HUNG_JOB = ROOT / "tests" / "data" / "jobs" / "hung"
CASES = ["own_code", "skipped_collective", "loader_deadlock", "progressing"]


def marked(marker: str) -> str:
    """`hang_train.py:N`, the line of bench/targets/hang_train.py that carries `# marker`."""
    lines = (ROOT / "bench" / "targets" / "hang_train.py").read_text().splitlines()
    return f"hang_train.py:{next(i for i, line in enumerate(lines, 1) if f'# {marker}' in line)}"


def ranks_of(case: str) -> list[tuple[str, list]]:
    folder = DUMPS / case
    return [
        (f"rank-{r}", [parse_dump(p.read_text()) for p in sorted(folder.glob(f"rank-{r}.*.json"))])
        for r in range(4)
    ]


@pytest.mark.parametrize("case", CASES)
def test_each_dumped_job_matches_its_reviewed_stacks(case):
    check_golden("stacks", analyze_stacks(ranks_of(case)), data=DUMPS / case)


@pytest.mark.parametrize("case", CASES)
def test_the_order_the_ranks_come_in_changes_nothing(case):
    ranks = ranks_of(case)
    shuffled = random.Random(case).sample(ranks, len(ranks))
    assert analyze_stacks(shuffled) == analyze_stacks(ranks)


WAITING = f"train_step ({marked('WAITS_IN_ALL_REDUCE')})"
PLANTED = {  # case: (where the bad rank stands, its state)
    "own_code": (f"wait_for_lock ({marked('HANG_OWN_CODE')})", "idle"),
    "skipped_collective": (f"teardown ({marked('HANG_SKIPPED')})", "collective"),
    "loader_deadlock": (f"train ({marked('WAITS_FOR_BATCH')})", "data_wait"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_hung_job_is_stuck_on_the_planted_rank_at_the_planted_line(case):
    report = analyze_stacks(ranks_of(case))
    verdict, (frame, state) = report["verdict"], PLANTED[case]
    assert verdict["kind"] == "stuck"
    assert verdict["odd"] == ["rank-2"]
    assert (verdict["user_frame"], verdict["state"]) == (frame, state)
    assert verdict["explanation"].startswith(
        f"rank-2 {'waits' if state == 'collective' else 'stands'}"
    )
    assert f"`{frame}`" in verdict["explanation"]
    # DDP's all-reduce inside loss.backward(): the framework frame, then the user's line.
    said = "ranks 0-1, 3 wait in a collective in `Tensor.backward` (DDP backward), called from"
    assert f"{said} `{WAITING}`" in verdict["explanation"]
    assert waiting_framework(report) == ("Tensor.backward", "DDP backward", False)
    waiting, odd = report["classes"]
    assert waiting["ranks"] == ["rank-0", "rank-1", "rank-3"] and not waiting["moving"]
    assert (odd["ranks"], odd["user_frame"], odd["moving"]) == (["rank-2"], frame, False)


def test_the_loader_deadlocked_rank_waits_in_the_dataloaders_next_data():
    odd = analyze_stacks(ranks_of("loader_deadlock"))["classes"][1]
    assert any(f.startswith("_MultiProcessingDataLoaderIter._next_data (") for f in odd["frames"])


def test_the_waiting_ranks_wait_in_ddps_reducer_under_their_backward():
    waiting = analyze_stacks(ranks_of("own_code"))["classes"][0]
    assert "c10d::Reducer::finalize_backward (libtorch_cpu.so)" in waiting["frames"]
    assert waiting["frames"][-1] == "pthread_cond_wait (libc.so.6)"


def test_a_healthy_job_is_progressing_with_no_odd_rank():
    verdict = analyze_stacks(ranks_of("progressing"))["verdict"]
    assert verdict["kind"] == "progressing" and verdict["odd"] == []


def hung_report() -> dict:
    files = sorted(HUNG_JOB.glob("rank-*.txt"))
    stats = [analyze_rank(str(f), f"{f}.log", ()) for f in files]
    return dict(analyze_job([(f.name.split(".")[0], s) for f, s in zip(files, stats, strict=True)]))


def test_the_recorded_capture_of_the_hang_says_stuck_not_straggler():
    report = hung_report()
    check_golden("job", report, data=HUNG_JOB)
    rules = {f["rule"]: f for f in report["findings"]}
    assert "straggler" not in rules
    stuck = rules["stuck"]
    frame = f"wait_for_lock ({marked('HANG_OWN_CODE')})"
    assert stuck["ranks"] == ["rank-2"] and stuck["severity"] == "high"
    assert stuck["title"].startswith(f"rank-2 stands in `{frame}` (idle)")
    said = f"collectives in `Tensor.backward` (DDP backward), called from `{WAITING}`"
    assert said in stuck["advice"], stuck["advice"]


def waiting_framework(report) -> tuple[str, str, bool]:
    found = report["classes"][0]["framework_frame"]
    return found["function"], found["phase"], found["user_inside"]


def ranks_with_full_filenames(case: str) -> list[tuple[str, list]]:
    """The case's dumps as a py-spy that gives `filename` alone would write them."""
    folder, ranks = DUMPS / case, []
    for r in range(4):
        dumps = []
        for path in sorted(folder.glob(f"rank-{r}.*.json")):
            doc = json.loads(path.read_text())
            for frame in (f for thread in doc for f in thread["frames"]):
                frame.pop("short_filename", None)
            dumps.append(parse_dump(json.dumps(doc)))
        ranks.append((f"rank-{r}", dumps))
    return ranks


@pytest.mark.parametrize("case", CASES)
def test_dumps_with_full_filenames_only_read_as_py_spys_short_names(case):
    """No absolute file in the verdict, classes or ranks, and the very answer the dumps
    with py-spy's `short_filename` give."""
    report = analyze_stacks(ranks_with_full_filenames(case))
    assert report == analyze_stacks(ranks_of(case))
    assert "(/" not in json.dumps(report)


def test_a_dump_and_a_record_of_the_hang_name_the_planted_frame_alike():
    frame, _ = PLANTED["own_code"]
    dumped = analyze_stacks(ranks_with_full_filenames("own_code"))["verdict"]
    recorded = {f["rule"]: f for f in hung_report()["findings"]}["stuck"]
    assert dumped["user_frame"] == frame and f"`{frame}`" in recorded["title"]
