"""The suite in parallel (pytest-xdist: `make test` and `make test-fast` run two processes):
tests marked `alone` run with no other test running (all of them at the start), the
slowest files are handed out next, and the files `make test-fast` leaves out are marked
`slow`.

`alone` is for the few tests whose assertions are about time on this machine: a
sampling window shared by 32 processes, a fault injected mid-sample. On a 2-core
machine, two other tests running beside them would test the machine's load, not the
product. Every other test takes a shared turn; an `alone` test takes the turn
exclusively, so it waits for the running tests to end, and no new test starts until
it is done. A gate in front of the turn keeps a waiting `alone` test from being
starved by the stream of shared turns. Outside xdist there is nothing to wait for.

Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Handed out first, heaviest first, so no worker is left with a long test at the end
# (xdist's `load` scheduling gives tests out in collection order). Measured with
# `--durations`: the URL walks and the whole-job windows take 20-90 s each.
FIRST = (
    "tests/test_error_corpus.py",
    "tests/test_redaction_walk.py",
    "tests/browser/test_csp.py",
    "tests/profiles/test_watch_e2e.py",
    "tests/profiles/test_group_window_embedded.py",
    "tests/config/test_csrf.py",
    "tests/browser/test_xss.py",
    "tests/profiles/test_analysis_once_e2e.py",
    "tests/config/test_settings.py",
    "tests/browser/test_screenshots.py",
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
    "tests/profiles/test_artifacts.py",
    "tests/profiles/test_uploads.py",
    "tests/profiles/test_upload_limits.py",
    "tests/profiles/test_default_keywords_migration.py",
    "tests/profiles/test_redact.py",
    "tests/profiles/test_faults.py",
    "tests/profiles/test_commands.py",
    "tests/profiles/test_comments.py",
    "tests/profiles/test_jobs.py",
    "tests/profiles/test_group_pipeline.py",
    "tests/profiles/test_group_report.py",
    "tests/profiles/test_analysis_budget.py",
    "tests/profiles/test_layers.py",
    "tests/profiles/test_notify.py",
    "tests/profiles/pyspy/test_regression.py",
    "tests/profiles/pyspy/test_properties.py",
    "tests/profiles/pyspy/test_threads.py",
    "tests/profiles/pyspy/test_limits.py",
    "tests/profiles/pyspy/test_speedscope_memory.py",
    "tests/profiles/pyspy/test_cli.py",
    "tests/profiles/pyspy/test_job_cli.py",
    "tests/runs/test_remote",
    "tests/runs/test_audit.py",
    "tests/runs/test_register_snippet.py",
    "tests/runs/test_services_alive.py",
)


def _rank(item: pytest.Item) -> tuple[int, int]:
    """`alone` tests first, then the FIRST files, then the rest in collection order.

    xdist hands the first tests out one to each process in turn, so every process
    starts on an `alone` test and they take the machine one after the other. Handed
    out later, an `alone` test waited for whatever ran beside it to end, one process
    idle meanwhile: 23 s before the 8-rank window once, behind a 45 s browser walk."""
    path = item.nodeid.split("::")[0]
    alone = item.get_closest_marker("alone") is None
    return int(alone), FIRST.index(path) if path in FIRST else len(FIRST)


def pytest_collection_modifyitems(config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        items.sort(key=_rank)  # stable: the order within a file is kept


@contextlib.contextmanager
def turn(folder: Path, exclusive: bool) -> Iterator[None]:
    """Hold a shared turn, or the only one, among the processes using `folder`."""
    with open(folder / "gate.lock", "a") as gate, open(folder / "turn.lock", "a") as held:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(held, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _parallel_turn(request, tmp_path_factory) -> Iterator[None]:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    # Every xdist worker's base temp folder sits in one folder of the run.
    folder = tmp_path_factory.getbasetemp().parent
    with turn(folder, exclusive=request.node.get_closest_marker("alone") is not None):
        yield
