"""The suite in parallel (pytest-xdist: `make test` runs four processes, `make test-fast`
two): the longest tests are handed out first, one at a time, to whichever process is
free; tests marked `alone` run near the end, before a few short files; the files `make
test-fast` leaves out are marked `slow`.

`alone` is for the few tests whose assertions are about time on this machine: a
whole-job sampling window (8 processes, on PostgreSQL or `make run`'s defaults, or 32).
On a 2-core machine, other tests running beside them would test the machine's load, not
the product. Every test holds a shared turn while it runs; an `alone` test sets up
beside the others (its workers, sshd hosts and idle targets) and takes the turn
exclusively only for what it measures, `with alone():` (the `alone` fixture): that waits
for the running tests to end, and no test starts, or sets up, until the block is done.
After it the test holds a shared turn again (the 32-rank window's analyses, reported
but not bounded, run outside its block and must not load the next one) until it calls
`alone.release()`, when what is left is stopping what it started. Its setup is not
measured, so it need not wait: the four `alone` tests once ran one after the other for
79 s at the end of a run, most of it starting workers, sshd and a `make run` stack
while the other processes sat idle. They are handed out after every longer test and
before the short AFTER_ALONE files, so what an `alone` block waits for is the one
short test each other process is running (a gate keeps new ones from starting: see
`turn`), and each goes to a process of its own (`AloneApart`). Outside xdist there is
nothing to wait for.
The fault matrix bounds its cases from py-spy's first sample, not from the request,
and runs beside the rest (its module says what it held under load).

Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from xdist.scheduler import LoadScheduling

from tests.support.locks import flocked

# Names the file where the processes write their `alone` tests for the controller.
_ALONE_LIST = "FLAMEDECK_ALONE_LIST"

# Handed out first, longest first, so no process is left with a long test at the end.
# Measured with `bench/suite/suite_cpu.py` (its `--timeline` shows what each process ran
# when): the URL walks, browser crawls and end-to-end captures take 8-45 s a test. The
# browser walks mostly wait (for a page, the network to settle) and the URL walks only
# compute, so they alternate: with the browser walks together at the start, the two
# cores were 20-50% idle for 40 s (busy CPU sampled each second from /proc/stat).
FIRST = (
    "tests/profiles/jobs/test_window_embedded.py",  # `alone`: the longest set-up first
    "tests/profiles/jobs/test_window_e2e.py",
    "tests/browser/test_csp.py",
    "tests/test_error_corpus.py",
    "tests/browser/test_xss.py",
    "tests/profiles/watches/test_notify_secrets.py",  # one test of 50-80 s
    "tests/profiles/jobs/test_dumps_torch.py",  # three gloo jobs, 45-50 s
    "tests/runs/test_launches_torch.py",  # ran last, alone for 41 s, when left to runs/
    "tests/test_redaction_walk.py",
    "tests/profiles/captures/test_analysis_once_e2e.py",
    "tests/profiles/captures/test_fault_matrix.py",
    "tests/browser/test_screenshots.py",
    "tests/browser/test_capture_flow.py",
    "tests/profiles/test_default_keywords_migration.py",
    "tests/config/test_gunicorn.py",
    "tests/profiles/jobs/test_jobs_e2e.py",
    "tests/config/test_serve.py",
    "tests/profiles/watches/test_e2e.py",
    "tests/profiles/captures/test_capture_e2e.py",
    "tests/profiles/storage/test_artifacts_e2e.py",
    "tests/runs/test_remote_stop.py",
    "tests/runs/test_remote_many.py",
    "tests/profiles/captures/test_pyspy_guard.py",
    "tests/browser/test_live_rows.py",
    "tests/config/test_hardening.py",
    "tests/profiles/pyspy/test_properties.py",
    "tests/config/test_csrf.py",
    "tests/config/test_settings.py",
)


# Left out of `make test-fast` (marked `slow` here, besides the `browser`, `sshd` and
# `services` markers): files that walk every URL, start real processes (py-spy, ssh,
# `manage.py`, gunicorn), migrate back and forth, or generate thousands of cases.
SLOW = (
    "tests/test_error_corpus.py",
    "tests/test_redaction_walk.py",
    "tests/test_auth_matrix.py",
    "tests/test_xss_corpus.py",
    "tests/test_glyphs.py",
    "tests/docs/",
    "tests/config/test_settings.py",
    "tests/config/test_hardening.py",
    "tests/config/test_csrf.py",
    "tests/config/test_ci.py",
    "tests/config/test_login_throttling.py",
    "tests/config/test_serve_supervisor.py",
    "tests/config/test_fs_broker.py",
    "tests/profiles/storage/test_artifacts.py",
    "tests/profiles/storage/test_uploads.py",
    "tests/profiles/storage/test_upload_limits.py",
    "tests/profiles/test_default_keywords_migration.py",
    "tests/profiles/captures/test_redact.py",
    "tests/profiles/captures/test_faults.py",
    "tests/profiles/captures/test_commands.py",
    "tests/profiles/web/test_comments.py",
    "tests/profiles/jobs/test_jobs.py",
    "tests/profiles/jobs/test_pipeline.py",
    "tests/profiles/jobs/test_report.py",
    "tests/profiles/captures/test_analysis_budget.py",
    "tests/profiles/test_layers.py",
    "tests/profiles/watches/test_notify.py",
    "tests/profiles/pyspy/compare/test_regression.py",
    "tests/profiles/pyspy/test_properties.py",
    "tests/profiles/pyspy/count/test_thread_tables.py",
    "tests/profiles/pyspy/test_limits.py",
    "tests/profiles/pyspy/formats/test_speedscope_memory.py",
    "tests/profiles/pyspy/test_cli.py",
    "tests/profiles/pyspy/test_jobcli.py",
    "tests/runs/test_remote",
    "tests/runs/test_audit.py",
    "tests/runs/test_register_snippet.py",
    "tests/runs/test_services_alive.py",
)


# Handed out after the `alone` tests: short tests (1-4 s) that keep the cores busy while
# the `alone` tests set up, and after their blocks while they stop what they started;
# a block waits only for the one test each other process is running.
AFTER_ALONE = ("tests/runs/",)


def _rank(item: pytest.Item) -> tuple[int, int]:
    """The FIRST files in their order, then the rest in collection order, then the
    `alone` tests, then the AFTER_ALONE files.

    An `alone` test handed out while others run waits for them to end, every other
    process idle meanwhile: at the start that was the longest tests (the 8-rank
    window once waited 23 s behind a 45 s browser walk). Handed out last, they set up
    and stopped their workers and targets with the other processes idle (tail 36 s from
    the last ordinary test, 16 s of it in their blocks). Before the short AFTER_ALONE
    tests, a block waits a second or two for what is running and the set-ups and
    teardowns run beside tests."""
    path = item.nodeid.split("::")[0]
    first = FIRST.index(path) if path in FIRST else len(FIRST)
    if item.get_closest_marker("alone") is not None:
        return 1, first
    return (2 if first == len(FIRST) and path.startswith(AFTER_ALONE) else 0), first


def pytest_configure(config: pytest.Config) -> None:
    # xdist's `load` scheduling hands each process a quarter of its share of the
    # tests at once, in collection order: one process got all four `alone` tests,
    # another a run of long ones (8 min 25 s at -n 4, three processes idle for the
    # last two). Instead: one test at a time, in the order above, to the first
    # process free (`--maxschedchunk` given on the command line wins).
    if getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1
    if not os.environ.get("PYTEST_XDIST_WORKER") and config.pluginmanager.has_plugin("xdist"):
        # The controller: the processes it starts write their `alone` tests here.
        handle, name = tempfile.mkstemp(prefix="flamedeck-alone-", suffix=".txt")
        os.close(handle)
        os.environ[_ALONE_LIST] = name
        config.add_cleanup(lambda: (os.environ.pop(_ALONE_LIST, None), os.unlink(name)))


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "load":
        return None  # xdist's own
    return AloneApart(config, log)


class AloneApart(LoadScheduling):
    """xdist's `load` scheduling, but no process is handed a second `alone` test while
    another process could set one up.

    A process runs a test only once it holds the next (or is told there is none), so
    xdist keeps two tests queued on each: the process that started the 8-rank window
    asked for more at once and queued the 32-rank one behind it, which then set up only
    after the first had ended, while two processes sat idle (53 s from the last
    ordinary test to the end of the run, 16 of them waiting for set-ups). Here, when
    the next test is an `alone` one, a process holding none gets it, one at a time; a
    process holding one gets the first ordinary test after them instead, and where only
    `alone` tests are left it is told there is nothing more while the tests left can
    each go to a process holding none: every `alone` test sets up beside the others and
    the blocks follow one another."""

    alone: set[int] | None = None

    def check_schedule(self, node, duration: float = 0) -> None:
        if self.alone is None:  # read once: every process has collected by now
            self.alone = _alone_indices(self.collection or [])
        if node.shutting_down or not self.pending or self.pending[0] not in self.alone:
            super().check_schedule(node, duration)
            return
        queued = self.node2pending[node]
        if not set(queued) & self.alone:
            if len(queued) < 2:
                self._send_tests(node, 1)  # the `alone` test
            return
        ordinary = next((index for index in self.pending if index not in self.alone), None)
        if ordinary is not None:
            if len(queued) < 2:
                self.pending.remove(ordinary)
                queued.append(ordinary)
                node.send_runtest_some([ordinary])
            return
        holding = [n for n in self.nodes if set(self.node2pending[n]) & self.alone]
        free = [n for n in self.nodes if not n.shutting_down and n not in holding]
        if len(self.pending) <= len(free):
            node.shutdown()  # it runs the `alone` test it holds, then ends
        elif len(queued) < 2:
            self._send_tests(node, 1)


def _alone_indices(collection: list[str]) -> set[int]:
    """The positions in xdist's collection of the tests marked `alone` (as the
    processes wrote them when they collected)."""
    path = os.environ.get(_ALONE_LIST)
    names = set(Path(path).read_text().split("\n")) if path else set()
    return {index for index, nodeid in enumerate(collection) if nodeid in names}


def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Every process collects, and xdist hands out tests by their index in that
        # collection, so it is sorted there (the controller collects nothing).
        items.sort(key=_rank)  # stable: the order within a file is kept
        if path := os.environ.get(_ALONE_LIST):  # for the controller's AloneApart
            alone = [item.nodeid for item in items if item.get_closest_marker("alone")]
            mine = Path(f"{path}.{os.environ['PYTEST_XDIST_WORKER']}")
            mine.write_text("\n".join(alone))
            os.replace(mine, path)  # whole: every process writes the same list


@contextlib.contextmanager
def turn(folder: Path) -> Iterator[IO[str]]:
    """Hold a shared turn among the processes using `folder`; yields the open lock file
    (`Alone` converts the lock on it).

    The turn is taken through a gate (`gate.lock`) that an `alone` block holds from the
    moment it asks until it ends. Linux's flock lets a new shared holder in ahead of an
    exclusive one waiting, so without the gate a block asked while the other processes
    still had tests to run would wait until they ran out."""
    with open(folder / "turn.lock", "a") as held:
        with flocked(folder / "gate.lock", exclusive=True):
            fcntl.flock(held, fcntl.LOCK_SH)
        try:
            yield held
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


_HELD = pytest.StashKey["IO[str] | None"]()


class Alone:
    """`with alone():` runs its block while no other test runs (see the module's text).

    The test gives its shared turn up, closes the gate (no test starts or sets up from
    then on) and waits for the exclusive turn (the running tests end). Giving the shared
    turn up before waiting at the gate keeps two `alone` tests asking at once from
    waiting for each other. After the block the turn is shared again, for the teardown,
    and the gate opens."""

    def __init__(self, held: IO[str] | None, item: pytest.Item | None = None) -> None:
        self.held = held
        self.item = item
        self.entered = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.entered = True
        if self.held is None:  # not under xdist: nothing runs beside this test
            yield
            return
        asked = time.time()
        fcntl.flock(self.held, fcntl.LOCK_UN)
        gate = flocked(Path(self.held.name).with_name("gate.lock"), exclusive=True)
        with gate:
            fcntl.flock(self.held, fcntl.LOCK_EX)
            got = time.time()
            try:
                yield
            finally:
                fcntl.flock(self.held, fcntl.LOCK_SH)
                if self.item is not None:  # when it asked, got and gave back the machine
                    self.item.user_properties.append(("alone", (asked, got, time.time())))

    def release(self) -> None:
        """Give the turn back for the rest of the test, once what is left only stops the
        processes it started and reads what they stored. Stopping them is mostly
        waiting (Celery's warm shutdown on the filesystem broker waits out a 2 s poll;
        billiard's pool took 15 s once), and the next `alone` block waited for it: 6 s
        between the embedded window and the 8-rank one."""
        if self.held is not None:
            fcntl.flock(self.held, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _parallel_turn(request, tmp_path_factory) -> Iterator[None]:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        request.node.stash[_HELD] = None
        yield
        return
    # Every xdist worker's base temp folder sits in one folder of the run.
    folder = tmp_path_factory.getbasetemp().parent
    with turn(folder) as held:
        request.node.stash[_HELD] = held
        yield


@pytest.fixture
def alone(request, _parallel_turn) -> Iterator[Alone]:
    """For a test marked `alone`: `with alone():` around what it measures."""
    if request.node.get_closest_marker("alone") is None:
        pytest.fail("the `alone` fixture is for tests marked @pytest.mark.alone")
    block = Alone(request.node.stash[_HELD], request.node)
    yield block
    # A test marked `alone` that measures nothing alone would run last for nothing.
    assert block.entered, "a test marked `alone` never entered `with alone():`"
