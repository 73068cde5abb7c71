"""Downloads named after what they hold, and a whole job's merged flamegraph as folded
stacks or one speedscope file, redacted like the per-capture downloads."""

import json
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from profiles.models import Capture
from profiles.storage.downloads import file_name
from runs.models import Run, RunProcess
from tests.factories import (
    local_host,
    minutes_ago,
    ranked_processes,
    store_tree,
    thread_tree,
    whole_job_capture,
)
from tests.profiles.web.test_views import imported

pytestmark = pytest.mark.django_db

SCHEMA = Path(settings.BASE_DIR) / "node_modules/speedscope/dist/release/file-format-schema.json"
SECRET = "--token=hunter2"


def body(response) -> str:
    return b"".join(response.streaming_content).decode()


def disposition(response) -> str:
    return response["Content-Disposition"]


# --- per-capture downloads ---------------------------------------------------------------


def test_a_download_is_named_after_the_capture_and_its_rank(teammate_client, teammate):
    capture = imported(teammate)
    process = RunProcess.objects.create(
        run=Run.objects.create(name="r"), host=local_host(), pid=4242, role='rank-3"; rm -rf /'
    )
    Capture.objects.filter(pk=capture.pk).update(process=process, host=process.host, pid=4242)
    url = reverse("profiles:capture_download", args=[capture.pk, "speedscope"])
    response = teammate_client.get(url)
    assert response.status_code == 200
    expected = (
        f'attachment; filename="capture-{capture.pk}-local-4242-rank-3-rm-rf.speedscope.json"'
    )
    assert disposition(response) == expected
    folded = teammate_client.get(reverse("profiles:capture_download", args=[capture.pk, "folded"]))
    assert disposition(folded).endswith('-rank-3-rm-rf.folded.txt"')


def test_an_import_is_named_after_its_file_and_speedscope_shows_the_capture(
    teammate_client, teammate
):
    capture = imported(teammate)
    response = teammate_client.get(
        reverse("profiles:capture_download", args=[capture.pk, "speedscope"])
    )
    assert disposition(response) == (
        f'attachment; filename="capture-{capture.pk}-samples.txt.speedscope.json"'
    )
    assert json.loads(body(response))["name"] == f"capture #{capture.pk} samples.txt"


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("capture-1", "gpu01:77 rank-0"), "capture-1-gpu01-77-rank-0.txt"),
        (("job-2", '"\r\nX-Evil: 1'), "job-2-X-Evil-1.txt"),
        (("job-3", "Ünïcode ✓ run"), "job-3-Unicode-run.txt"),
        (("", "../.."), "flamedeck.txt"),
        (("capture-4", "x" * 500), "capture-4-" + "x" * 110 + ".txt"),
    ],
)
def test_file_names_keep_only_safe_characters(parts, expected):
    assert file_name(*parts, suffix="txt") == expected


# --- a whole job's merged flamegraph ---------------------------------------------------------


def secret_tree() -> dict:
    """A rank's tree with a `--subprocesses` frame naming a command line."""
    inner = thread_tree({"thread (21): worker": {"load (data.py:5)": 8}})
    process = {"name": f'process 77:"python loader.py {SECRET}"', "value": 8, "children": []}
    process["children"] = inner["children"]
    return {"name": "all", "value": 8, "children": [process]}


@pytest.fixture
def job():
    run = Run.objects.create(name="llama <7b>")
    processes = ranked_processes(run, 2)
    group = whole_job_capture(run, processes, [{"sync": 75}, {"sync": 0}], at=minutes_ago(5))
    rank0, rank1 = group.captures.order_by("pid")
    threads = {
        "thread (11): MainThread": {"cuStreamSynchronize (libcuda.so.1)": 30},
        "thread (12): loader": {"get (queue.py:171)": 10},
    }
    store_tree(rank0, thread_tree(threads))
    store_tree(rank1, secret_tree())
    return group


def export(client, group, what, **params):
    url = reverse("profiles:group_download", args=[group.pk, what])
    return client.get(url, params)


def test_the_folded_export_puts_each_rank_under_its_own_frame(teammate_client, job):
    response = export(teammate_client, job, "folded")
    assert response.status_code == 200
    assert disposition(response) == f'attachment; filename="job-{job.pk}-llama-7b.folded.txt"'
    lines = body(response).splitlines()
    assert "local:1000 rank-0;thread (11): MainThread;step (train.py:9);" in lines[0]
    assert lines[0].endswith("cuStreamSynchronize (libcuda.so.1) 30")
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == 30 + 10 + 8
    assert {line.split(";")[0] for line in lines} == {"local:1000 rank-0", "local:1001 rank-1"}


def test_the_export_follows_the_ticked_processes(teammate_client, job):
    rank1 = job.captures.get(pid=1001)
    lines = body(export(teammate_client, job, "folded", capture=rank1.pk)).splitlines()
    assert lines and all(line.startswith("local:1001 rank-1;") for line in lines)
    assert export(teammate_client, job, "folded", capture="x1").status_code == 400
    assert export(teammate_client, job, "svg").status_code == 404


def test_the_speedscope_export_is_one_valid_file_a_profile_per_rank_thread(teammate_client, job):
    response = export(teammate_client, job, "speedscope")
    doc = json.loads(body(response))
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["name"] == f"whole-job capture #{job.pk} of llama <7b>"
    weights = {p["name"]: sum(p["weights"]) for p in doc["profiles"]}
    assert weights == {
        'local:1000 rank-0 · Thread 11 "MainThread"': 30,
        'local:1000 rank-0 · Thread 12 "loader"': 10,
        'local:1001 rank-1 · Process 77 Thread 21 "worker"': 8,
    }
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert names.count("step") == 1  # one shared frame for the ranks' common function


@pytest.mark.parametrize("what", ["folded", "speedscope"])
def test_a_viewer_gets_the_job_export_without_the_servers_command_lines(
    teammate_client, host_admin, job, what
):
    seen = body(export(teammate_client, job, what))
    assert SECRET not in seen and "python loader.py" not in seen
    assert "local:1001 rank-1" in seen
    admin = Client()
    admin.force_login(host_admin)
    # speedscope names a process by its pid only, as py-spy does, for everyone.
    assert (SECRET in body(export(admin, job, what))) == (what == "folded")


def test_an_anonymous_visitor_gets_no_export(client, job):
    response = export(client, job, "folded")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
