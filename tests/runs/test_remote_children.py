"""A whole-job record (`record_many`) reports each PID's children when py-spy starts and
after it stopped (the facts `children_start` / `children_end`, read by
`guard.children`), so the report can say how many DataLoader workers ran at once; with
`--subprocesses` their stacks come under their own process frames, a non-Python child
(py-spy#846 is about `dump`) costs the record nothing, and a child killed mid-window
leaves the parent's samples whole. Real processes, real py-spy, local and over sshd."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from runs.remote import RecordSettings, guard, record_many

TRANSPORTS = ["local", pytest.param("ssh", marks=pytest.mark.sshd)]
WITH_CHILDREN = RecordSettings(duration_s=3, rate=20, idle=True, subprocesses=True, gpu=False)
# A parent with two Python children that spin in `work` and one `sleep` (not Python),
# each a script file: a `python -c` command line would span lines of the raw output.
CHILD = "def work():\n    while True:\n        sum(range(1000))\n\n\nwork()\n"
PARENT = """import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, sys.argv[1]]) for _ in range(2)]
kids.append(subprocess.Popen(["sleep", "60"]))
print(" ".join(str(k.pid) for k in kids), flush=True)
while True:
    time.sleep(0.05)
"""


class Parent:
    def __init__(self, folder) -> None:
        (folder / "parent.py").write_text(PARENT)
        (folder / "child.py").write_text(CHILD)
        argv = [sys.executable, str(folder / "parent.py"), str(folder / "child.py")]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)  # fmt: skip
        self.children = [int(p) for p in self.proc.stdout.readline().split()]

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()


class Go:
    """A session that starts at once and remembers nothing but py-spy's lines."""

    def __init__(self) -> None:
        self.sampling = threading.Event()

    def on_ready(self) -> None: ...

    def may_start(self) -> bool:
        return True

    def on_line(self, pid: int, line: str, elapsed_s: float) -> None:
        if line.startswith("py-spy> Sampling process"):
            self.sampling.set()

    def pids_to_stop(self) -> list[int]:
        return []


@pytest.fixture
def parent(tmp_path):
    made = Parent(tmp_path)
    yield made
    made.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_children_of_each_pid_come_back_as_facts(transport, request, parent):
    target = request.getfixturevalue(f"{transport}_target")
    outcome = record_many(target, [parent.proc.pid], WITH_CHILDREN, Go())
    result = outcome.results[parent.proc.pid]
    seen = guard.children(result.facts)
    assert [sorted(pids) for pids in seen] == [sorted(parent.children)] * 2, result.facts
    text = result.raw.decode()
    for child in parent.children[:2]:  # the Python children, under their own frames
        assert f';process {child}:"' in text
    assert "work (child.py:3)" in text
    assert f'process {parent.children[2]}:"' not in text  # `sleep`: skipped, no error
    assert result.exit_code == 0 and "Errors: 0" in result.log, result.log


def _samples(lines: list[str]) -> int:
    return sum(int(line.rsplit(" ", 1)[1]) for line in lines)


def test_a_child_killed_mid_window_leaves_the_parents_samples_whole(local_target, parent):
    session = Go()

    def kill_one_child() -> None:
        if session.sampling.wait(10):
            time.sleep(1)
            os.kill(parent.children[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one_child)
    killer.start()
    outcome = record_many(local_target, [parent.proc.pid], WITH_CHILDREN, session)
    killer.join()
    result = outcome.results[parent.proc.pid]
    assert "process exited" not in result.log and result.exit_code == 0, result.log
    lines = result.raw.decode().splitlines()
    main = [x for x in lines if x.count("process ") == 1 and f"thread ({parent.proc.pid})" in x]
    killed = _samples([x for x in lines if f';process {parent.children[0]}:"' in x])
    kept = _samples([x for x in lines if f';process {parent.children[1]}:"' in x])
    # Every round py-spy took has the parent's sample, before the kill and after it: as
    # many as the child that lived through the window (attached a little after it).
    assert _samples(main) >= kept > 0, (_samples(main), kept)
    assert 0 < killed < 0.7 * kept, (killed, kept)  # sampled until it died, then no more
