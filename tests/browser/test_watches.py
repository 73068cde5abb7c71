"""The watch pages in Chromium: sparklines and series charts drawn (with the shift
point), frame names shown as text, no page error (CSP holds: no inline code)."""

import pytest

from profiles.watches.judging import capture_judge
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
HOSTILE = "<img src=x onerror=alert(1)> (evil.py:1)"


def stats(level):
    made = factories.state_stats(1000, data_wait=level)
    made["top_self"] = [{"frame": HOSTILE, "samples": round(level * 10)}]
    return made


@pytest.fixture
def drifting_watch():
    rank = factories.process(factories.run(), "rank-0")
    baseline = factories.capture(rank, stats(10), minutes_ago=99)
    watch = factories.watch(baseline, min_samples=500)
    levels = [10, 10.1, 9.9, 10, 10.2, 9.8, 10, 12.5, 12.4, 12.6, 12.5, 12.3, 12.7, 12.5]
    for minutes, level in zip(range(len(levels), 0, -1), levels, strict=True):
        capture = factories.capture(rank, stats(level), minutes_ago=minutes)
        capture_judge(capture_id=capture.pk)
    return watch


def test_the_list_draws_a_sparkline_with_the_shift_point(open_tab, teammate, drifting_watch):
    page = open_tab(teammate).goto("/watches/")
    spark = page.locator(f'.sparkline[data-watch="{drifting_watch.pk}"] svg')
    assert spark.locator("path.line").count() == 1
    assert spark.locator("line.shift").count() == 1


def test_a_watch_page_charts_each_share_and_shows_frame_names_as_text(
    open_tab, teammate, drifting_watch
):
    page = open_tab(teammate).goto(drifting_watch.get_absolute_url())
    charts = page.locator("#series-charts .chart")
    assert charts.count() >= 3
    assert page.locator("#series-charts line.shift").count() >= 1
    titles = page.locator("#series-charts .chart h3").all_inner_texts()
    assert any(HOSTILE in t for t in titles)
    assert page.locator("#series-charts img").count() == 0
