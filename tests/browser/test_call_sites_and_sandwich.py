"""Issue 13 in Chromium: call sites under categories, the sandwich view from a table,
the search box and a flamegraph click, compare one click away, trends with time ticks,
and the advanced capture panel inside a 1400 px window."""

import os
import re
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from playwright.sync_api import expect

from profiles.captures import services
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL = '<img src=x onerror="window.__xss=1">'
LONG = "c10::impl::" + "::".join(f"Wrapper<T{i}, std::vector<int>>" for i in range(30))
RAW = (
    "thread (11): MainThread;main (train.py:10);train_step (train.py:45);"
    "_local_scalar_dense (libtorch_cpu.so);cuStreamSynchronize (libcuda.so.1) 57\n"
    "thread (11): MainThread;main (train.py:10);log_loss (train.py:60);"
    "_local_scalar_dense (libtorch_cpu.so);cuStreamSynchronize (libcuda.so.1) 3\n"
    "thread (11): MainThread;main (train.py:10);train_step (train.py:45);"
    "cuLaunchKernel (libcuda.so.1) 30\n"
    f"thread (12): loader;load (data.py:5);{EVIL} (evil.py:1);{LONG} (libc10.so) 10\n"
    "thread (13): feeder;feed (data.py:20);get (queue.py:171);wait (threading.py:320) 8\n"
)


def query(url: str) -> dict:
    return parse_qs(urlparse(url).query)


def import_capture(user, raw: str = RAW, run=None) -> Capture:
    upload = SimpleUploadedFile("train.txt", raw.encode())
    return services.capture_import(user=user, file=upload, run=run)


def test_a_category_shows_its_python_callers_and_a_caller_zooms_the_flamegraph(open_tab, teammate):
    capture = import_capture(teammate)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    callers = page.locator("#categories tr.callers").first
    expect(callers).to_contain_text("95% from train_step (train.py:45)")
    expect(callers).to_contain_text("5% from log_loss (train.py:60)")
    callers.get_by_role("button", name="train_step (train.py:45)").click()
    expect(page.locator("#fg-focus")).to_have_text("zoomed: train_step (train.py:45)")
    state = query(page.url)
    assert state["search"] == ["train_step (train.py:45)"]
    assert json_path(state)[-1] == "train_step (train.py:45)"
    page.reload()
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#fg-focus")).to_have_text("zoomed: train_step (train.py:45)")


def test_call_sites_follow_the_thread_filter(open_tab, teammate):
    capture = import_capture(teammate)
    page = open_tab(teammate).goto(capture.get_absolute_url() + "?thread=13")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    categories = page.locator("#categories")
    expect(categories).to_contain_text("100% from feed (data.py:20)")
    expect(categories).not_to_contain_text("train_step")
    page.click("#thread-pick summary")
    page.locator("#thread-options input[value='13']").uncheck()
    page.locator("#thread-options input[value='11']").check()
    expect(categories).to_contain_text("95% from train_step (train.py:45)")
    expect(categories).not_to_contain_text("feed (data.py:20)")


def json_path(state: dict) -> list[str]:
    import json

    return json.loads(state["focus"][0])


def test_a_top_self_row_opens_the_sandwich_with_once_per_sample_counts(open_tab, teammate):
    capture = import_capture(teammate)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    page.locator("#top-self .sandwich-link", has_text="cuStreamSynchronize").click()
    expect(page.locator("#sandwich")).to_be_visible()
    expect(page.locator("#sandwich[data-ready='1']")).to_have_count(1)
    expect(page.locator("#sandwich-frame")).to_have_text("cuStreamSynchronize (libcuda.so.1)")
    expect(page.locator("#sandwich-summary")).to_contain_text("60 samples (55.56% of all)")
    callers = page.locator("#sandwich-callers g[name^='_local_scalar_dense']")
    expect(callers).to_have_count(1)
    expect(page.locator("#sandwich-callers g[name^='train_step']")).to_have_count(1)
    assert query(page.url)["sandwich"] == ["cuStreamSynchronize (libcuda.so.1)"]
    page.reload()
    expect(page.locator("#sandwich[data-ready='1']")).to_have_count(1)
    expect(page.locator("#sandwich-summary")).to_contain_text("60 samples")
    # A caller clicked inside the sandwich becomes the sandwich's frame.
    page.locator("#sandwich-callers g[name^='train_step']").click()
    page.click("#sandwich-recentre")
    expect(page.locator("#sandwich-frame")).to_have_text("train_step (train.py:45)")
    expect(page.locator("#sandwich-summary")).to_contain_text("87 samples")
    page.click("#sandwich-close")
    expect(page.locator("#sandwich")).to_be_hidden()
    assert "sandwich" not in query(page.url)


def test_the_search_box_and_a_flamegraph_click_reach_the_sandwich(open_tab, teammate):
    capture = import_capture(teammate)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    page.fill("#fg-search", "train_st")
    page.click("#fg-sandwich")
    suggestion = page.locator("#sandwich-suggestions .sandwich-link")
    expect(suggestion).to_have_text(["train_step (train.py:45)"])
    suggestion.click()
    expect(page.locator("#sandwich-summary")).to_contain_text("87 samples")
    expect(page.locator("#sandwich-callees g[name^='cuLaunchKernel']")).to_have_count(1)
    page.locator("#flamegraph g[name^='load (data.py:5)']").first.click()
    page.click("#fg-focus-sandwich")
    expect(page.locator("#sandwich-frame")).to_have_text("load (data.py:5)")
    expect(page.locator("#sandwich-summary")).to_contain_text("10 samples")
    # Untrusted names stay text in the sandwich charts and their tooltips.
    assert page.evaluate("window.__xss") is None
    page.locator("#sandwich-callees g[name^='<img']").first.hover()
    expect(page.locator(".fg-tip:visible .fg-tip-frame")).to_have_text(f"{EVIL} (evil.py:1)")


def test_long_template_frames_take_one_line_with_the_full_name_on_hover(open_tab, teammate):
    capture = import_capture(teammate)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    button = page.locator("#top-self .sandwich-link", has_text="c10::impl")
    assert button.get_attribute("title") == f"{LONG} (libc10.so)"
    box = button.bounding_box()
    assert box["height"] < 30, box  # one line, not eight
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440


def test_the_captures_list_compares_two_checked_captures(open_tab, teammate):
    a, b = import_capture(teammate), import_capture(teammate)
    page = open_tab(teammate).goto("/captures/")
    button = page.locator("#compare-selected")
    expect(button).to_be_disabled()
    page.check(f"input[name=pick][value='{a.pk}']")
    expect(button).to_be_disabled()
    page.check(f"input[name=pick][value='{b.pk}']")
    expect(button).to_be_enabled()
    button.click()
    expect(page.locator("h1")).to_have_text("Compare captures")
    expect(page.locator(".side-before h2")).to_contain_text(f"#{a.pk}")
    expect(page.locator(".mainnav a.active")).to_have_text("Compare")


def test_the_capture_page_compares_with_the_previous_capture_in_one_click(open_tab, teammate):
    run = Run.objects.create(name="r")
    older = import_capture(teammate, run=run)
    newer = import_capture(teammate, run=run)
    page = open_tab(teammate).goto(newer.get_absolute_url())
    page.click("#compare-run")
    expect(page.locator(".side-before h2")).to_contain_text(f"#{older.pk}")
    expect(page.locator(".side-after h2")).to_contain_text(f"#{newer.pk}")


def test_compare_frame_tables_show_the_top_15_until_show_all(open_tab, teammate):
    lines = "".join(f"main (m.py:1);f{i} (m.py:{i}) {100 - i}\n" for i in range(40))
    a, b = import_capture(teammate, lines), import_capture(teammate, lines)
    page = open_tab(teammate).goto(f"/compare/?a={a.pk}&b={b.pk}")
    rows = page.locator("#top-self tbody tr")
    expect(rows.locator("visible=true")).to_have_count(15)
    page.locator("#top-self .show-all").click()
    assert rows.locator("visible=true").count() > 15


def test_a_bad_compare_id_shows_the_page_with_its_form(open_tab, teammate):
    page = open_tab(teammate).goto("/compare/?a=999999&b=999998")
    expect(page.locator("[role=alert]")).to_contain_text("No capture #999999 or #999998")
    expect(page.locator("form.compare-pick")).to_be_visible()
    expect(page.locator(".mainnav")).to_be_visible()


def test_run_trends_plot_a_whole_job_capture_once_with_time_ticks(open_tab, teammate):
    run = Run.objects.create(name="job")
    group = CaptureGroup.objects.create(run=run)
    ranks = [import_capture(teammate, run=run) for _ in range(3)]
    Capture.objects.filter(pk__in=[c.pk for c in ranks]).update(group=group)
    import_capture(teammate, run=run)
    page = open_tab(teammate).goto(f"/runs/{run.pk}/")
    chart = page.locator("#trends .trend-chart[data-state='ready']")
    expect(chart).to_have_count(1)
    # The three ranks are one point of the whole-job line; the lone capture is its own.
    expect(chart.locator("g.series[data-key='job'] a.point")).to_have_count(1)
    expect(chart.locator("g.series[data-kind='rank'] a.point")).to_have_count(4)
    ticks = chart.locator("g.axis.x .tick text").all_text_contents()
    assert ticks and all(re.fullmatch(r"\d\d:\d\d", t) for t in ticks), ticks


def test_trends_name_an_unknown_category(open_tab, teammate):
    page = open_tab(teammate).goto("/trends/?kind=category&name=nonsense")
    expect(page.locator("#trend-unknown")).to_contain_text("Unknown category “nonsense”")
    expect(page.locator(".mainnav a.active")).to_have_text("Trends")


def test_the_advanced_capture_panel_fits_a_1400_px_window(open_tab, owner):
    run = Run.objects.create(name="wide")
    host = Host.objects.get(name="local")
    # A running process (this one): the page's liveness check leaves its capture button.
    RunProcess.objects.create(
        run=run, host=host, pid=os.getpid(), role="target-0-with-a-long-role-name"
    )
    page = open_tab(owner, width=1400, height=900).goto(f"/runs/{run.pk}/")
    launcher = page.locator("#processes .capture-launch").first
    launcher.locator(".capture-more").click()
    panel = launcher.locator(".capture-panel")
    expect(panel).to_be_visible()
    box = panel.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 1400, box
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    # Not clipped by the scrolling card around the table: the point at the centre of the
    # Start button is the button itself (clipping leaves the page below it there).
    start = panel.get_by_role("button", name="Start capture")
    hit = page.evaluate(
        """(el) => { const r = el.getBoundingClientRect();
        return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === el; }""",
        start.element_handle(),
    )
    assert hit, "the Start button is hidden behind the card's edge"
    panel.locator("input[value=dump]").check()
    expect(panel.locator("input[name=dump_locals]")).to_be_visible()


def test_a_capture_analysed_before_call_sites_says_to_re_analyse(open_tab, teammate):
    capture = import_capture(teammate)
    stats = capture.stats
    for entry in stats["categories"] + stats["keywords"]:
        entry.pop("python_callers", None)
    Capture.objects.filter(pk=capture.pk).update(stats=stats)
    page = open_tab(teammate).goto(capture.get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#callers-note")).to_contain_text("once this capture is re-analysed")
    expect(page.locator("#categories tr.callers")).to_have_count(0)
