"""The group page's downloads of the merged flamegraph follow the ticked processes."""

import pytest
from playwright.sync_api import expect

from tests.profiles.jobs.test_views import group  # noqa: F401 — the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_merged_flamegraph_downloads_the_ticked_processes(open_tab, teammate, group):  # noqa: F811
    rank0 = group.captures.get(pid=100)
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    page.wait_for_selector("#group-flamegraph[data-loaded='true']")
    page.locator(f'#process-filter input[value="{rank0.pk}"]').uncheck()
    with page.expect_download() as caught:
        page.locator("#export-folded").click()
    download = caught.value
    assert download.suggested_filename == f"job-{group.pk}-job.folded.txt"
    lines = open(download.path()).read().splitlines()
    assert {line.split(";")[0] for line in lines} == {"local:101 rank-1", "local:102 rank-2"}
    for box in page.locator("#process-filter input").all():
        box.uncheck()
    expect(page.locator("#export-speedscope")).to_be_hidden()
