"""The "Dump all ranks" button in a real browser, against a real worker and real hung processes:
the button on the run page, the verdict sentence, the merged prefix tree with the odd
ranks' path marked, each rank's dumps one click away; and frame names that stay text."""

import pytest
from playwright.sync_api import expect

from runs.models import Host, Run, RunProcess
from tests import factories
from tests.support.hung_ranks import Rank

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def hung_job():
    ranks = [Rank("waiter"), Rank("waiter"), Rank("locked"), Rank("waiter")]
    run = Run.objects.create(name="hung-llama", status="running")
    local = Host.objects.get(name="local")
    for i, rank in enumerate(ranks):
        RunProcess.objects.create(run=run, host=local, pid=rank.pid, role=f"rank-{i}")
    yield run
    for rank in ranks:
        rank.stop()


def test_dump_all_ranks_says_which_rank_stands_where_and_links_its_dumps(
    open_tab, owner, hung_job, celery_worker_process
):
    tab = open_tab(owner)
    page = tab.goto(hung_job.get_absolute_url())
    page.click("#dump-all")
    page.wait_for_url("**/groups/*/")
    verdict = page.locator("#stacks-verdict")
    expect(verdict).to_have_attribute("data-kind", "stuck", timeout=30_000)
    expect(verdict).to_contain_text("rank-2 stands in `wait_for_lock")
    expect(verdict).to_contain_text("wait_for_lock")
    expect(page.locator("h1")).to_contain_text("Whole-job dump")
    odd = page.locator("#stack-tree .stack-node.odd")
    expect(odd.last).to_contain_text("1 rank")
    expect(odd.last).to_contain_text("wait_for_lock")
    expect(page.locator("#stack-tree .stack-node").first).to_contain_text("4 ranks")
    expect(page.locator("#stack-classes tbody tr")).to_have_count(2)
    page.locator(".stack-dumps summary").click()
    page.locator(".stack-dumps a", has_text="rank-2").click()
    page.wait_for_url("**/captures/*/")
    expect(page.locator("body")).to_contain_text("wait_for_lock")


def test_frame_names_in_the_dump_verdict_and_tree_stay_text(open_tab, teammate):
    evil = "<img src=x onerror=window.__pwned=1>"
    waiting = factories.dump_thread([f"{evil} (train.py:9)", "main (train.py:93)"])
    odd = factories.dump_thread(["wait_for_lock (<b>lock</b>.py:62)", "main (train.py:90)"])
    group = factories.whole_job_dump(
        Run.objects.create(name="evil"),
        {"rank-0": [[waiting]] * 2, "rank-1": [[waiting]] * 2, "rank-2": [[odd]] * 2},
    )
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    expect(page.locator("#stacks-verdict")).to_contain_text("<b>lock</b>")
    expect(page.locator("#stack-tree")).to_contain_text(evil)
    expect(page.locator("#job-report img, #job-report b")).to_have_count(0)
    assert page.evaluate("() => window.__pwned") is None


def test_the_page_of_a_recorded_hung_job_says_stuck_where_it_named_a_straggler(
    open_tab, teammate, monkeypatch
):
    from tests.support.recorded_jobs import record_group

    group, _ = record_group(monkeypatch, "hung")
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    expect(page.locator("#straggler")).to_contain_text("rank-2 is where the job is stuck")
    expect(page.locator("#job-report")).to_contain_text("wait_for_lock (hang_train.py:")
    expect(page.locator("#job-report")).not_to_contain_text("remove that excess")
