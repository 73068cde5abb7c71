"""Uploads: stored and queued (never parsed in the request), refused over the size
limit before the body is read, gzip accepted, and no sample downloads when unparsed."""

import gzip
import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.models import Capture

pytestmark = pytest.mark.django_db

RAW = (
    "thread (11): MainThread;train (train.py:10);cuStreamSynchronize (libcuda.so.1) 60\n"
    "thread (12): loader;load (data.py:5);cudaMemcpy (libcudart.so) 40\n"
)


def _upload(client, data: bytes, name: str = "samples.txt"):
    upload = io.BytesIO(data)
    upload.name = name
    return client.post("/api/captures/import/", {"file": upload})


def test_an_upload_is_stored_and_queued_not_parsed_in_the_request(
    owner_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued:
        response = _upload(owner_client, RAW.encode())
    assert response.status_code == 201 and response.json()["status"] == "parsing"
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.stats is None and not capture.flamegraph_file and capture.raw_size == len(RAW)
    assert len(queued) == 1
    page = owner_client.get(f"/captures/{capture.pk}/").content.decode()
    assert "status-parsing" in page and "Speedscope JSON" not in page


def test_a_gzip_upload_of_valid_samples_is_stored_once_and_analysed(owner_client, inline_analysis):
    response = _upload(owner_client, gzip.compress(RAW.encode()), "samples.txt.gz")
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.status == "done", capture.error
    assert capture.stats["total_samples"] == 100 and capture.raw_size == len(RAW)
    folded = owner_client.get(f"/captures/{capture.pk}/download/folded/")
    assert b"".join(folded.streaming_content).decode() == RAW


def test_an_import_that_could_not_be_parsed_offers_no_sample_downloads(
    owner_client, inline_analysis
):
    response = _upload(owner_client, b"<svg xmlns='http://www.w3.org/2000/svg'></svg>", "f.svg")
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.status == "failed" and capture.raw_file
    page = owner_client.get(f"/captures/{capture.pk}/").content.decode()
    assert "Speedscope JSON" not in page and "Raw folded stacks" not in page
    assert "could not be parsed" in page
    for what in ("speedscope", "folded"):
        response = owner_client.get(f"/captures/{capture.pk}/download/{what}/")
        assert response.status_code == 404


def test_an_upload_over_the_limit_answers_413_and_stores_nothing(owner_client, settings):
    settings.FLAMEDECK_MAX_UPLOAD_MB = 1
    response = _upload(owner_client, b"a;b 1\n" * 200_000)
    assert response.status_code == 413
    assert "FLAMEDECK_MAX_UPLOAD_MB" in response.json()["detail"]
    assert not Capture.objects.exists()
    page = owner_client.post("/captures/import/", {"file": io.BytesIO(b"x" * 2_000_000)})
    assert page.status_code == 413 and page.content.decode().count("\n") == 1


def test_an_oversized_content_length_is_refused_before_the_body_is_sent(live_server):
    """A real socket announces 600 MB and sends none of it: the answer must still come."""
    host, port = live_server.url.removeprefix("http://").split(":")
    head = (
        "POST /api/captures/import/ HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Content-Type: multipart/form-data; boundary=xyz\r\n"
        f"Content-Length: {600 * 1024 * 1024}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + b"--xyz\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or b"}" not in answer:
            block = sock.recv(4096)
            if not block:
                break
            answer += block
    status_line, _, rest = answer.decode().partition("\r\n")
    assert " 413 " in status_line
    assert "600 MB is over the 512 MB limit (FLAMEDECK_MAX_UPLOAD_MB)" in rest


def test_a_second_analysis_message_for_a_finished_capture_changes_nothing(
    owner_client, inline_analysis
):
    from profiles.captures.tasks import analyze_capture

    capture = Capture.objects.get(pk=_upload(owner_client, RAW.encode()).json()["id"])
    assert capture.status == "done"
    assert analyze_capture(capture.pk) == "skipped"
    assert analyze_capture(capture.pk + 1000) == "skipped"
    after = Capture.objects.get(pk=capture.pk)
    assert after.status == "done" and after.flamegraph_file.name == capture.flamegraph_file.name


EXPORT_CHILD = """
import gzip, json, os
from pathlib import Path
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
import django
django.setup()
from profiles import pyspy
from profiles.storage.files import export_bytes

lines = [";".join(f"module_{s}.function_{f} (/src/pkg/module_{s}.py:{f})" for f in range(60))
         + " 1" for s in range(15000)]
profile = pyspy.parse_raw_lines(lines)
folded_bytes = sum(len(line) + 1 for line in lines)
del lines
Path("/proc/self/clear_refs").write_text("5")  # peak RSS := RSS now
def peak_kb():
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0])
before = peak_kb()
export = export_bytes(profile, "speedscope")
growth = (peak_kb() - before) * 1024
print(json.dumps({"growth": growth, "folded_bytes": folded_bytes,
                  "lines": len(gzip.decompress(export).splitlines())}))
"""


def test_the_folded_export_of_a_big_speedscope_import_is_never_held_whole():
    """The export (raw folded text, ~50 MB here) is gzipped as it is written: the worker's
    peak grows by a fraction of it, where building the text, then its bytes, took 2x."""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", EXPORT_CHILD],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["lines"] == 15000
    assert figures["growth"] < 0.5 * figures["folded_bytes"], figures
