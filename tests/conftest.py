"""Shared fixtures: personas, and a real Celery worker process on the test database."""

import gc
import warnings

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.permissions import HOST_ADMINS_GROUP, OPERATORS_GROUP
from tests.support.worker import WorkerProcess

pytest_plugins = [
    "tests.support.ci",
    "tests.support.database",
    "tests.support.flush",
    "tests.support.parallel",
]


def pytest_configure(config: pytest.Config) -> None:
    # A test process allocates much and keeps little (a request's objects, a test's
    # rows) over a heap of Django and the collected tests, so the cyclic collector ran
    # ~3,000 times a process, 9% of the four processes' own CPU (15.7 of 172 CPU-s
    # over `make test`). Collecting young objects every 20,000 allocations instead of
    # 700: 1.1 instead of 3.3 CPU-s of collection over the error corpus and the CSRF
    # walk, peak memory 1.74 instead of 1.57 GB there (docs/figures.md). The servers,
    # workers and workloads a test starts keep Python's defaults.
    gc.set_threshold(20_000, 10, 10)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # After the last test (its fixtures, the test database's included, are gone by now)
    # pytest collects the whole heap (its unraisable-exception check, twice): about
    # 600,000 dead objects and 2 CPU-s a process, at the end of the run where the last
    # processes finish one by one. Frozen, the heap is left to the process's exit; only
    # a `__del__` of cyclic garbage made after the last test would go unreported.
    gc.freeze()


@pytest.fixture
def back_to_latest():
    """For a test that migrates back: every migration applied again afterwards, so later
    tests (and the live server) see the current schema whatever it left."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def owner(django_user_model):
    """An operator: launches, cancels, imports, tags; edits a host's notes only."""
    user = django_user_model.objects.create_user("owner", password="owner-pass")
    user.groups.add(Group.objects.get(name=OPERATORS_GROUP))
    return user


@pytest.fixture
def host_admin(django_user_model):
    """An operator who also administers hosts: creates them, changes how they are reached."""
    user = django_user_model.objects.create_user("hostadmin", password="hostadmin-pass")
    user.groups.add(Group.objects.get(name=OPERATORS_GROUP))
    user.groups.add(Group.objects.get(name=HOST_ADMINS_GROUP))
    return user


@pytest.fixture
def host_admin_client(client, host_admin):
    client.force_login(host_admin)
    return client


@pytest.fixture
def teammate(django_user_model):
    """A logged-in viewer: sees everything, comments, launches nothing."""
    return django_user_model.objects.create_user("teammate", password="teammate-pass")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def teammate_client(client, teammate):
    client.force_login(teammate)
    return client


@pytest.fixture
def celery_worker_process(tmp_path, transactional_db):
    """A real worker on the real broker (Redis when it answers) and the test DB."""
    worker = WorkerProcess(tmp_path / "worker.log")
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def sshd():
    """A real OpenSSH sshd on 127.0.0.1 with generated keys, shared by the session
    (tests must not stop or re-key it; tests/runs has `own_sshd` for that)."""
    from tests.support.requirements import require_sshd
    from tests.support.sshd import SSHServer

    require_sshd()
    server = SSHServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def running_workload():
    """A real Python process with threads target-0, target-1 and waiter."""
    from tests.support.workload import start_workload

    with start_workload(threads=2) as workload:
        yield workload


@pytest.fixture
def inline_analysis(monkeypatch):
    """Analysis the web side queues runs at once, here: the test's transaction never
    commits, so on_commit runs the callback now and Celery runs the task eagerly."""
    from django.db import transaction

    from config import celery_app

    monkeypatch.setattr(transaction, "on_commit", lambda func, using=None, robust=False: func())
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = eager


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (SeaweedFS) on 127.0.0.1, shared by the session;
    tests make a bucket of their own with `s3_server.new_bucket()`."""
    from tests.support.s3 import SeaweedS3, require_weed

    require_weed()
    server = SeaweedS3().start()
    if server.failed_tries:  # started, on a later try: say why the first failed
        warnings.warn(
            "the test S3 server started again: " + server.failed_tries[0][:500], stacklevel=1
        )
    yield server
    server.stop()
