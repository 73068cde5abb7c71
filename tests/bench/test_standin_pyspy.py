"""bench/support/standin_pyspy, the py-spy stand-in of the 1,024-rank whole-job bench: it speaks
py-spy 0.4.3's command line and lines as flamedeck's host scripts use them, stops on
SIGINT when started as they start it (SIGINT ignored), and what it writes is real py-spy
output that flamedeck's engine reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runs.remote import RecordResult, RecordSettings, Target, classify, record_many
from tests.support.procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
STANDIN = str(ROOT / "bench" / "support" / "standin_pyspy")
SAMPLING = "py-spy> Sampling process 20 times a second for {} seconds. Press Control-C to exit."


@pytest.fixture
def target() -> Iterator[int]:
    """A live PID: all the stand-in needs of its target."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([STANDIN, *args], capture_output=True, text=True, timeout=30)


def _analyze(path: Path, log: Path | None = None) -> dict:
    argv = [sys.executable, "-m", "profiles.pyspy", "analyze", str(path)]
    done = subprocess.run(
        argv + (["--log", str(log)] if log else []), cwd=ROOT, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _wrote(log: str) -> int:
    last = [line for line in log.splitlines() if line.startswith("py-spy> Wrote ")][-1]
    return int(last.split("Samples: ")[1].split()[0])


def test_it_says_its_version_and_a_help_that_offers_native():
    assert _run("--version").stdout == "py-spy 0.4.3\n"
    assert "--native" in _run("record", "--help").stdout


def test_a_record_stops_on_sigint_even_started_as_the_host_scripts_start_it(tmp_path, target):
    out, log = tmp_path / "out.json", tmp_path / "log"
    # In the background of a non-interactive sh, as runs/remote starts py-spy: SIGINT
    # arrives ignored, and the stand-in must still stop on it and write its file.
    argv = [STANDIN, "record", "--pid", str(target), "--rate", "20", "--duration", "30",
            "--format", "speedscope", "-o", str(out), "--idle", "--threads", "--subprocesses",
            "--nonblocking", "--gil", "--some-new-flag", "7"]  # fmt: skip
    shell = subprocess.run(
        ["sh", "-c", '"$@" >"$0" 2>&1 & echo $!', str(log), *argv],
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    spy = int(shell.stdout)
    assert wait_until(lambda: SAMPLING.format(30) in log.read_text(), timeout_s=10)
    started = time.monotonic()
    os.kill(spy, signal.SIGINT)
    assert wait_until(lambda: "Visit https://www.speedscope.app" in log.read_text(), 10)
    assert time.monotonic() - started < 5
    lines = log.read_text().splitlines()
    assert lines[0] == SAMPLING.format(30)
    assert "py-spy> Stopped sampling because Control-C pressed" in lines
    assert f"Wrote speedscope file to '{out}'" in lines[-2]
    stats = _analyze(out, log)
    assert stats["format"] == "speedscope" and stats["total_samples"] == _wrote(log.read_text())
    assert stats["lag"]["verdict"] == "ok"


def test_a_record_ends_at_its_duration_and_raw_is_raw(tmp_path, target):
    out = tmp_path / "out.txt"
    started = time.monotonic()
    done = _run("record", "--pid", str(target), "-r", "20", "-d", "1", "-f", "raw", "-o", str(out))
    assert done.returncode == 0 and 1 <= time.monotonic() - started < 5
    assert done.stdout.splitlines()[0] == SAMPLING.format(1)
    assert "Stopped sampling" not in done.stdout
    stats = _analyze(out)
    assert stats["format"] == "raw" and stats["total_samples"] == _wrote(done.stdout)


def test_a_chrometrace_record_is_a_real_one_with_py_spys_times(tmp_path, target):
    """What a record with --idle asks for (profiles.captures.timekeeping)."""
    from profiles.pyspy.formats.chrometrace import chrometrace_samples

    out = tmp_path / "out.json"
    done = _run("record", "--pid", str(target), "-r", "50", "-d", "1", "-f", "chrometrace",
                "--idle", "--threads", "-o", str(out))  # fmt: skip
    assert done.returncode == 0 and f"Wrote chrome trace to '{out}'" in done.stdout
    samples = chrometrace_samples(out.read_bytes(), rate=50, samples_reported=_wrote(done.stdout))
    assert samples.shown > 100 and samples.times == sorted(samples.times)
    assert 13 < samples.end_s < 15  # the 14 s recording, placed at py-spy's own times


def test_a_record_stops_when_its_process_exits(tmp_path):
    leaves = subprocess.Popen(["sleep", "1"])
    out = tmp_path / "out.json"
    done = _run("record", "--pid", str(leaves.pid), "--rate", "20", "-f", "speedscope",
                "-o", str(out))  # fmt: skip
    leaves.wait()
    assert done.returncode == 0, done.stderr
    assert "py-spy> Stopped sampling because process exited" in done.stdout
    assert out.stat().st_size > 0


def test_a_dump_is_a_real_dump_json_that_the_engine_reads(tmp_path, target):
    done = _run("dump", "--pid", str(target), "--json", "--native")
    assert done.returncode == 0
    threads = json.loads(done.stdout)
    assert threads and {"thread_name", "os_thread_id", "active", "frames"} <= set(threads[0])
    (tmp_path / "dump.json").write_text(done.stdout)
    argv = [sys.executable, "-m", "profiles.pyspy", "stacks", str(tmp_path / "dump.json")]
    stacks = subprocess.run([*argv, "--names", "rank-0"], cwd=ROOT, capture_output=True)
    assert stacks.returncode == 0, stacks.stderr
    assert json.loads(stacks.stdout)["verdict"]["user_frame"]
    assert _run("dump", "--pid", str(target)).stdout.startswith("Process ")


def test_a_missing_pid_fails_as_py_spy_fails(tmp_path):
    for argv in (["record", "--pid", "4000000", "-f", "speedscope", "-o", str(tmp_path / "x")],
                 ["dump", "--pid", "4000000", "--json"]):  # fmt: skip
        done = _run(*argv)
        assert done.returncode == 1 and not (tmp_path / "x").exists()
        assert done.stderr.startswith("Error: Failed to get process executable name. Check")
        assert classify(1, done.stderr, done.stdout).cause == "no_such_pid"


class _Session:
    def on_ready(self) -> None:
        pass

    def may_start(self) -> bool:
        return True

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None:
        pass

    def pids_to_stop(self) -> list[int]:
        return []


def test_record_many_records_two_pids_with_the_stand_in_as_py_spy():
    targets = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    pids = [proc.pid for proc in targets]
    settings = RecordSettings(duration_s=2, rate=20, idle=True, format="speedscope", gpu=False)
    try:
        outcome = record_many(Target(transport="local", py_spy=STANDIN), pids, settings, _Session())
    finally:
        for proc in targets:
            proc.kill()
            proc.wait()
    for pid in pids:
        result = outcome.results[pid]
        assert isinstance(result, RecordResult), result
        assert result.exit_code == 0 and "Wrote speedscope file" in result.log
        assert result.raw and json.loads(result.raw)["profiles"]
        assert outcome.spans[pid]["stop"] - outcome.spans[pid]["start"] >= 1.5
