"""The evidence pages read as a user would, in headless Chromium, on the real 4-rank
recordings with planted causes (tests/data/jobs/): the group page names the planted
straggler and explains it by what it does more; the capture page's findings, thread
states and threads say what each thread did, and nothing false."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_screenshots import shoot
from tests.support.recorded_jobs import record_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_group_page_names_the_planted_straggler_and_links_its_frames(
    open_tab, teammate, monkeypatch
):
    group, ids = record_group(monkeypatch, "straggler")
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    report = page.locator("#job-report[data-ready='1']")
    expect(report).to_have_count(1)
    shoot(page, "evidence_group_straggler")
    page = open_tab(teammate).goto(f"/captures/{ids[3]}/")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    shoot(page, "evidence_capture_rank3")
