"""The compare and trends pages in headless Chromium: verdicts, the differential
flamegraph (zoom, search, escaped tooltips) and shared URLs that reopen the same view."""

import json
import os
import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.profiles.compare.test_views import make_capture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SYNC = "cuStreamSynchronize (libcuda.so.1)"
EVIL = "<b>evil</b> (x.py:1)"


@pytest.fixture
def page(open_tab, teammate):
    """A tab logged in as the teammate (a viewer); the shared fixture checks page errors."""
    tab = open_tab(teammate, width=1280, height=900)
    server_errors = []
    tab.page.on("response", lambda r: r.status >= 500 and server_errors.append(r.url))
    yield tab.page
    assert not server_errors, server_errors


@pytest.fixture
def pair():
    return make_capture(2000, 620, minutes_ago=60), make_capture(2000, 120, minutes_ago=5)


def query(url):
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}


def open_compare(page, live_server, a, b, extra=""):
    page.goto(f"{live_server.url}/compare/?a={a.pk}&b={b.pk}{extra}")
    try:
        page.wait_for_selector("#diff-chart[data-state=ready]")
    except Exception:
        print(page.evaluate("document.getElementById('diff-chart').outerHTML.slice(0, 500)"))
        print(page.evaluate("[...document.scripts].map(s => s.src)"))
        raise


def test_a_teammate_reads_a_verdict_on_the_compare_page(page, live_server, pair):
    open_compare(page, live_server, *pair)
    verdict = page.locator('#categories tr[data-name="sync"] [data-verdict]')
    assert verdict.text_content() == "real change"
    assert "optimistic" in page.locator("#footnote").text_content()


def test_clicking_a_frame_zooms_and_the_zoom_lands_in_the_url(page, live_server, pair):
    open_compare(page, live_server, *pair)
    page.locator(f'#diff-chart g.frame[name="{SYNC}"]').click()
    # Polled from Python: a string predicate polled in the page is an eval the CSP refuses.
    expect(page).to_have_url(re.compile(r"[?&]focus="))
    assert json.loads(query(page.url)["focus"]) == ["thread (1): MainThread", SYNC]
    assert page.locator("#diff-chart").get_attribute("data-focus").endswith(SYNC)


def test_a_shared_url_reopens_the_same_view(page, live_server, pair):
    open_compare(page, live_server, *pair, extra="&thread=MainThread")
    page.locator("#view-before").click()
    page.wait_for_selector("#diff-chart[data-state=ready][data-view=before]")
    page.locator(f'#diff-chart g.frame[name="{SYNC}"]').click()
    page.locator("#diff-search").fill("cuStream")
    expect(page).to_have_url(re.compile(r"[?&]search=cuStream"))
    shared = page.url
    other = page.context.new_page()
    other.goto(shared)
    other.wait_for_selector("#diff-chart[data-state=ready][data-view=before]")
    assert other.locator("#view-before").get_attribute("aria-pressed") == "true"
    assert other.locator("#diff-search").input_value() == "cuStream"
    assert other.locator("#diff-chart").get_attribute("data-focus").endswith(SYNC)
    assert query(other.url) == query(shared)
    assert query(shared)["thread"] == "MainThread" and query(shared)["diff"] == "before"
    # Zoomed into the sync frame: its sibling is hidden, as on the first page.
    assert other.locator(f'#diff-chart g.frame[name="{EVIL}"]').count() == 0
    assert other.locator(f'#diff-chart g.frame[name="{SYNC}"]').count() == 1


def test_frame_names_stay_text_in_labels_and_tooltips(page, live_server, pair):
    open_compare(page, live_server, *pair)
    frame = page.locator(f'#diff-chart g.frame[name="{EVIL}"]')
    frame.hover()
    tip = page.locator(".fg-tip")
    tip.wait_for(state="visible")
    assert EVIL in tip.text_content() and "change:" in tip.text_content()
    assert page.locator(".fg-tip b, .d3-flame-graph-label b, #diff-details b").count() == 0


def test_the_compare_page_looks_right(page, live_server, pair, tmp_path):
    open_compare(page, live_server, *pair)
    page.wait_for_timeout(800)  # let the chart's transitions settle
    page.screenshot(
        path=os.environ.get("COMPARE_SCREENSHOT", str(tmp_path / "c.png")), full_page=True
    )


def test_a_trend_point_opens_its_capture(page, live_server):
    run = Run.objects.create(name="trend-run")
    make_capture(2000, 620, run=run, minutes_ago=30)
    latest = make_capture(2000, 100, run=run, minutes_ago=5, scheduled=True)
    page.goto(f"{live_server.url}/trends/?kind=category&name=sync&runs=5")
    page.wait_for_selector(".trend-chart[data-state=ready]")
    if os.environ.get("COMPARE_SCREENSHOT"):
        page.screenshot(path=os.environ["COMPARE_SCREENSHOT"] + ".trends.png", full_page=True)
    point = page.locator(f'.trend-chart a.point[data-capture="{latest.pk}"]')
    assert "scheduled" in point.get_attribute("class")
    point.click()
    page.wait_for_url(f"**/captures/{latest.pk}/")


def test_the_run_page_charts_a_picked_keyword_lens_and_marks_lag_and_schedule(page, live_server):
    run = Run.objects.create(name="trended")
    make_capture(2000, 620, run=run, minutes_ago=30)
    lagging = make_capture(2000, 400, run=run, minutes_ago=20, lag={"verdict": "degraded"})
    scheduled = make_capture(2000, 100, run=run, minutes_ago=10, scheduled=True)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    # These captures stored no states (analysed before them): the chart says so.
    expect(page.locator("#trends .trend-empty")).to_contain_text("step-thread states")
    page.locator("#trends select.trend-measure").select_option("category")
    expect(page.locator("#trends .trend-lens")).to_contain_text("Keyword lens: ")
    page.wait_for_selector("#trends [data-state=ready]")
    sync = page.locator('#trends g.series[data-series="sync"]')
    assert sync.locator("a.point").count() == 3
    assert "lagging" in sync.locator(f'a.point[data-capture="{lagging.pk}"]').get_attribute("class")
    point = sync.locator(f'a.point[data-capture="{scheduled.pk}"]')
    assert "scheduled" in point.get_attribute("class")
    point.click()
    page.wait_for_url(f"**/captures/{scheduled.pk}/")


def test_a_frame_row_opens_its_sandwich_in_the_capture_it_belongs_to(page, live_server, pair):
    open_compare(page, live_server, *pair)
    row = page.locator("#top-self tbody tr").filter(has_text=EVIL)
    assert page.locator("#top-self b").count() == 0  # a hostile frame stays text
    for side, capture in zip(("before", "after"), pair, strict=True):
        row.locator(f"a.sandwich-{side}").click()
        page.wait_for_url(f"**/captures/{capture.pk}/?sandwich=*")
        page.wait_for_selector("#sandwich[data-ready='1']")
        assert page.locator("#sandwich-frame").text_content() == EVIL
        samples = 2000 - (620 if side == "before" else 120)
        assert f"{samples:,} samples" in page.locator("#sandwich-summary").text_content()
        open_compare(page, live_server, *pair)
    # The inclusive table links the same way: a frame in both lists, two sandwiches.
    total = page.locator("#top-total tbody tr").filter(has_text="main (train.py:1)")
    assert total.locator("a.sandwich-before, a.sandwich-after").count() == 2
