"""`python -m profiles.pyspy job`: one JSON object for the whole job, exit 2 with one
line on input it cannot use."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.pyspy import cli

JOB = Path(__file__).resolve().parents[2] / "data" / "jobs" / "straggler"
ROOT = Path(__file__).resolve().parents[3]


def rank_files(case: Path = JOB) -> tuple[list[str], list[str]]:
    files = sorted(str(p) for p in case.glob("rank-*") if not p.name.endswith(".log"))
    return files, [f"{f.removesuffix('.gz')}.log" for f in files]


def run_job(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["job", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_it_prints_ranks_straggler_classes_and_findings_of_the_real_job():
    files, logs = rank_files()
    done = subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", "job", *files, "--log", *logs],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"ranks", "straggler", "classes", "findings", "wait_model"}
    assert report["wait_model"]["kind"] == "blocking"  # a gloo job: collectives block
    assert [r["name"] for r in report["ranks"]] == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert all(t["active_percent"] is not None for r in report["ranks"] for t in r["threads"])
    assert report["straggler"]["name"] == "rank-3"


def test_names_pair_with_the_files_in_order(capsys):
    files, _ = rank_files()
    code, out, _ = run_job(capsys, *files, "--names", "a", "b", "c", "d")
    assert code == 0 and json.loads(out)["straggler"]["name"] == "d"


def test_step_threads_can_be_named(capsys):
    files, _ = rank_files()
    code, out, _ = run_job(capsys, *files, "--step-thread", "loader")
    assert {r["detected_by"] for r in json.loads(out)["ranks"]} == {"named"}


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["--log", "x.log"], "--log needs one value per FILE (4), got 1"),
        (["--names", "a", "b", "c"], "--names needs one value per FILE (4), got 3"),
        (["--names", "a", "a", "b", "c"], "--names must be distinct"),
    ],
)
def test_mismatched_options_exit_2_with_one_line(capsys, extra, reason):
    files, _ = rank_files()
    code, out, err = run_job(capsys, *files, *extra)
    assert (code, out) == (2, "") and err.strip().endswith(reason) and err.count("\n") == 1


def test_an_unusable_rank_file_exits_2_naming_it(capsys, tmp_path):
    files, _ = rank_files()
    bad = tmp_path / "rank-9.txt"
    bad.write_text("<svg></svg>")
    code, out, err = run_job(capsys, *files[:3], str(bad))
    assert (code, out) == (2, "") and "rank-9.txt is an SVG/HTML flamegraph" in err


def test_a_log_that_is_not_py_spys_exits_2(capsys, tmp_path):
    files, _ = rank_files()
    log = tmp_path / "not.log"
    log.write_text("hello\n")
    code, _, err = run_job(capsys, files[0], "--log", str(log))
    assert code == 2 and "not.log is not a py-spy log" in err


def test_a_missing_file_exits_2(capsys, tmp_path):
    code, _, err = run_job(capsys, str(tmp_path / "nope.txt"))
    assert code == 2 and "nope.txt: cannot read it" in err
