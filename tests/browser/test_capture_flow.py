"""The click-to-capture path in a real browser against a real worker and a real
process: create a host and a run, attach a live process, capture it, watch live
progress, then zoom, search, pin a comment, and reopen the same view from its URL."""

import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from tests.support.workload import start_workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PY_SPY = str(Path(sys.executable).parent / "py-spy")


@pytest.fixture
def workload():
    # One target thread: these tests assert what the page shows, not how many samples
    # (two targets spent 6.7 CPU-s over the two tests, alive 19 s each behind the page).
    with start_workload(threads=1) as process:
        yield process


def create_host_and_check(page, base: str, workload) -> None:
    page.goto(base + "/hosts/new/")
    page.fill("#id_name", "box")
    page.select_option("#id_transport", "local")
    # A local host's py-spy is the server's own (set by flamedeck, not editable here).
    page.click("form.stacked button[type=submit]")
    expect(page.locator("h1")).to_contain_text("box")
    page.click("#check-button")
    expect(page.locator("#check-result")).to_contain_text("ready to profile", timeout=30_000)
    expect(page.locator("#process-list")).to_contain_text(str(workload.pid))


def create_run_and_attach(page, base: str, workload) -> None:
    page.goto(base + "/runs/new/")
    page.fill("#id_name", "llama bs64")
    page.fill("#id_tags_text", "baseline")
    page.click("form.stacked button[type=submit]")
    expect(page.locator("h1")).to_contain_text("llama bs64")
    page.select_option("#id_host", label="box")
    page.click("#list-processes")
    row = page.locator("#host-processes tr", has_text=str(workload.pid)).first
    row.get_by_role("button", name="Use").click()
    page.fill("#id_role", "target-0")
    page.click("#attach-form button[type=submit]")
    expect(page.locator("#processes")).to_contain_text("target-0")


def capture_from_panel(page, duration: int) -> None:
    launcher = page.locator("#processes .capture-launch").first
    launcher.locator(".capture-more").click()
    launcher.locator("[name=duration]").fill(str(duration))
    launcher.locator("[name=rate]").fill("20")
    launcher.get_by_role("button", name="Start capture").click()


def test_a_host_admin_adds_a_host_and_captures_a_live_process_and_explores_the_result(
    open_tab, host_admin, celery_worker_process, workload
):
    tab = open_tab(host_admin)
    page, base = tab.page, tab.base_url
    create_host_and_check(page, base, workload)
    create_run_and_attach(page, base, workload)

    capture_from_panel(page, duration=4)
    card = page.locator(".dockcard").first
    expect(card.locator("[data-role=line]")).to_contain_text(
        re.compile(r"sampling rounds"), timeout=30_000
    )
    expect(card.get_by_role("link", name="Open result →")).to_be_visible(timeout=60_000)
    capture = Capture.objects.get()
    assert capture.status == Capture.Status.DONE, capture.error
    assert capture.process.role == "target-0" and capture.rate == 20 and capture.duration == 4
    card.get_by_role("link", name="Open result →").click()

    page.wait_for_selector("#flamegraph[data-ready='1']")
    expect(page.locator("#top-self")).to_contain_text("matmul_like")
    frame = page.locator('#flamegraph g[name^="forward"]').first
    frame.click()
    expect(page.locator("#fg-focus")).to_contain_text("forward")
    assert "forward" in parse_qs(urlparse(page.url).query)["focus"][0]

    page.fill("#fg-search", "matmul")
    expect(page.locator("#fg-search-info")).to_contain_text("% of all")
    assert parse_qs(urlparse(page.url).query)["search"] == ["matmul"]

    page.check("#pin-frame")
    page.fill(".commentform textarea", "**forward** dominates the step")
    page.click(".commentform button[type=submit]")
    comment = page.locator(".comments li").first
    expect(comment.locator(".commentbody strong")).to_have_text("forward")
    expect(comment.locator(".pin")).to_contain_text("forward")

    # A pasted link reopens the same view: search term and zoomed frame.
    shared = page.url.split("#")[0]
    other = open_tab(host_admin).page
    other.goto(shared)
    other.wait_for_selector("#flamegraph[data-ready='1']")
    expect(other.locator("#fg-search")).to_have_value("matmul")
    expect(other.locator("#fg-focus")).to_contain_text("forward")
    other.click("#fg-reset")
    expect(other.locator("#fg-focus")).to_have_text("")
    other.locator(".comments .pin").first.click()
    expect(other.locator("#fg-focus")).to_contain_text("forward")
    other.click("#fg-icicle")
    assert "view=icicle" in other.url


def test_a_capture_started_from_the_host_page_can_be_cancelled(
    open_tab, owner, celery_worker_process, workload
):
    from runs.models import Host

    Host.objects.filter(name="local").update(py_spy=PY_SPY)
    host = Host.objects.get(name="local")
    tab = open_tab(owner)
    page = tab.goto(f"/hosts/{host.pk}/")
    page.click("#check-button")
    row = page.locator("#process-list tr", has_text=str(workload.pid)).first
    row.locator(".capture-more").click()
    row.locator("[name=duration]").fill("60")
    row.get_by_role("button", name="Start capture").click()
    card = page.locator(".dockcard").first
    expect(card.locator("[data-role=status]")).to_have_text("running", timeout=30_000)
    # Three seconds of sampling first (300 rounds at the default rate): a cancel within
    # py-spy's first rounds can land before its first sample (with --native the first
    # one reads the binaries' unwind tables, slow on a loaded machine), and that capture
    # ends cancelled with nothing to keep, as it should (the cancel-early test covers it).
    rounds = re.compile(r"≈ ([3-9]\d{2}|[1-9]\d{3,}) sampling rounds")
    expect(card.locator("[data-role=line]")).to_contain_text(rounds, timeout=20_000)
    card.get_by_role("button", name="Cancel").click()
    expect(card.locator("[data-role=status]")).to_have_text("cancelled", timeout=45_000)
    capture = Capture.objects.get()
    assert capture.status == Capture.Status.CANCELLED and capture.stats["total_samples"] > 0


def test_a_teammate_sees_no_capture_button_and_still_comments(open_tab, teammate, owner):
    from runs.models import Host, Run, RunProcess
    from tests.profiles.web.test_views import imported

    run = Run.objects.create(name="r")
    RunProcess.objects.create(run=run, host=Host.objects.get(name="local"), pid=1, role="target-0")
    capture = imported(owner, run=run)
    page = open_tab(teammate).goto(run.get_absolute_url())
    expect(page.locator("#processes")).to_contain_text("operators capture")
    assert page.locator(".capture-btn").count() == 0
    page.goto(page.url.split("/runs/")[0] + capture.get_absolute_url())
    page.fill(".commentform textarea", "looks like a sync stall")
    page.click(".commentform button[type=submit]")
    expect(page.locator(".comments")).to_contain_text("looks like a sync stall")
