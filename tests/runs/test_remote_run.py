"""`run()`, the one function that starts processes, on real local processes."""

from __future__ import annotations

import subprocess

from runs.remote import run
from tests.support.procs import wait_until


def test_run_streams_stdout_lines_as_they_are_printed():
    seen: list[tuple[str, float]] = []
    done = run(
        ["sh", "-c", "echo first; sleep 0.6; echo second"],
        timeout_s=10, on_line=lambda line, at: seen.append((line, at)), poll_s=0.05,
    )  # fmt: skip
    assert [line for line, _ in seen] == ["first", "second"]
    assert seen[1][1] - seen[0][1] > 0.4
    assert done.stopped == "completed" and done.returncode == 0
    assert done.stdout == b"first\nsecond\n"


def test_run_keeps_stderr_apart_from_stdout():
    done = run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=10)
    assert (done.text, done.stderr, done.returncode) == ("out\n", "err\n", 3)


def test_run_closes_stdin_when_asked_to_stop_and_lets_the_process_finish():
    calls = iter([False, False, True])
    done = run(
        ["sh", "-c", "cat >/dev/null; echo finished cleanly"],
        timeout_s=30, should_stop=lambda: next(calls, True), poll_s=0.05,
    )  # fmt: skip
    assert done.stopped == "stopped" and done.trigger == "should_stop"
    assert done.text == "finished cleanly\n" and done.elapsed_s < 2


def test_run_closes_stdin_when_the_wall_clock_bound_passes():
    done = run(["sh", "-c", "cat >/dev/null; echo bye"], timeout_s=0.5, poll_s=0.05)
    assert done.stopped == "stopped" and done.trigger == "timeout"
    assert done.text == "bye\n" and 0.5 <= done.elapsed_s < 2


def test_run_kills_the_whole_process_group_only_after_the_grace_period():
    marker = "31.4159"  # a sleep length nothing else on the machine uses
    script = f"trap '' INT TERM; sleep {marker} & wait"
    done = run(["sh", "-c", script], timeout_s=0.3, grace_s=1.0, poll_s=0.05)
    assert done.stopped == "killed"
    assert 1.2 <= done.elapsed_s < 3
    gone = wait_until(lambda: subprocess.run(["pgrep", "-f", f"sleep {marker}"]).returncode, 3)
    assert gone, "the grandchild outlived the kill"


def test_run_without_stdin_gives_the_process_an_immediate_eof():
    done = run(["sh", "-c", "cat; echo after"], stdin_open=False, timeout_s=5)
    assert done.text == "after\n" and done.stopped == "completed"


def test_run_spools_stdout_past_its_size_to_a_file_and_maps_it_back():
    """A host session's results (many ranks' samples) stay out of the worker's heap."""
    import mmap

    script = "head -c 300000 /dev/zero | tr '\\0' x; echo; echo tail"
    lines = []
    big = run(["sh", "-c", script], timeout_s=10, spool_over_bytes=1000,
              on_line=lambda line, at: lines.append(line))  # fmt: skip
    assert isinstance(big.stdout, mmap.mmap)
    assert len(big.stdout) == 300_006 and big.stdout.find(b"tail") == 300_001
    assert big.stdout[-5:] == b"tail\n" and lines[-1] == "tail"
    small = run(["sh", "-c", "echo small"], timeout_s=10, spool_over_bytes=1000)
    assert small.stdout == b"small\n" and small.text == "small\n"
    empty = run(["true"], timeout_s=10, spool_over_bytes=1000)
    assert empty.stdout == b""
