"""The run page in headless Chromium: its liveness check turns a process that has
exited into "exited" with no capture button, and a run whose every process exited
into "Finished", without a reload."""

import subprocess
import sys

import pytest
from playwright.sync_api import expect

from runs.models import Host, Run, RunProcess

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_run_whose_processes_exited_reads_finished_and_offers_no_capture(open_tab, owner):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    run = Run.objects.create(name="ended-job", status=Run.Status.RUNNING)
    process = RunProcess.objects.create(
        run=run, host=Host.objects.get(name="local"), pid=gone.pid, role="rank-0"
    )  # never checked: the page must not say it runs
    page = open_tab(owner).goto(run.get_absolute_url())
    row = page.locator(f'tr[data-process="{process.pk}"]')
    expect(row.locator("[data-cell=alive]")).to_have_text("exited")
    expect(row.locator("[data-cell=capture]")).to_have_text("exited: nothing to capture")
    expect(row.locator(".capture-btn")).to_have_count(0)
    expect(page.locator("#run-status")).to_have_text("Finished")
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.ended_at is not None
