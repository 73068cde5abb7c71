"""The compare and trends pages in headless Chromium: verdicts, the differential
flamegraph (zoom, search, escaped tooltips) and shared URLs that reopen the same view."""

import os
from urllib.parse import parse_qs, urlparse

import pytest

from runs.models import Run
from tests.profiles.test_compare_views import make_capture

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SYNC = "cuStreamSynchronize (libcuda.so.1)"
EVIL = "<b>evil</b> (x.py:1)"


@pytest.fixture(scope="module")
def chromium():
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists("/usr/bin/chromium"):
        pytest.skip("needs /usr/bin/chromium")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium, live_server, client, teammate):
    """A browser tab logged in as the teammate (a viewer)."""
    client.force_login(teammate)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    errors = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    # Failed loads are reported with their URL by the response hook.
    tab.on(
        "console",
        lambda msg: msg.type == "error"
        and not msg.text.startswith("Failed to load resource")
        and errors.append(msg.text),
    )
    tab.on("response", lambda r: r.status >= 400 and errors.append(f"{r.status} {r.url}"))
    yield tab
    context.close()
    assert not [e for e in errors if "favicon" not in e], errors


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
    page.wait_for_function("location.search.includes('zoom=')")
    assert query(page.url)["zoom"] == f"thread (1): MainThread;{SYNC}"
    assert page.locator("#diff-chart").get_attribute("data-zoom").endswith(SYNC)


def test_a_shared_url_reopens_the_same_view(page, live_server, pair):
    open_compare(page, live_server, *pair)
    page.locator("#view-before").click()
    page.wait_for_selector("#diff-chart[data-state=ready][data-view=before]")
    page.locator(f'#diff-chart g.frame[name="{SYNC}"]').click()
    page.locator("#diff-search").fill("cuStream")
    page.wait_for_function("location.search.includes('q=cuStream')")
    shared = page.url
    other = page.context.new_page()
    other.goto(shared)
    other.wait_for_selector("#diff-chart[data-state=ready][data-view=before]")
    assert other.locator("#view-before").get_attribute("aria-pressed") == "true"
    assert other.locator("#diff-search").input_value() == "cuStream"
    assert other.locator("#diff-chart").get_attribute("data-zoom").endswith(SYNC)
    assert query(other.url) == query(shared)
    evil = other.locator(f'#diff-chart g.frame[name="{EVIL}"]')
    assert evil.count() == 0 or evil.evaluate("g => g.classList.contains('fade')") is not None


def test_frame_names_stay_text_in_labels_and_tooltips(page, live_server, pair):
    open_compare(page, live_server, *pair)
    frame = page.locator(f'#diff-chart g.frame[name="{EVIL}"]')
    frame.hover()
    tip = page.locator(".diff-tip")
    tip.wait_for(state="visible")
    assert EVIL in tip.text_content() and "change:" in tip.text_content()
    assert page.locator(".diff-tip b, .d3-flame-graph-label b, #diff-details b").count() == 0


def test_a_trend_point_opens_its_capture(page, live_server):
    run = Run.objects.create(name="trend-run")
    make_capture(2000, 620, run=run, minutes_ago=30)
    latest = make_capture(2000, 100, run=run, minutes_ago=5, scheduled=True)
    page.goto(f"{live_server.url}/trends/?kind=category&name=sync&runs=5")
    page.wait_for_selector(".trend-chart[data-state=ready]")
    point = page.locator(f'.trend-chart a.point[data-capture="{latest.pk}"]')
    assert "scheduled" in point.get_attribute("class")
    point.click()
    page.wait_for_url(f"**/captures/{latest.pk}/")
