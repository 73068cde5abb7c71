"""`python -m profiles.pyspy` (__main__.py): the command line runs as a module and exits with
the CLI's status."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_help_exits_0_and_lists_the_commands():
    done = run_module("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m profiles.pyspy")
    for command in ("analyze", "export", "dump", "lag", "job", "stacks", "timeline"):
        assert command in done.stdout


def test_an_unusable_input_exits_2_with_one_line_on_stderr(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    done = run_module("analyze", str(empty))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "empty.txt" in done.stderr
