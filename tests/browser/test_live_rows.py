"""A new capture appears in an open captures table without a reload (captures list,
run page, host page), and then follows its capture live."""

import pytest
from playwright.sync_api import expect

from profiles.models import Capture
from runs.models import Run
from tests.factories import done_capture, local_host, minutes_ago, ranked_processes, share_stats

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 15_000  # the tables look every 4 s; a loaded machine answers late


def queued(process) -> Capture:
    return Capture.objects.create(
        run=process.run, process=process, host=process.host, pid=process.pid
    )


def test_a_capture_queued_elsewhere_appears_on_the_run_page_and_follows_to_done(open_tab, teammate):
    run = Run.objects.create(name="live")
    (process,) = ranked_processes(run, 1)
    done_capture(process=process, shares={"sync": 5}, at=minutes_ago(5))
    page = open_tab(teammate).goto(run.get_absolute_url())
    expect(page.locator("#captures tbody tr")).to_have_count(1)
    capture = queued(process)
    row = page.locator(f'#captures tr[data-capture="{capture.pk}"]')
    expect(row).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#captures tbody tr").first).to_have_attribute(
        "data-capture", str(capture.pk)
    )
    expect(row.locator("[data-cell=status]")).to_contain_text("Queued")
    # Done: the row shows the step threads' states, never the keyword lens beside them.
    stats = share_stats({"comm": 66.7}, step={"collective": 60.0})
    Capture.objects.filter(pk=capture.pk).update(status=Capture.Status.DONE, stats=stats)
    cell = row.locator("[data-cell=states]")
    expect(cell).to_contain_text("collective 60.0%", timeout=WAIT_MS)
    expect(cell.locator(".statebar .seg.st-collective")).to_have_count(1)
    expect(cell.locator(".statebar .seg.st-compute")).to_have_count(1)
    expect(cell).not_to_contain_text("comm")


def test_the_captures_list_takes_in_a_new_capture_with_its_compare_box(open_tab, teammate):
    run = Run.objects.create(name="list")
    (process,) = ranked_processes(run, 1)
    page = open_tab(teammate).goto("/captures/")
    expect(page.locator("td.empty")).to_be_visible()
    capture = done_capture(process=process, shares={"sync": 5})
    row = page.locator(f'tr[data-capture="{capture.pk}"]')
    expect(row.locator("input[name=pick]")).to_be_visible(timeout=WAIT_MS)
    expect(row).to_contain_text("list")  # the run column
    expect(page.locator("td.empty")).to_have_count(0)


def test_the_host_page_keeps_its_twenty_newest_rows(open_tab, teammate):
    run = Run.objects.create(name="host")
    (process,) = ranked_processes(run, 1)
    for minutes in range(20):
        done_capture(process=process, shares={"sync": 1}, at=minutes_ago(30 - minutes))
    page = open_tab(teammate).goto(local_host().get_absolute_url())
    rows = page.locator("#captures tbody tr")
    expect(rows).to_have_count(20)
    capture = queued(process)
    expect(rows.first).to_have_attribute("data-capture", str(capture.pk), timeout=WAIT_MS)
    expect(rows).to_have_count(20)
