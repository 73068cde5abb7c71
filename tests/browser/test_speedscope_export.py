"""The speedscope download opens in speedscope itself (the npm release, a dev
dependency), and speedscope reads from it the threads and counts flamedeck shows."""

import functools
import http.server
import json
import shutil
import threading
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from profiles import pyspy
from profiles.captures import services
from profiles.pyspy.core.frames import split_location
from profiles.storage import files as capture_files
from tests.support.requirements import require

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RELEASE = Path(settings.BASE_DIR) / "node_modules/speedscope/dist/release"
FIXTURE = Path(settings.BASE_DIR) / "tests/data/pyspy/threads.txt"


@pytest.fixture
def speedscope_site(tmp_path):
    """speedscope's release served from 127.0.0.1 with room for a profile beside it."""
    require(RELEASE / "index.html", "speedscope's npm release", "npm ci")
    site = tmp_path / "site"
    shutil.copytree(RELEASE, site)
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_the_speedscope_download_validates_and_opens_in_speedscope_with_our_counts(
    client, teammate, chromium, speedscope_site
):
    capture = services.capture_import(
        user=teammate, file=SimpleUploadedFile("threads.txt", FIXTURE.read_bytes())
    )
    client.force_login(teammate)
    response = client.get(f"/captures/{capture.pk}/download/speedscope/")
    assert response.status_code == 200
    exported = json.loads(b"".join(response.streaming_content))
    schema = json.loads((RELEASE / "file-format-schema.json").read_text())
    jsonschema.validate(exported, schema)

    site, base = speedscope_site
    (site / "profile.json").write_text(json.dumps(exported))
    page = chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base}/index.html#profileURL={base}/profile.json")
    page.get_by_text("Sandwich").click()
    page.wait_for_selector("text=Symbol Name")
    rows = page.evaluate(
        "() => [...document.querySelectorAll('table tr')]"
        ".map((r) => [...r.children].map((c) => c.textContent))"
    )
    page.close()
    assert not errors, errors

    # The profile picker: one profile per thread, with flamedeck's sample counts.
    threads = capture.stats["threads"]
    picked = {(r[1], int(r[2])) for r in rows if len(r) == 3 and r[0].isdigit()}
    assert picked == {(f'Thread {t["tid"]} "{t["name"]}"', t["samples"]) for t in threads}
    # The sandwich of the profile shown first: totals per function as flamedeck
    # counts them for that thread alone (each sample once per frame).
    first = next(r[1] for r in rows if r[0] == "1")
    tid = first.split()[1]
    ours = pyspy.combine_threads(capture_files.read_thread_tables(capture), [tid])
    sandwich = Counter((r[2], int(r[0].split()[0])) for r in rows if len(r) == 3 and "(" in r[0])
    expected = Counter((split_location(f["frame"])[0], f["samples"]) for f in ours["top_total"])
    assert sandwich == expected and sum(sandwich.values()) >= 2
