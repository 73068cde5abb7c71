"""Command lines and locals of the flamedeck server's own processes (host `local`) are
for host admins only: real py-spy dumps and records of a real process whose command
line and a local variable hold a secret, seen by a viewer, an operator and a host admin
on the page, in the JSON API and in the downloads."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from urllib.parse import quote

import pytest
from django.urls import reverse

from profiles.captures import pipeline, redact, services
from profiles.models import Capture
from profiles.storage import files as capture_files
from runs.models import Host

pytestmark = pytest.mark.django_db

SECRET = f"tok-{uuid.uuid4().hex}"
CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    def hold(secret):
        time.sleep(0.2)
    if sys.argv[-1] == "parent":
        child = subprocess.Popen([sys.executable, __file__, "child"])
    while True:
        hold(sys.argv[1])
    """
)


@pytest.fixture
def secret_process(tmp_path):
    """A parent whose argv and local `secret` hold SECRET, with one child."""
    script = tmp_path / "holder.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), SECRET, "parent"], start_new_session=True)
    time.sleep(0.5)  # past start-up, inside hold()
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its child, started here
    proc.wait()


def _run(secret_process, **settings) -> Capture:
    capture = services.capture_create(
        user=None,
        host=Host.objects.get(name="local"),
        pid=secret_process.pid,
        enqueue=False,
        **settings,
    )
    assert pipeline.capture_execute(capture_id=capture.pk) == "done", capture.error
    capture.refresh_from_db()
    return capture


@pytest.fixture
def dump(secret_process):
    return _run(secret_process, kind="dump", dump_locals=True)


@pytest.fixture
def record(secret_process):
    return _run(secret_process, duration=1, rate=50, subprocesses=True, native=False, idle=True)


def _download(client, capture, what):
    response = client.get(reverse("profiles:capture_download", args=[capture.pk, what]))
    body = b"".join(response.streaming_content).decode() if response.streaming else ""
    return response.status_code, body


def _sandwich(client, record) -> dict:
    """The sandwich of the parent's real process frame, named in full (a right guess)."""
    tree = capture_files.read_flamegraph(record)
    (name,) = {n["name"] for n in tree["children"] if SECRET in n["name"]}
    url = reverse("api:capture_sandwich", args=[record.pk]) + "?frame=" + quote(name)
    return client.get(url).json()


def _seen(client, capture) -> str:
    page = client.get(capture.get_absolute_url()).content.decode()
    api = client.get(reverse("api:capture_detail", args=[capture.pk])).content.decode()
    return page + api


@pytest.mark.parametrize("persona", ["teammate_client", "owner_client"])
def test_a_viewer_or_operator_sees_no_command_line_or_locals_in_a_local_dump(
    request, persona, dump
):
    client = request.getfixturevalue(persona)
    status, text = _download(client, dump, "folded")
    assert status == 200 and SECRET not in text
    assert f"Process {dump.pid}: {redact.HIDDEN}" in text
    assert f"secret: {redact.HIDDEN}" in text and "hold (" in text  # frames stay
    seen = _seen(client, dump)
    assert SECRET not in seen and '<dl class="locals"><dt class="mono">secret' in seen


def test_a_host_admin_sees_the_dump_as_py_spy_wrote_it(host_admin_client, dump):
    status, text = _download(host_admin_client, dump, "folded")
    assert status == 200 and f"Process {dump.pid}: " in text
    assert text.count(SECRET) >= 2  # the command line and the local
    assert SECRET in _seen(host_admin_client, dump)


@pytest.mark.parametrize("persona", ["teammate_client", "owner_client"])
def test_subprocess_frames_hide_their_command_line_from_a_viewer_or_operator(
    request, persona, record
):
    client = request.getfixturevalue(persona)
    tree = client.get(reverse("api:capture_flamegraph", args=[record.pk])).content.decode()
    assert f'process {record.pid}:\\"{redact.HIDDEN}\\"' in tree and SECRET not in tree
    status, folded = _download(client, record, "folded")
    assert status == 200 and SECRET not in folded
    assert f'process {record.pid}:"{redact.HIDDEN}"' in folded
    assert _download(client, record, "speedscope")[0] == 403
    assert _sandwich(client, record)["occurrences"] == 0  # no oracle for a guessed line
    assert SECRET not in _seen(client, record)


def test_a_host_admin_sees_subprocess_command_lines(host_admin_client, record):
    tree = host_admin_client.get(reverse("api:capture_flamegraph", args=[record.pk]))
    assert SECRET in tree.content.decode()
    assert SECRET in _download(host_admin_client, record, "folded")[1]
    assert _download(host_admin_client, record, "speedscope")[0] == 200
    assert _sandwich(host_admin_client, record)["occurrences"] > 0
