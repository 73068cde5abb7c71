"""Each xdist process's test database, copied from one migrated for the whole run.

pytest-django has every process create its test database and apply all the
migrations: 3.5-5 CPU-s each on this 2-core machine, four at once at the start of
`make test`, two for `make test-fast`. Under xdist on PostgreSQL, the first process to
need a database migrates a template for the run; every process (that one too) then
creates its own with `CREATE DATABASE ... TEMPLATE`, which copies the files in a
fraction of a second. The copy is the migrated database byte for byte: tables, the
rows the migrations write (groups, permissions, the default keyword set) and the cache
table. The last process to finish drops the template. Alone, or on SQLite,
pytest-django's own setup runs.

xdist's controller starts migrating the template as the run starts (`TemplateAhead`),
while the processes start and collect the tests (4 CPU-s each), so the first process
to need it no longer migrates it in its first test while the other three wait.

Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import threading
import warnings
from pathlib import Path

import pytest
from django.conf import settings
from django.db import OperationalError

from tests.support.locks import flocked
from tests.support.procs import command_line


def pytest_configure(config: pytest.Config) -> None:
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Registered after pytest-django, so this `django_db_setup` is the one used.
        config.pluginmanager.register(TemplateDatabase(), "flamedeck-template-database")
    elif getattr(config.option, "numprocesses", None) and not config.option.collectonly:
        config.pluginmanager.register(TemplateAhead(), "flamedeck-template-ahead")


def _run_folder(config: pytest.Config) -> Path:
    """The folder every process of this run shares (their base temp folders' parent)."""
    return config._tmp_path_factory.getbasetemp().parent  # noqa: SLF001 - pytest's own


def _template_name(folder: Path) -> str:
    return "test_flamedeck_template_" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]


def _make_template(connection, folder: Path) -> None:
    """Migrate the run's template unless it exists; call holding `database.lock`. One
    that fails half-made is dropped, so no process copies it."""
    template = _template_name(folder)
    with connection._nodb_cursor() as cursor:
        if _exists(cursor, template):
            return
    test_settings = connection.settings_dict["TEST"]
    own, test_settings["NAME"] = test_settings.get("NAME"), template
    name = connection.settings_dict["NAME"]  # create_test_db points the settings at it
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    except BaseException:
        connection.close()
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(template)}")
        raise
    finally:
        test_settings["NAME"] = own
        settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = name
        connection.close()  # a template may have no session open on it


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    return cursor.fetchone() is not None


def _client(port: int) -> str:
    """The local process whose TCP connection has source port `port`, as `ss` names it."""
    found = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    pids = sorted(set(re.findall(r"pid=(\d+)", found.stdout)))
    lines = [f"pid {pid}: {command_line(int(pid))[:300]}" for pid in pids]
    return "; ".join(lines) or f"no local process on port {port}"


def _drop(cursor, name: str, quote) -> None:
    """Drop a process's database at the end of its run. PostgreSQL waits 5 s for the
    other sessions on it to end; one still open then (a process a test started that
    outlived it, or a thread's connection not yet collected) is named in a warning, with
    the process holding it, and ended, so the run's result is its tests'."""
    try:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
        return
    except OperationalError:
        pass  # still in use after PostgreSQL's 5 s
    cursor.execute(
        "SELECT pid, application_name, client_port, backend_start, state, left(query, 200)"
        " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [name],
    )
    sessions = [
        f"backend {pid} ({app or 'no name'}, {state}, since {start:%H:%M:%S}, last {query!r})"
        f" from {_client(port) if port else 'a socket'}"
        for pid, app, port, start, state, query in cursor.fetchall()
    ]
    warnings.warn(f"sessions left on {name} at the end of the run: {sessions}", stacklevel=1)
    cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)} WITH (FORCE)")


class TemplateAhead:
    """xdist's controller migrates the run's template in a thread from the start of the
    session: the processes it starts then import and collect the tests (about 6 s on
    two cores) while it migrates (3.5 s), instead of three waiting for the first. A
    process that asks first makes it itself (the lock decides); a failure here leaves
    no template, and the first process to need one makes it and reports the error."""

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The controller's base temp folder is the parent of every process's; made here,
        # in this thread, as xdist makes it (two threads could make two).
        folder = session.config._tmp_path_factory.getbasetemp()  # noqa: SLF001 - pytest's
        self.thread = threading.Thread(
            target=self._make, args=(session.config, folder), name="template", daemon=True
        )
        self.thread.start()

    @staticmethod
    def _make(config: pytest.Config, folder: Path) -> None:
        from django.db import connection
        from pytest_django.plugin import blocking_manager_key

        blocker = config.stash[blocking_manager_key]
        with contextlib.suppress(Exception), blocker.unblock():
            with flocked(folder / "database.lock", exclusive=True):
                _make_template(connection, folder)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.thread is not None:
            self.thread.join()


class TemplateDatabase:
    @pytest.fixture(scope="session")
    @classmethod
    def django_db_setup(
        cls,
        request,
        django_test_environment,
        django_db_blocker,
        django_db_modify_db_settings,
    ):
        from django.db import connection

        folder = _run_folder(request.config)
        template, own = _template_name(folder), connection.creation._get_test_db_name()
        quote = connection.ops.quote_name
        with django_db_blocker.unblock(), flocked(folder / "database.lock", exclusive=True):
            _make_template(connection, folder)
            with connection._nodb_cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {quote(own)}")
                cursor.execute(f"CREATE DATABASE {quote(own)} WITH TEMPLATE {quote(template)}")
        settings.DATABASES["default"]["NAME"] = connection.settings_dict["NAME"] = own
        connection.close()
        yield
        with django_db_blocker.unblock():
            connection.close()
            with connection._nodb_cursor() as cursor:
                _drop(cursor, own, quote)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The last process of the run drops the template."""
        from django.db import connection
        from pytest_django.plugin import blocking_manager_key

        folder = _run_folder(session.config)
        blocker = session.config.stash[blocking_manager_key]
        with blocker.unblock(), flocked(folder / "database.lock", exclusive=True):
            ended = folder / "database.ended"
            with open(ended, "a") as log:
                log.write(os.environ["PYTEST_XDIST_WORKER"] + "\n")
            if len(ended.read_text().split()) < int(os.environ["PYTEST_XDIST_WORKER_COUNT"]):
                return
            with connection._nodb_cursor() as cursor:
                cursor.execute(
                    f"DROP DATABASE IF EXISTS {connection.ops.quote_name(_template_name(folder))}"
                )
