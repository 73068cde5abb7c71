"""Whole jobs in headless Chromium: the group page updating itself while processes
run, fail and finish; "Capture all" asking first; a launcher's tree attached from a
host's process list; capture rows following a capture after a reload."""

import gzip
import json
import re
import subprocess
import sys
import textwrap

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone
from playwright.sync_api import expect

from profiles import pyspy
from profiles.captures import enqueue, services
from profiles.captures.analysis import stored_step_threads
from profiles.jobs import report as group_report
from profiles.jobs import services as jobs
from profiles.models import Capture
from runs import services as run_services
from runs.models import Host, Run, RunProcess
from tests.browser.test_screenshots import shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def no_enqueue(monkeypatch):
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)


def _raw(compute: int, wait: int) -> list[str]:
    step = "thread (1): MainThread;train (train.py:40);step (train.py:12)"
    return [
        f"{step};forward (model.py:88);cuLaunchKernel (libcuda.so.1) {compute}",
        f"{step};all_reduce (d.py:9);ncclAllReduce (libnccl.so.2) {wait}",
    ]


def _finish(capture: Capture, compute: int, wait: int) -> None:
    stats = pyspy.analyze(pyspy.parse_raw_lines(_raw(compute, wait)))
    stats["step_threads"] = stored_step_threads(stats, ())  # as the analysis step stores it
    tree = stats.pop("flamegraph")
    capture.flamegraph_file.save(
        "fg.json.gz", ContentFile(gzip.compress(json.dumps(tree).encode()))
    )
    capture.status, capture.stats = "done", stats
    capture.save()


GPU = {
    "interval_ms": 250,
    "skipped_lines": 0,
    "gpus": [
        {
            "index": 0,
            "points": [
                {"t": i / 4, "util": 80.0, "mem_used_mib": 1000.0, "mem_total_mib": 8000.0}
                for i in range(8)
            ],
        }
    ],
}


@pytest.fixture
def running_group(no_enqueue):
    run = Run.objects.create(name="job-live")
    local = Host.objects.get(name="local")
    for rank in range(4):
        RunProcess.objects.create(run=run, host=local, pid=500 + rank, role=f"rank-{rank}")
    group = jobs.capture_group_create(user=None, run=run, duration=10, rate=100)
    Capture.objects.filter(group=group).update(
        status="running",
        sampling_started_at=timezone.now(),  # py-spy has attached: no longer "attaching…"
        progress={"elapsed_s": 2.0, "duration_s": 10, "behind_s": 0.0, "expected_samples": 200},
    )
    return group


def test_the_group_page_follows_its_processes_to_the_end_without_a_reload(
    open_tab, teammate, running_group
):
    page = open_tab(teammate).goto(f"/groups/{running_group.pk}/")
    table = page.locator("#group-table")
    expect(table.locator("tbody tr[data-status=running]")).to_have_count(4)
    live_samples = table.locator("tbody tr[data-status=running] [data-cell=samples]")
    expect(live_samples).to_have_text(["≈ 200 rounds"] * 4)  # rounds, not samples
    expect(live_samples.first).to_have_attribute("title", re.compile("one sample per thread"))
    expect(page.locator("#process-filter")).to_contain_text("No process has samples yet")
    page.evaluate("window.__same_document = true")
    captures = list(Capture.objects.filter(group=running_group).order_by("pid"))
    Capture.objects.filter(pk=captures[0].pk).update(
        progress={"elapsed_s": 6.5, "duration_s": 10, "behind_s": 1.25, "expected_samples": 400}
    )
    expect(table.locator(f"tr[data-capture='{captures[0].pk}']")).to_contain_text("6.5 / 10 s")
    expect(table.locator(f"tr[data-capture='{captures[0].pk}']")).to_contain_text("1.25 s behind")
    failed = captures[3]
    failed.status, failed.error, failed.error_cause = "failed", "<b>no such pid</b>", "no_such_pid"
    failed.started_at = timezone.now() - timezone.timedelta(seconds=2)  # claimed, then failed
    failed.finished_at = timezone.now()
    failed.save()
    for capture, mix in zip(captures[:3], [(100, 300), (110, 290), (390, 10)], strict=True):
        capture.gpu_samples = GPU
        _finish(capture, *mix)
    expect(page.locator("#group-status")).to_have_text("partial", timeout=10_000)
    first_samples = table.locator(f"tr[data-capture='{captures[0].pk}'] [data-cell=samples]")
    # The result's samples, beside the rounds the live count had reached, and why they differ
    expect(first_samples).to_have_text("400 (≈ 200 rounds)")
    expect(first_samples).to_have_attribute("title", re.compile("one sample per thread per round"))
    failed_row = table.locator(f"tr[data-capture='{failed.pk}']")
    # elapsed, lag, samples and the two states the step threads are in (issue 38: the
    # words of "What the job says", not the keyword lens's launch/comm categories)
    expect(failed_row.locator("td.num")).to_have_text(["—"] * 5)
    expect(table.locator("thead th.num")).to_have_text(
        ["elapsed", "samples", "GPU launch %", "collective %"]
    )
    first_row = table.locator(f"tr[data-capture='{captures[0].pk}'] td[data-state]")
    expect(first_row).to_have_text(["25.0", "75.0"])
    cause = table.locator(f"tr.cause[data-cause-of='{failed.pk}']")
    expect(cause).to_contain_text("<b>no such pid</b>")  # shown as text, not markup
    expect(page.locator("#group-table b")).to_have_count(0)
    expect(page.locator("#process-filter input")).to_have_count(3)
    # No verdict in the process table before the stored report names the straggler.
    expect(table.locator(".straggler-badge")).to_have_count(0)
    # Every rank has ended; the report is not stored yet: the page says so and asks
    # again, and draws the report once the analysis stored it, without a reload.
    expect(page.locator("#report-reason")).to_contain_text("being stored")
    group_report.group_report_update(group_id=running_group.pk)
    straggler = page.locator("#job-ranks tr.straggler")
    expect(straggler).to_contain_text("rank-2", timeout=10_000)
    expect(straggler).to_contain_text("straggler")
    expect(page.locator("#straggler")).to_contain_text("rank-2 is the straggler")
    straggler_row = table.locator(f"tr[data-capture='{captures[2].pk}']")
    expect(straggler_row.locator(".straggler-badge")).to_have_text("straggler")
    expect(table.locator(".straggler-badge")).to_have_count(1)
    expect(page.locator("#job-report")).to_contain_text("No samples (not in the report): rank-3")
    page.wait_for_selector("#group-flamegraph[data-loaded='true']")
    expect(page.locator('#group-flamegraph g[name^="process local:"]')).to_have_count(3)
    expect(page.locator("#gpu-timeline figure")).to_have_count(3)  # drawn once all ended
    assert page.evaluate("window.__same_document") is True  # never reloaded
    shoot(page, "group_detail_live")


def test_capture_all_asks_first_remembers_its_settings_and_skips_exited(
    open_tab, owner, no_enqueue, running_pid
):
    run = Run.objects.create(name="job-ask")
    local = Host.objects.get(name="local")
    RunProcess.objects.create(run=run, host=local, pid=running_pid, role="rank-0")
    RunProcess.objects.create(run=run, host=local, pid=dead_pid(), role="rank-1")
    page = open_tab(owner).goto(f"/runs/{run.pk}/")
    expect(page.locator("tr.exited")).to_have_count(1)  # the page asked the host
    page.click("#capture-all")
    dialog = page.locator("#capture-all-dialog")
    expect(dialog.locator("#capture-all-plan")).to_have_text("Will capture 1 process on 1 host.")
    expect(dialog.locator("#capture-all-skipped")).to_contain_text("rank-1 — exited")
    expect(dialog.locator("[name=duration]")).to_have_value("30")
    dialog.locator("[name=duration]").fill("12")
    dialog.locator("[name=rate]").fill("47")
    dialog.locator("[name=native]").uncheck()
    shoot(page, "capture_all_dialog", full=False)
    dialog.locator("#capture-all-start").click()
    page.wait_for_url("**/groups/*/")
    capture = Capture.objects.get(run=run)
    assert (capture.duration, capture.rate, capture.native) == (12, 47, False)
    page.goto(page.url.split("/groups/")[0] + f"/runs/{run.pk}/")
    page.click("#capture-all")
    expect(page.locator("#capture-all-dialog [name=duration]")).to_have_value("12")
    expect(page.locator("#capture-all-dialog [name=rate]")).to_have_value("47")
    expect(page.locator("#capture-all-dialog [name=native]")).not_to_be_checked()


def test_a_viewer_sees_liveness_but_no_capture_all_or_attach(open_tab, teammate):
    run = Run.objects.create(name="job-view")
    RunProcess.objects.create(run=run, host=Host.objects.get(name="local"), pid=dead_pid())
    page = open_tab(teammate).goto(f"/runs/{run.pk}/")
    expect(page.locator("tr.exited")).to_have_count(1)
    expect(page.locator("#capture-all")).to_have_count(0)
    expect(page.locator("#attach-form")).to_have_count(0)


LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    ranks = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r)})
             for r in range(2)]
    print(" ".join(str(p.pid) for p in ranks), flush=True)
    time.sleep(120)
    """
)


def test_a_launcher_tree_is_found_on_the_host_and_attached_in_one_go(open_tab, owner):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True)
    ranks = [int(pid) for pid in launcher.stdout.readline().split()]
    try:
        local = Host.objects.get(name="local")
        run_services.host_check(host=local)
        page = open_tab(owner).goto(f"/hosts/{local.pk}/")
        root = page.locator(f"#process-list tr[data-pid='{launcher.pid}']")
        expect(root).to_have_class(re.compile(r"depth-\d has-children"))
        depth = int(root.get_attribute("class").split()[0].removeprefix("depth-"))
        for rank, pid in enumerate(ranks):
            row = page.locator(f"#process-list tr[data-pid='{pid}']")
            expect(row).to_have_class(f"depth-{depth + 1}")  # under its launcher
            expect(row.locator("td").nth(1)).to_have_text(str(rank))
        root.get_by_role("button", name="Attach tree (3)…").click()
        dialog = page.locator("#attach-dialog")
        expect(dialog.locator(f"input[value='{launcher.pid}']")).not_to_be_checked()
        expect(dialog.locator(f"[name=role_{ranks[1]}]")).to_have_value("rank-1")
        dialog.locator("#attach-new-run").fill("tree-job")
        shoot(page, "host_attach_tree", full=False)
        dialog.get_by_role("button", name="Attach").click()
        expect(page.locator("h1")).to_contain_text("tree-job")
        expect(page.locator("#processes")).to_contain_text("rank-1")
        run = Run.objects.get(name="tree-job")
        assert sorted(run.processes.values_list("pid", flat=True)) == sorted(ranks)
    finally:
        for pid in ranks:
            subprocess.run(["kill", str(pid)], check=False)
        launcher.kill()
        launcher.wait()


def test_capture_rows_follow_a_running_capture_after_a_reload(open_tab, teammate, no_enqueue):
    run = Run.objects.create(name="job-rows")
    capture = services.capture_create(
        user=None, host=Host.objects.get(name="local"), pid=4242, run=run, duration=10, rate=20
    )
    live = {"sampling": False, "elapsed_s": 0.0, "duration_s": 10, "behind_s": 0.0}
    Capture.objects.filter(pk=capture.pk).update(
        status="running", progress={**live, "expected_samples": 0}
    )
    page = open_tab(teammate).goto(f"/runs/{run.pk}/")
    row = page.locator(f"#captures tr[data-capture='{capture.pk}']")
    expect(row).to_contain_text("starting py-spy…")  # connected, not sampling yet
    Capture.objects.filter(pk=capture.pk).update(
        progress={**live, "sampling": True, "elapsed_s": 3.0, "expected_samples": 60}
    )
    expect(row).to_contain_text("3.0 / 10 s")
    expect(row).not_to_contain_text("starting py-spy")
    samples = row.locator("[data-cell=samples]")
    expect(samples).to_have_text("≈ 60 rounds")  # py-spy's rounds, labelled as such
    expect(samples).to_have_attribute("title", re.compile("one sample per thread per round"))
    capture.refresh_from_db()
    _finish(capture, 50, 150)
    expect(row.locator("[data-cell=status]")).to_have_text("Done")
    expect(samples).to_have_text("200")  # the result's samples, no longer called rounds
    expect(samples).to_have_attribute("title", "")
    # The step threads' states, as the capture page's headline has them; not the lens.
    expect(row.locator("[data-cell=states]")).to_contain_text("collective 75.0%")
    expect(row.locator("[data-cell=states]")).not_to_contain_text("comm")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
