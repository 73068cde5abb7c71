"""The evidence pages read as a user would, in headless Chromium, on the real 4-rank
recordings with planted causes (tests/data/jobs/, see its SOURCES.md), analysed by the
real pipeline: each page names the planted cause, links its frames to the flamegraph
and the sandwich of the rank it was measured on, and says nothing false."""

import re

import pytest
from playwright.sync_api import expect

from tests.support.recorded_jobs import record_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def report_of(tab, monkeypatch, case: str):
    """The group page of the recorded `case`, once its stored report is drawn:
    (page, the report's locator, capture ids by rank)."""
    group, ids = record_group(monkeypatch, case)
    page = tab.goto(f"/groups/{group.pk}/")
    return page, page.locator("#job-report[data-ready='1']"), ids


def test_the_group_page_names_the_planted_straggler_by_what_it_does_more(
    open_tab, teammate, monkeypatch
):
    page, report, ids = report_of(open_tab(teammate), monkeypatch, "straggler")
    findings = report.locator(".findings > li")
    expect(findings).to_have_count(1)  # the straggler, nothing else planted or reported
    expect(findings.first).to_have_attribute("data-rule", "straggler")
    expect(findings.first).to_contain_text("The other ranks wait for rank-3 in collectives")
    straggler = report.locator("#straggler")
    expect(straggler).to_contain_text("rank-3 is the straggler")
    first = straggler.locator(".explanation li").first
    expect(first).to_contain_text("rank-3: +44.6 pts [39.8, 49.5] in metric_per_sample (train.py)")
    # The waiting ranks are one class (their shares compared at Bonferroni's level), the
    # straggler its own.
    expect(report.locator("#job-classes li")).to_have_count(2)
    expect(report.locator("#job-classes li").first).to_contain_text("ranks 0-2: 67% collective")
    expect(report.locator("#job-classes li").last).to_contain_text("rank 3: 72% compute")
    rows = report.locator("#job-ranks tbody tr")
    expect(rows).to_have_count(4)
    expect(report.locator("#job-ranks tr.straggler")).to_have_attribute("data-rank", "rank-3")
    expect(page.locator("#window-note")).to_have_count(0)  # one window: no caveat
    first.locator("a.sandwich-link").click()
    page.wait_for_url(f"**/captures/{ids[3]}/?sandwich=*")
    expect(page.locator("#sandwich[data-ready='1']")).to_have_count(1)
    expect(page.locator("#sandwich-frame")).to_have_text("metric_per_sample (train.py:88)")


def test_a_frame_link_of_the_group_page_opens_that_rank_zoomed_to_the_frame(
    open_tab, teammate, monkeypatch
):
    group, ids = record_group(monkeypatch, "straggler")
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    zoom = page.locator("#straggler .explanation li a.zoom-link").first
    expect(zoom).to_have_text("flamegraph of rank-3")
    zoom.click()
    page.wait_for_url(f"**/captures/{ids[3]}/?frame=*")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#fg-focus")).to_have_text("zoomed: metric_per_sample (train.py:88)")
    assert "frame=" not in page.url  # replaced by the zoomed path, as a copyable link
    # The rank's own capture: its step thread computes, which is no finding by itself;
    # the page points at the job's report for the straggler.
    expect(page.locator("#findings")).to_contain_text("No finding")
    expect(page.locator("#job-link a")).to_have_attribute("href", f"/groups/{group.pk}/")
    expect(page.locator("#states-bar .stepline")).to_contain_text("step thread: trainer")
    expect(page.locator("#hidden-waits")).to_have_count(0)  # recorded with --idle


def test_a_capture_with_planted_host_syncs_names_the_line_and_zooms_to_it(
    open_tab, teammate, monkeypatch
):
    _, ids = record_group(monkeypatch, "hostsync")
    page = open_tab(teammate).goto(f"/captures/{ids[0]}/")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    finding = page.locator("#findings .findings > li")
    expect(finding).to_have_count(1)
    expect(finding).to_have_attribute("data-rule", "host_sync")
    expect(finding.locator(".advice")).to_contain_text("train.py:142 (in Job.train_step) syncs")
    expect(finding.locator(".findingvalue")).to_contain_text(re.compile(r"% \[[\d.]+, [\d.]+\]"))
    host_sync = page.locator("#states tr[data-state=host_sync]")
    expect(host_sync).to_contain_text("from Job.train_step (train.py:142)")
    expect(host_sync.locator(".statethreads")).to_contain_text("trainer")
    expect(page.locator("#states tr[data-state=unknown]")).to_have_count(1)  # always shown
    expect(page.locator("#threads tr", has_text="trainer").locator(".stepmark")).to_have_count(1)
    finding.locator(".frame-link").first.click()
    expect(page.locator("#fg-focus")).to_have_text("zoomed: Job.train_step (train.py:142)")


def test_a_starved_job_says_input_bound_and_names_the_saturated_loader(
    open_tab, teammate, monkeypatch
):
    _, report, _ = report_of(open_tab(teammate), monkeypatch, "starved")
    input_bound = report.locator(".findings > li[data-rule=input_bound]")
    expect(input_bound).to_contain_text("The step waits for input data")
    expect(input_bound.locator(".advice")).to_contain_text("decode_batch (train.py)")
    expect(report.locator(".findings > li[data-rule=host_sync]")).to_have_count(0)
    expect(report.locator("#straggler")).to_contain_text("data wait at Job.train (train.py:165)")


def test_without_idle_the_pages_say_which_threads_were_blocked_and_how_long(
    open_tab, teammate, monkeypatch
):
    group, ids = record_group(monkeypatch, "straggler_noidle")
    tab = open_tab(teammate)
    page = tab.goto(f"/captures/{ids[0]}/")
    note = page.locator("#hidden-waits")
    expect(note).to_contain_text("recorded without --idle")
    expect(note).to_contain_text(re.compile(r"trainer \d+%"))
    expect(page.locator("#threads td.blocked")).not_to_have_count(0)
    page = tab.goto(f"/groups/{group.pk}/")
    expect(page.locator("#job-hidden-waits")).to_contain_text("Record whole jobs with --idle")
    expect(page.locator("#job-ranks tr[data-rank=rank-0]")).to_contain_text(" of 399 rounds")
    expect(page.locator("#straggler")).to_contain_text("rank-3 is the straggler")
