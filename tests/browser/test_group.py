"""The group page in headless Chromium: merged flamegraph, process filter, GPU
timeline, and frame names that stay text."""

import pytest
from playwright.sync_api import expect

from tests.profiles.jobs.test_views import group  # noqa: F401 — the fixture

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


def test_a_frame_of_the_merged_flamegraph_opens_its_sandwich_in_its_own_process(
    open_tab,
    teammate,
    group,  # noqa: F811
):
    rank1 = group.captures.get(pid=101)
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    page.wait_for_selector("#group-flamegraph[data-loaded='true']")
    link = page.locator("#group-sandwich")
    expect(link).to_be_hidden()
    page.locator('#group-flamegraph g.frame[name="<b>step</b> rank 101"]').click()
    expect(link).to_have_text("sandwich of <b>step</b> rank 101 in local:101 rank-1")
    expect(page.locator("#group-sandwich b")).to_have_count(0)  # the frame stays text
    page.locator('#group-flamegraph g.frame[name="process local:101 rank-1"]').click()
    expect(link).to_be_hidden()  # a process node is no frame of the program
    page.locator('#group-flamegraph g.frame[name="<b>step</b> rank 101"]').click()
    link.click()
    page.wait_for_url(f"**/captures/{rank1.pk}/?sandwich=*")
    expect(page.locator("#sandwich[data-ready='1']")).to_have_count(1)
    expect(page.locator("#sandwich-frame")).to_have_text("<b>step</b> rank 101")
    expect(page.locator("#sandwich-summary")).to_contain_text("100 samples")


def test_the_group_page_says_attaching_holds_skew_and_verdicts_until_the_job_ends(
    open_tab,
    teammate,
    group,  # noqa: F811
):
    from django.utils import timezone

    attaching, sampling, done = group.captures.order_by("pid")
    own_stats = {c.pk: c.stats for c in (attaching, sampling)}
    now = timezone.now()
    attaching.status, attaching.stats = "running", None
    attaching.progress = {"sampling": False, "elapsed_s": 0.0, "duration_s": 10,
                          "behind_s": 0.0, "expected_samples": 0}  # fmt: skip
    sampling.status, sampling.stats, sampling.sampling_started_at = "running", None, now
    sampling.progress = {"sampling": True, "elapsed_s": 3.0, "duration_s": 10,
                         "behind_s": 0.0, "expected_samples": 60}  # fmt: skip
    done.sampling_started_at = now
    for capture in (attaching, sampling, done):
        capture.save()
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    row = page.locator(f'#group-table tr[data-capture="{attaching.pk}"]')
    expect(row.locator("[data-cell=elapsed]")).to_have_text("attaching…")
    expect(row.locator("[data-cell=samples]")).to_have_text("—")
    expect(row).not_to_contain_text("keeping up")
    expect(page.locator(f'tr[data-capture="{sampling.pk}"] [data-cell=samples]')).to_have_text(
        "≈ 60 rounds"
    )
    expect(page.locator("#group-skew")).to_have_text("waiting for every process to start")
    expect(page.locator(".straggler-badge")).to_have_count(0)  # no verdict while running

    # Both start (0.3 s apart) and end; the page follows by polling.
    attaching.sampling_started_at = now + timezone.timedelta(seconds=0.3)
    for capture, rounds in ((attaching, 48), (sampling, 100)):
        capture.status = "done"
        capture.stats = own_stats[capture.pk]
        capture.progress = {"elapsed_s": 9.6, "expected_samples": rounds, "sampled_s": 9.8}
        capture.save()
    expect(page.locator("#group-skew")).to_have_text("0.3 s")
    samples = page.locator(f'tr[data-capture="{attaching.pk}"] [data-cell=samples]')
    expect(samples).to_have_text("100 (≈ 48 rounds)")
    assert "one sample per thread per round" in samples.get_attribute("title")
    expect(page.locator(f'tr[data-capture="{sampling.pk}"] [data-cell=samples]')).to_have_text(
        "100"
    )  # no gap, nothing to explain
