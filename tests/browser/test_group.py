"""The group page in headless Chromium: merged flamegraph, process filter, GPU
timeline, and frame names that stay text."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_screenshots import shoot
from tests.profiles.test_group_views import group  # noqa: F401 — the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_group_page_draws_the_job_flamegraph_filters_processes_and_shows_gpus(
    open_tab,
    teammate,
    group,  # noqa: F811
):
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    page.wait_for_selector("#group-flamegraph[data-loaded='true']")
    processes = page.locator('#group-flamegraph g[name^="process local:"]')
    expect(processes).to_have_count(3)
    # The crafted frame name is drawn as text: no <b> element inside the chart.
    expect(page.locator("#group-flamegraph b")).to_have_count(0)
    expect(page.locator('#group-flamegraph g[name^="<b>step</b>"]').first).to_be_attached()
    page.locator("#process-filter input").first.uncheck()
    expect(processes).to_have_count(2)
    expect(page.locator("#gpu-timeline figure")).to_have_count(3)
    expect(page.locator("#gpu-timeline path.gpu-util")).to_have_count(3)
    shoot(page, "group_detail")
