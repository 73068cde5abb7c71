"""`python -m profiles.pyspy stacks FILE... --names NAME...`: the whole-job dump's JSON,
a name repeated for a rank's successive dumps; exit 2 with one line on input it cannot use."""

import json
import subprocess
import sys
from pathlib import Path

from profiles.pyspy import cli
from profiles.pyspy.job.dump_verdict import analyze_stacks
from tests.profiles.pyspy.job.test_dump_verdict_captures import DUMPS, ranks_of

ROOT = Path(__file__).resolve().parents[3]
CASE = DUMPS / "own_code"


def files_and_names() -> tuple[list[str], list[str]]:
    files = [str(CASE / f"rank-{r}.{k}.json") for r in range(4) for k in range(3)]
    return files, [f"rank-{r}" for r in range(4) for _ in range(3)]


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["stacks", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_it_prints_the_stacks_of_the_dumps_named_rank_by_rank():
    files, names = files_and_names()
    done = subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", "stacks", *files, "--names", *names],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == json.loads(json.dumps(analyze_stacks(ranks_of("own_code"))))
    assert report["verdict"]["kind"] == "stuck" and report["verdict"]["odd"] == ["rank-2"]
    assert [r["dumps"] for r in report["ranks"]] == [3, 3, 3, 3]


def test_without_names_a_files_name_up_to_its_first_dot_names_its_rank(capsys):
    files, _ = files_and_names()
    code, out, _ = run(capsys, *files)
    assert code == 0
    assert [r["name"] for r in json.loads(out)["ranks"]] == ["rank-0", "rank-1", "rank-2", "rank-3"]


def test_a_stored_series_of_dumps_counts_as_that_many_dumps(tmp_path, capsys):
    series = [{"at": 1700000000.0 + k, "dump": json.loads((CASE / f"rank-2.{k}.json").read_text())}
              for k in range(3)]  # fmt: skip
    path = tmp_path / "rank-2.json"
    path.write_text(json.dumps(series))
    code, out, _ = run(capsys, str(path))
    assert code == 0 and json.loads(out)["ranks"][0]["dumps"] == 3


def test_a_count_of_names_other_than_of_files_exits_2_with_one_line(capsys):
    files, names = files_and_names()
    code, out, err = run(capsys, *files, "--names", *names[:-1])
    assert (code, out) == (2, "")
    assert err == "--names needs one name per FILE (12), got 11\n"


def test_no_file_exits_2(capsys):
    code, _, err = run(capsys)
    assert code == 2 and err.startswith("usage:") and err.count("\n") == 1


def test_a_file_that_is_no_dump_exits_2_naming_it(tmp_path, capsys):
    bad = tmp_path / "rank-1.0.json"
    bad.write_text("[1, 2]")
    files, _ = files_and_names()
    code, _, err = run(capsys, files[0], str(bad))
    assert code == 2
    assert err.startswith("rank-1.0.json: input is JSON but not `py-spy dump --json` output")
    code, _, err = run(capsys, str(tmp_path / "missing.json"))
    assert code == 2 and err.startswith("missing.json: cannot read it")
