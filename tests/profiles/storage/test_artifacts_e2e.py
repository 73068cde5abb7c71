"""Web and worker on different machines: separate MEDIA_ROOTs, PostgreSQL + Redis, and
FLAMEDECK_ARTIFACTS=database. Everything the worker stores, the web side reads."""

import io
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from profiles.models import Artifact, Capture
from tests.support.requirements import missing
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

DATA = Path(__file__).resolve().parents[2] / "data" / "pyspy"


def _wait_final(capture_id: int, timeout_s: float = 60) -> Capture:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        capture = Capture.objects.get(pk=capture_id)
        if capture.is_final:
            return capture
        time.sleep(0.2)
    raise AssertionError(f"capture {capture_id} stayed {capture.status}")


def _files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


@pytest.fixture
def separate_machines(settings, tmp_path):
    """The test process plays the web machine, a worker process the other machine."""
    if django_settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        missing("needs PostgreSQL on 127.0.0.1:5432 (and Redis) like a real deployment")
    web_media, worker_media = tmp_path / "web-media", tmp_path / "worker-media"
    settings.MEDIA_ROOT = web_media
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "profiles.storage.database.DatabaseStorage"},
    }
    worker = WorkerProcess(
        tmp_path / "worker.log",
        env={"MEDIA_ROOT": str(worker_media), "FLAMEDECK_ARTIFACTS": "database"},
    )
    yield web_media, worker_media
    worker.stop()


def _capture(client, pid: int) -> Capture:
    body = {"host": "local", "pid": pid, "duration": 2, "rate": 50}
    response = client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    capture = _wait_final(response.json()["id"])
    assert capture.status == "done", capture.error
    return capture


def _download(client, capture: Capture, what: str) -> bytes:
    response = client.get(f"/captures/{capture.pk}/download/{what}/")
    assert response.status_code == 200, (what, response.status_code)
    return b"".join(response.streaming_content)


def test_a_worker_elsewhere_stores_what_the_web_side_shows_and_neither_disk_gets_a_file(
    client, owner, running_workload, separate_machines
):
    client.force_login(owner)
    first, second = (_capture(client, running_workload.pid) for _ in range(2))
    total = first.stats["total_samples"]
    assert client.get(f"/api/captures/{first.pk}/flamegraph/").json()["value"] == total
    only = client.get(f"/api/captures/{first.pk}/", {"thread": "target-0"}).json()["stats"]
    assert [t["name"] for t in only["threads"]] == ["target-0"] and 0 < only["total_samples"]
    page = client.get(f"/captures/{first.pk}/").content.decode()
    assert "Speedscope JSON" in page and "Raw folded stacks" in page
    assert b"matmul_like" in _download(client, first, "folded")
    assert b'"$schema"' in _download(client, first, "speedscope")
    assert b"Sampling process" in _download(client, first, "log")
    compare = client.get("/compare/", {"a": first.pk, "b": second.pk})
    assert compare.status_code == 200
    assert b"within noise" in compare.content or b"real change" in compare.content
    diff = client.get("/compare/diff.json", {"a": first.pk, "b": second.pk})
    assert diff.status_code == 200 and diff.json()["tree"]["value"] > 0
    stored = set(Artifact.objects.values_list("name", flat=True))
    assert {first.raw_file.name, first.flamegraph_file.name, first.export_file.name} <= stored
    assert _files_under(*separate_machines) == []


def test_an_upload_is_parsed_by_the_worker_elsewhere_and_then_downloads_on_the_web_side(
    client, owner, separate_machines
):
    client.force_login(owner)
    upload = io.BytesIO((DATA / "threads.txt").read_bytes())
    upload.name = "threads.txt"
    response = client.post("/api/captures/import/", {"file": upload})
    assert response.status_code == 201 and response.json()["status"] == "parsing"
    capture = _wait_final(response.json()["id"])
    assert capture.status == "done", capture.error
    speedscope = _download(client, capture, "speedscope")
    assert b'"$schema"' in speedscope
    assert _download(client, capture, "folded") == (DATA / "threads.txt").read_bytes()
    assert _files_under(*separate_machines) == []
