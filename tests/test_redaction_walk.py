"""No URL shows a viewer or an operator a command line of the flamedeck server's own
processes (host `local`).

A real process is started as `python -c SCRIPT` where SCRIPT is several lines and one
of them holds a secret (as a token pasted into a one-liner would); it starts a child
the same way. Real py-spy captures of it (two `--subprocesses` records in one run and
one group, a dump with `--locals`), a host check of `local` that lists it, and a
comment a host admin pinned on its process frame are then read through EVERY route
the resolver knows (the error corpus's walk), each filled with every capture's id and
every download, plus the query strings that pick a comparison, a view, a thread or a
frame (a path whose code reads no query string answers them all alike, and gets the
first only: tests/support/walk.py). The secret is in none of the answers; a host admin
still sees it.

`-s` prints how many URLs were walked (docs/security.md quotes the figure).
"""

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from urllib.parse import quote, urlencode

import pytest
from django.test import Client

from profiles.captures import pipeline, redact, services
from profiles.models import Capture, CaptureGroup, Comment, KeywordSet
from profiles.storage import files as capture_files
from runs import services as run_services
from runs.models import Host, Run, RunProcess
from tests.support.procs import descendants, wait_until
from tests.support.walk import WalkClient
from tests.test_error_corpus import real_urls

pytestmark = pytest.mark.django_db

SECRET = f"tok-{uuid.uuid4().hex}"
# The child re-runs this script, read back from its own command line.
SCRIPT = textwrap.dedent(
    f"""
    import subprocess, sys, time
    TOKEN = "{SECRET}"
    def hold(secret):
        time.sleep(0.2)
    if sys.argv[-1] == "parent":
        code = open("/proc/self/cmdline").read().split("\\0")[2]
        child = subprocess.Popen([sys.executable, "-c", code, "child"])
    while True:
        hold(TOKEN)
    """
)
DOWNLOADS = ("folded", "speedscope", "log")


@pytest.fixture
def one_liner():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "parent"], start_new_session=True)
    assert wait_until(lambda: descendants(proc.pid), 10), "the child never started"
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its child, started here
    proc.wait()


def _captured(pid: int, **settings) -> Capture:
    local = Host.objects.get(name="local")
    capture = services.capture_create(user=None, host=local, pid=pid, enqueue=False, **settings)
    assert pipeline.capture_execute(capture_id=capture.pk) == "done", capture.error
    capture.refresh_from_db()
    return capture


def _record(pid: int) -> Capture:
    return _captured(pid, duration=1, rate=50, subprocesses=True, native=False, idle=True)


def _process_frame(capture: Capture) -> str:
    tree = capture_files.read_flamegraph(capture)
    (name,) = {n["name"] for n in tree["children"] if SECRET in n["name"]}
    return name


@pytest.fixture
def world(one_liner, host_admin):
    """Captures and rows of the one-liner, and the ids that fill every route."""
    local = Host.objects.get(name="local")
    run_services.host_check(host=local)  # stores a process list naming the one-liner
    run = Run.objects.create(name="leaky")
    process = RunProcess.objects.create(run=run, host=local, pid=one_liner.pid, role="rank 0")
    group = CaptureGroup.objects.create(run=run, hosts_total=1, hosts_settled=1)
    records = [_record(one_liner.pid) for _ in range(2)]
    Capture.objects.filter(pk__in=[c.pk for c in records]).update(
        run=run, process=process, group=group
    )
    dump = _captured(one_liner.pid, kind="dump", dump_locals=True)
    frame = _process_frame(records[0])
    Comment.objects.create(capture=records[0], author=host_admin, body="this one", frame=frame)
    ids = {
        "int": str(records[0].pk),
        "process_pk": str(process.pk),
        "group_pk": str(group.pk),
        "ks_pk": str(KeywordSet.objects.get(is_default=True).pk),
        "host_pk": str(local.pk),
        "run_pk": str(run.pk),
        "comment_pk": "1",
        "str": "x",
    }
    return {"records": records, "dump": dump, "frame": frame, "ids": ids, "group": group}


def _queries(world) -> list[str]:
    """Query strings that make the walked pages pick captures, views, threads, frames."""
    a, b = (c.pk for c in world["records"])
    # Frames as a viewer can name them (the secret in a query would only be echoed; a
    # right guess finds nothing: tests/profiles/captures/test_redact.py).
    frames = [f'process {world["records"][0].pid}:"{redact.HIDDEN}"', "hold (<string>:5)"]
    picks = [{"a": a, "b": b}, {"a": a, "b": b, "view": "before"}]
    picks += [{"a": a, "b": world["dump"].pk}, {"capture": a}, {"thread": "MainThread"}]
    return ["", *(urlencode(p) for p in picks), *(f"frame={quote(f)}" for f in frames)]


def walked_paths(world) -> list[str]:
    """Every app route, with each capture's id (and each download) where it takes one."""
    urls: set[str] = set()
    captures = [*world["records"], world["dump"]]
    for capture in captures:
        for what in DOWNLOADS:
            ids = {**world["ids"], "pk": str(capture.pk), "int": str(capture.pk), "what": what}
            urls.update(url for url, _name, _route in real_urls(ids))
    for kind in ("group", "run", "host", "ks"):  # routes whose `pk` is another row's
        ids = {**world["ids"], "pk": world["ids"][f"{kind}_pk"]}
        urls.update(url for url, _name, _route in real_urls(ids))
    return sorted(u for u in urls if not u.startswith(("/admin/", "/accounts/logout")))


def _body(response) -> str:
    if response.streaming:
        return b"".join(response.streaming_content).decode("utf-8", "replace")
    return response.content.decode("utf-8", "replace")


def _leaks(client: WalkClient, paths: list[str], queries: list[str]) -> tuple[list[str], int]:
    """Each path with each query string: the URLs whose answer holds the secret, and how
    many URLs answered 200. A path whose code did not read the query string of its
    first request answers every other query string alike (tests/support/walk.py)."""
    leaks, answered = [], 0
    for path in paths:
        for index, query in enumerate(queries):
            url = f"{path}?{query}" if query else path
            response = client.get(url)
            alike = 1 if client.query_read else len(queries)
            answered += alike * (response.status_code == 200)
            if SECRET in _body(response):
                leaks.append(f"{url} ({response.status_code})")
            if index == 0 and not client.query_read:
                break
    return leaks, answered


@pytest.mark.parametrize("persona", ["teammate", "owner"])
def test_no_url_shows_a_viewer_or_operator_a_command_line_of_the_server(request, persona, world):
    client = WalkClient(raise_request_exception=False)
    client.force_login(request.getfixturevalue(persona))
    paths, queries = walked_paths(world), _queries(world)
    leaks, answered = _leaks(client, paths, queries)
    urls = len(paths) * len(queries)
    print(f"\nredaction walk ({persona}): {urls} URLs, {answered} answered 200")
    assert urls > 300 and answered > 150, (urls, answered)
    assert not leaks, "\n".join(leaks)


def test_a_host_admin_sees_the_command_lines_the_walk_hides(host_admin, world):
    client = Client()
    client.force_login(host_admin)
    a, b = (c.pk for c in world["records"])
    for url in (
        f"/compare/diff.json?a={a}&b={b}",
        f"/api/captures/{a}/flamegraph/",
        f"/captures/{world['dump'].pk}/download/folded/",
        f"/hosts/{world['ids']['host_pk']}/",
    ):
        assert SECRET in _body(client.get(url)), url
