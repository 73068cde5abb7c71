"""Share charts in Chromium: no drawn path joins two ranks' points, 64 ranks read as a
few lines with a picker for the rest, and every label is text."""

import re

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from runs.models import Run
from tests.factories import done_capture, minutes_ago, ranked_processes, whole_job_capture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL = '<img src=x onerror="window.__xss=1">'


def vertices(d: str) -> int:
    """Points on an SVG path that d3.line drew (one M, then one L per point)."""
    return len(re.findall(r"[ML]", d))


def drawn_series(chart) -> list[dict]:
    return chart.evaluate(
        """(node) => [...node.querySelectorAll("g.series")].map((g) => ({
            key: g.dataset.key, kind: g.dataset.kind, name: g.dataset.series,
            d: g.querySelector("path.line").getAttribute("d"),
            captures: [...g.querySelectorAll("a.point")].map((a) => Number(a.dataset.capture)),
            hrefs: [...g.querySelectorAll("a.point")].map((a) => a.getAttribute("href")),
        }))"""
    )


def assert_no_path_joins_two_ranks(series: list[dict], role_of: dict[int, str]) -> None:
    for s in series:
        assert vertices(s["d"]) == len(s["captures"]), s["name"]
        if s["kind"] == "rank":
            assert len({role_of[c] for c in s["captures"]}) == 1, s["name"]
        else:
            assert all(h.startswith("/groups/") for h in s["hrefs"]), s["name"]


def roles(run: Run) -> dict[int, str]:
    return dict(Capture.objects.filter(run=run).values_list("pk", "process__role"))


@pytest.fixture
def job_of_64():
    """Two whole-job captures of 64 ranks, then single captures of ranks in turn."""
    run = Run.objects.create(name="llama-64")
    processes = ranked_processes(run, 64)
    processes[5].role = EVIL
    processes[5].save()

    # Each capture's step thread spends as much in the gil state as its lens says.
    def step(shares):
        return [{"gil": s["gil"]} for s in shares]

    before = [{"gil": 20, "sync": 5}] * 64
    whole_job_capture(run, processes, before, step=step(before), at=minutes_ago(90))
    after = [{"gil": 20 + i % 4, "sync": 5} for i in range(64)]
    after[9] = {"gil": 55, "sync": 1}
    whole_job_capture(run, processes, after, step=step(after), at=minutes_ago(60))
    for minutes, rank, gil in [(40, 0, 25), (30, 3, 5), (20, 0, 38), (10, 3, 6)]:
        process = processes[rank]
        done_capture(
            process=process, shares={"gil": gil}, step={"gil": gil}, at=minutes_ago(minutes)
        )
    return run


def test_the_run_chart_draws_a_line_per_rank_and_a_few_of_64_at_first(
    open_tab, teammate, job_of_64
):
    page = open_tab(teammate).goto(job_of_64.get_absolute_url())
    chart = page.locator("#trends .trend-chart[data-state='ready']")
    expect(chart).to_have_count(1)
    series = drawn_series(chart)
    assert_no_path_joins_two_ranks(series, roles(job_of_64))
    assert [s["kind"] for s in series].count("job") == 1 and len(series) == 5
    assert "rank-9" in {s["name"] for s in series}  # highest latest share
    expect(chart.locator(".trend-legend .trend-entry")).to_have_count(5)
    expect(chart.locator(".series-picker summary")).to_have_text("ranks: 5 of 65 drawn")

    chart.locator(".series-picker summary").click()
    chart.locator(".series-picker label", has_text=EVIL).locator("input").check()
    expect(chart.locator("g.series")).to_have_count(6)
    expect(chart.locator(".trend-legend")).to_contain_text(EVIL)
    assert_no_path_joins_two_ranks(drawn_series(chart), roles(job_of_64))
    assert page.evaluate("window.__xss") is None


def test_the_run_chart_plots_one_rank_with_a_line_per_state(open_tab, teammate, job_of_64):
    page = open_tab(teammate).goto(job_of_64.get_absolute_url())
    chart = page.locator("#trends .trend-chart[data-state='ready']")
    expect(chart.locator(".trend-lens")).to_have_text("Thread states of the step threads")
    chart.locator("select.trend-view").select_option("series=role:rank-3")
    expect(chart.locator("g.series[data-kind='state']")).to_have_count(2)
    # A line per state takes that state's colour, as every state bar does.
    colour = chart.locator("g.series[data-series='gil'] path.line").get_attribute("stroke")
    assert colour == page.evaluate(
        "getComputedStyle(document.documentElement).getPropertyValue('--st-gil').trim()"
    )
    gil = chart.locator("g.series[data-series='gil'] a.point")
    expect(gil).to_have_count(4)  # rank-3 in two whole-job captures and twice alone
    captures = [int(c) for c in gil.evaluate_all("(as) => as.map((a) => a.dataset.capture)")]
    assert {roles(job_of_64)[c] for c in captures} == {"rank-3"}


def test_the_run_chart_plots_the_keyword_lens_only_when_picked_and_says_so(
    open_tab, teammate, job_of_64
):
    page = open_tab(teammate).goto(job_of_64.get_absolute_url())
    chart = page.locator("#trends .trend-chart[data-state='ready']")
    expect(chart.locator("g.series[data-kind='category']")).to_have_count(0)
    measure = chart.locator("select.trend-measure")
    measure.select_option("category")
    lens = "Keyword lens: built-in GPU set · categories"
    expect(chart.locator(".trend-lens")).to_have_text(lens)
    expect(chart.locator("select.trend-measure")).to_have_value("category")
    chart.locator("select.trend-view").select_option("series=role:rank-3")
    expect(chart.locator("g.series[data-kind='category']")).to_have_count(2)
    expect(chart.locator(".trend-lens")).to_have_text(lens)  # the pick survives a new view
    expect(chart.locator("g.series[data-series='sync']")).to_have_count(1)


def test_cross_run_trends_follow_each_rank_and_never_join_two(open_tab, teammate):
    role_of = {}
    for i in range(3):
        run = Run.objects.create(name=f"run-{i}")
        processes = ranked_processes(run, 4)
        # Each run's latest capture is of another rank: the old chart joined them.
        done_capture(process=processes[i], shares={"gil": 10 * i + 5}, at=minutes_ago(30 - i))
        role_of.update(roles(run))
    page = open_tab(teammate).goto("/trends/?kind=category&name=gil")
    chart = page.locator("#trends-page .trend-chart[data-state='ready']")
    expect(chart.locator("g.series")).to_have_count(3)
    series = drawn_series(chart)
    assert_no_path_joins_two_ranks(series, role_of)
    assert sorted(s["name"] for s in series) == ["rank-0", "rank-1", "rank-2"]
    expect(page.locator(".trend-known")).to_contain_text("categories:")
