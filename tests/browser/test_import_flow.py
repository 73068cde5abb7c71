"""An upload is stored and queued: its page shows it parsing until an analysis worker
takes it, then reloads itself into the finished capture."""

import pytest
from playwright.sync_api import expect

from tests.profiles.web.test_views import RAW
from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_import_shows_parsing_until_the_analysis_worker_is_done(open_tab, owner, tmp_path):
    raw = tmp_path / "samples.txt"
    raw.write_text(RAW)
    page = open_tab(owner).goto("/captures/import/")
    page.set_input_files("#id_file", str(raw))
    page.click("form.stacked button[type=submit]")
    # No worker yet: the request answered without parsing anything.
    expect(page.locator("#status-badge")).to_have_text("parsing")
    expect(page.locator("#live-line")).to_contain_text("analysing samples")
    worker = WorkerProcess(tmp_path / "worker.log")
    try:
        page.wait_for_selector("#flamegraph[data-ready='1']", timeout=30_000)
        expect(page.locator("#status-badge")).to_have_text("Done")
        expect(page.locator(".downloads")).to_contain_text("Speedscope JSON")
    finally:
        worker.stop()
