"""Headless Chromium (Debian's chromium-headless-shell) driven by Playwright, against
pytest-django's live_server. Never `playwright install`: the system browser is used."""

import os
import tempfile
import threading
from pathlib import Path

import pytest
from django.core.signals import request_finished
from django.db import connections

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, ContextPool
from tests.support.requirements import require, require_module

# Playwright's sync API runs an event loop in this thread; Django's ORM calls from
# the test body are still synchronous and safe here.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

# `make screenshots` points this at docs/screenshots; a plain test run writes to /tmp,
# so running the suite never dirties the working tree.
SCREENSHOTS = Path(
    os.environ.get("FLAMEDECK_SCREENSHOTS_DIR")
    or Path(tempfile.gettempdir()) / "flamedeck-screenshots"
)


@pytest.fixture(scope="session")
def chromium():
    playwright_api = require_module("playwright.sync_api", "pip install -e '.[dev]'")
    require(CHROMIUM, "Chromium's headless shell", "apt-get install chromium-headless-shell")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def contexts(chromium):
    """Browser contexts reused from test to test (tests/support/browser.py).

    A kept context also keeps its HTTP connections to the live server open between
    tests, and the server's thread for each would keep its database session (the
    settings' CONN_MAX_AGE) for as long: four test processes could hold most of
    PostgreSQL's 100, and the test database could not be dropped at the end. So the
    live server's threads close their sessions after each request, as they did when
    each test closed its context."""

    def release(**kwargs) -> None:
        if threading.current_thread() is not threading.main_thread():
            connections.close_all()

    request_finished.connect(release)
    pool = ContextPool(chromium)
    yield pool
    pool.close()
    request_finished.disconnect(release)


class Tab:
    """A logged-in browser tab that records page errors (checked at teardown)."""

    def __init__(self, context, page, base_url: str) -> None:
        self.context, self.page, self.base_url = context, page, base_url
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        page.on(
            "dialog",
            lambda dialog: self.errors.append(f"dialog: {dialog.message}") or dialog.dismiss(),
        )

    def goto(self, path: str):
        self.page.goto(self.base_url + path)
        return self.page


@pytest.fixture
def open_tab(contexts, live_server, client):
    """open_tab(user) → a Tab logged in as that user (session cookie from the test client)."""
    tabs: list[Tab] = []

    def open_(user, width: int = 1440, height: int = 1000) -> Tab:
        client.force_login(user)
        page = contexts.take(client, live_server.url, width, height)
        page.set_default_timeout(20_000)
        tab = Tab(page.context, page, live_server.url)
        tabs.append(tab)
        return tab

    yield open_
    for tab in tabs:
        contexts.give_back(tab.context, live_server.url)
    errors = [
        e for tab in tabs for e in tab.errors if "favicon" not in e and "status of 40" not in e
    ]
    assert not errors, errors


@pytest.fixture
def running_pid():
    """A process that runs (and is no process of flamedeck's own, which operators may
    not capture: runs.own_processes), for capture buttons to start on."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    yield proc.pid
    proc.kill()
    proc.wait()
