"""A relaunched job in headless Chromium: the run page draws its launches on a
timeline, keeps the replaced processes marked after its liveness check, and its
trend chart marks where the second launch began; the whole-job compare page reads
the two launches."""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import services
from runs.models import Host, RunProcess
from tests import factories
from tests.browser.conftest import SCREENSHOTS
from tests.support.recorded_jobs import record_group, relaunch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def relaunched():
    """A run of two launches (the first exited) with one capture of rank-0 in each."""
    local = Host.objects.get(name="local")
    procs = []

    def start():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        procs.append(proc)
        return proc

    first = start()
    run, _, _ = services.run_register(user=None, run_name="job", host=local, pid=first.pid,
                                      role="rank-0", launch="a")  # fmt: skip
    old = RunProcess.objects.get(pid=first.pid)
    RunProcess.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=1))
    factories.done_capture(
        run=run,
        process=old,
        shares={"sync": 30.0},
        step={"host_sync": 30.0},
        at=factories.minutes_ago(50),
    )
    first.kill()
    first.wait()
    second = start()
    services.run_register(user=None, run_name="job", host=local, pid=second.pid,
                          role="rank-0", launch="b")  # fmt: skip
    new = RunProcess.objects.get(pid=second.pid)
    factories.done_capture(
        run=run, process=new, shares={"sync": 5.0}, step={"host_sync": 5.0}, at=timezone.now()
    )
    yield run, old, new
    second.kill()
    second.wait()


def test_the_run_page_shows_its_launches_and_keeps_the_replaced_rank_marked(
    open_tab, owner, relaunched
):
    run, old, new = relaunched
    page = open_tab(owner).goto(run.get_absolute_url())
    expect(page.locator("#launches svg.launch-timeline rect")).to_have_count(2)
    expect(page.locator("#launches tr[data-launch]")).to_have_count(2)
    expect(page.locator(f'tr[data-process="{new.pk}"] [data-cell=alive]')).to_have_text("running")
    expect(page.locator(f'tr[data-process="{old.pk}"] [data-cell=alive]')).to_have_text("replaced")
    expect(page.locator("#trends g.launch-mark")).to_have_count(1)
    expect(page.locator("#trends g.launch-mark text")).to_have_text("launch 2")
    page.locator("#launches").screenshot(path=str(SCREENSHOTS / "run_launches.png"))


def test_the_whole_job_compare_page_reads_the_two_launches(open_tab, owner, client, monkeypatch):
    before, _ = record_group(monkeypatch, "balanced", run_name="gloo-job")
    relaunch(before.run)
    after, _ = record_group(monkeypatch, "straggler", run=before.run)
    assert after.run_id == before.run_id
    tab = open_tab(owner)
    page = tab.goto(after.get_absolute_url())
    page.locator("#compare-groups").click()
    page.locator("form.compare-pick button[type=submit]").click()
    expect(page.locator("#findings ul.findings-new")).to_contain_text("rank-3")
    expect(page.locator("#roles tr[data-role]")).to_have_count(4)
    sides = page.locator("section.sides .card p.muted")
    expect(sides.nth(0)).to_contain_text("run gloo-job · launch 1")
    expect(sides.nth(1)).to_contain_text("run gloo-job · launch 2")
    # The same answer through the API (`client` is the tab's logged-in test client).
    groups = client.get(f"/api/compare/groups/?a={before.pk}&b={after.pk}").json()["groups"]
    assert (groups["a"]["launches"], groups["b"]["launches"]) == ([1], [2])
    page.screenshot(path=str(SCREENSHOTS / "compare_groups.png"), full_page=True)
