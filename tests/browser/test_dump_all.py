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
    expect(verdict).to_contain_text("rank-2 stands in wait_for_lock")
    expect(verdict.locator("code").first).to_contain_text("wait_for_lock")
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


def test_the_verdict_shows_its_frames_as_code_escaped_never_as_backticks(open_tab, teammate):
    waiting = factories.dump_thread(["all_reduce (x.py:3)", "main (train.py:93)"])
    odd = factories.dump_thread(["<module> (job.py:7)"])
    group = factories.whole_job_dump(
        Run.objects.create(name="module"),
        {"rank-0": [[waiting]] * 2, "rank-1": [[waiting]] * 2, "rank-2": [[odd]] * 2},
    )
    assert "`<module> (job.py:7)`" in group.stacks["verdict"]["explanation"]
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    verdict = page.locator("#stacks-verdict")
    expect(verdict.locator("code", has_text="<module> (job.py:7)")).to_have_count(1)
    expect(verdict).not_to_contain_text("`")
    assert "<code>&lt;module&gt; (job.py:7)</code>" in verdict.inner_html()
    assert verdict.locator("module").count() == 0  # no element made of the frame's name


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


def test_a_class_names_the_frameworks_step_beside_the_users_frame(open_tab, teammate):
    backward = factories.dump_thread([
        "all_reduce (torch/distributed/distributed_c10d.py:3252)",
        "Tensor.backward (torch/_tensor.py:623)",
        "train_step (train.py:79)",
        "main (train.py:93)",
    ])  # fmt: skip
    odd = factories.dump_thread(["wait_for_lock (train.py:62)", "main (train.py:90)"])
    group = factories.whole_job_dump(
        Run.objects.create(name="ddp"),
        {"rank-0": [[backward]] * 2, "rank-1": [[backward]] * 2, "rank-2": [[odd]] * 2},
    )
    waiting = next(c for c in group.stacks["classes"] if c["framework_frame"])
    assert waiting["framework_frame"]["function"] == "Tensor.backward"
    assert waiting["framework_frame"]["phase"] == "backward"
    page = open_tab(teammate).goto(f"/groups/{group.pk}/")
    row = page.locator("#stack-classes tbody tr", has_text="train_step (train.py:79)")
    expect(row.locator(".stack-framework")).to_have_text("in Tensor.backward (backward)")
    lock = page.locator("#stack-classes tbody tr", has_text="wait_for_lock")
    expect(lock.locator(".stack-framework")).to_have_count(0)
