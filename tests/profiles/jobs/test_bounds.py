"""A whole-job capture's answers stay bounded as its ranks grow (issue 47): the group
page, its live JSON, `GET /api/groups/<id>/`, its timeline, its merged flamegraph and the
whole-job compare ask the database as often for 300 ranks as for 10, and carry a page of
ranks (profiles.jobs.bounds), the classes of ranks first; the UI asks for the rest.
Timings are bench/app/bench_group_pages.py's, not these tests'."""

import json

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from profiles import pyspy
from profiles.jobs.bounds import FLAMEGRAPH_PROCESSES, RANKS_PER_PAGE, lead_order, spread
from profiles.models import Capture, CaptureGroup
from runs.models import Run
from tests import factories

pytestmark = pytest.mark.django_db

STEP = "thread (1): MainThread;train (train.py:40);step (train.py:12)"


def _stats(compute: int, collective: int) -> dict:
    lines = [
        f"{STEP};forward (model.py:88);cuLaunchKernel (libcuda.so.1) {compute}",
        f"{STEP};all_reduce (distributed.py:2050);ncclAllReduce (libnccl.so.2);"
        f"pthread_cond_wait (libc.so.6) {collective}",
    ]
    stats = dict(pyspy.analyze(pyspy.parse_raw_lines(lines)))
    stats.pop("flamegraph")
    return stats


ALIKE, SLOW = _stats(100, 250), _stats(400, 10)


@pytest.fixture(scope="module")
def jobs(django_db_setup, django_db_blocker):
    """Per size (10, 300 ranks): a run with two whole-job captures, before (every rank
    alike) and after (rank-7 the straggler), made of one real timed rank's files."""
    names = ["bounds-job-10", "bounds-job-300"]
    with django_db_blocker.unblock():
        like = factories.store_tree(factories.timed_capture(), _tree())
        made = {}
        try:
            for ranks, name in zip((10, 300), names, strict=True):
                run = Run.objects.create(name=name)
                at = factories.minutes_ago(30)
                before = factories.large_whole_job(run, ranks, lambda n: ALIKE, like=like, at=at)
                after = factories.large_whole_job(
                    run, ranks, lambda n: SLOW if n == 7 else ALIKE, like=like
                )
                made[ranks] = (before, after)
            yield made
        finally:  # made outside the tests' transactions: removed by hand
            Capture.objects.filter(Q(run__name__in=names) | Q(pk=like.pk)).delete()
            Run.objects.filter(name__in=names).delete()


def _tree() -> dict:
    return factories.thread_tree({"thread (1): MainThread": {"leaf (a.py:1)": 5, "b (b.py:2)": 3}})


def answers(before, after) -> dict[str, str]:
    compare = f"?a={before.pk}&b={after.pk}"
    return {
        "group page": f"/groups/{after.pk}/",
        "live JSON": f"/api/groups/{after.pk}/live/",
        "group API": f"/api/groups/{after.pk}/",
        "timeline": f"/api/groups/{after.pk}/timeline/",
        "merged flamegraph": f"/api/groups/{after.pk}/flamegraph/",
        "compare API": f"/api/compare/groups/{compare}",
        "compare page": f"/compare/groups/{compare}",
    }


def _get(client, url: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, (url, response.content[:300])
    return response, len(queries.captured_queries)


def test_every_answer_asks_the_database_as_often_for_300_ranks_as_for_10(jobs, teammate_client):
    counts = {}
    for ranks, (before, after) in jobs.items():
        for name, url in answers(before, after).items():
            teammate_client.get(url)  # warm: templates, the URL resolver
            counts[name, ranks] = _get(teammate_client, url)[1]
    grew = {name: (counts[name, 10], counts[name, 300]) for name, _ in counts
            if counts[name, 300] > counts[name, 10]}  # fmt: skip
    assert not grew, f"queries (10 ranks, 300 ranks) that grew with ranks: {grew}"


def test_the_group_api_carries_a_page_of_processes_and_says_where_it_lies(jobs, teammate_client):
    before, after = jobs[300]
    body = _get(teammate_client, f"/api/groups/{after.pk}/")[0].json()
    assert body["captures"] == 300 and len(body["processes"]) == RANKS_PER_PAGE
    assert body["processes_page"] == {"offset": 0, "limit": RANKS_PER_PAGE, "total": 300,
                                      "next": RANKS_PER_PAGE}  # fmt: skip
    assert body["straggler"]["name"] == "rank-7" and len(body["classes"]) == 2
    last = _get(teammate_client, f"/api/groups/{after.pk}/?offset=256&limit=100")[0].json()
    assert len(last["processes"]) == 44 and last["processes_page"]["next"] is None
    seen = {p["id"] for p in body["processes"]} | {p["id"] for p in last["processes"]}
    assert len(seen) == RANKS_PER_PAGE + 44
    assert teammate_client.get(f"/api/groups/{after.pk}/?limit=257").status_code == 400
    small = _get(teammate_client, f"/api/groups/{jobs[10][1].pk}/")[0].json()
    assert len(small["processes"]) == 10 and small["processes_page"]["next"] is None


def test_the_live_json_counts_every_process_and_rows_a_page(jobs, teammate_client):
    before, after = jobs[300]
    response, _ = _get(teammate_client, f"/api/groups/{after.pk}/live/")
    page = response.json()
    assert page["counts"] == {"done": 300} and page["final"] is True
    assert len(page["rows"]) == RANKS_PER_PAGE and page["rows_page"]["total"] == 300
    report = page["report"]
    assert report["ranks_total"] == 300 and len(report["ranks"]) == RANKS_PER_PAGE
    assert report["straggler"]["name"] == "rank-7" and "rank-7" in report["urls"]
    assert len(report["urls"]) <= RANKS_PER_PAGE + 1 + len(report["findings"])
    # The flamegraph offers one rank of each class: the straggler stands for its own.
    assert [(f["label"].split()[-1], f["alike"]) for f in page["flame"]] == [
        ("rank-0", 299),
        ("rank-7", 1),
    ]
    assert len(page["processes"]) == RANKS_PER_PAGE  # GPU timelines of the rows only
    assert len(response.content) < 150_000
    small = _get(teammate_client, f"/api/groups/{jobs[10][1].pk}/live/")[0].json()
    assert len(small["rows"]) == 10 and len(small["flame"]) == 10
    assert all(f["alike"] is None for f in small["flame"])


def test_the_group_page_says_every_process_and_draws_a_page(jobs, teammate_client):
    before, after = jobs[300]
    html = _get(teammate_client, f"/groups/{after.pk}/?offset=64")[0].content.decode()
    assert "300 processes" in html
    data = json.loads(
        html.split('id="group-data" type="application/json">')[1].split("</script>")[0]
    )
    assert data["rows_page"]["offset"] == 64 and len(data["rows"]) == RANKS_PER_PAGE
    assert len(html) < 250_000


def test_the_timeline_draws_a_page_of_ranks_on_the_jobs_clock_straggler_first(
    jobs, teammate_client
):
    before, after = jobs[300]
    url = f"/api/groups/{after.pk}/timeline/"
    first = _get(teammate_client, url)[0].json()
    assert first["page"] == {"offset": 0, "limit": RANKS_PER_PAGE, "total": 300,
                             "next": RANKS_PER_PAGE}  # fmt: skip
    names = [r["name"] for r in first["ranks"]]
    assert len(names) == RANKS_PER_PAGE and names[:2] == ["rank-7", "rank-0"]
    assert [c["ranks"] for c in first["classes"]] == [299, 1]
    assert all(len(r["clock"]) == 2 for r in first["ranks"])
    second = _get(teammate_client, f"{url}?offset={RANKS_PER_PAGE}")[0].json()
    assert (second["start"], second["bucket_s"]) == (first["start"], first["bucket_s"])
    assert not {r["name"] for r in second["ranks"]} & set(names)
    one = _get(teammate_client, f"{url}?class=1")[0].json()
    assert [r["name"] for r in one["ranks"]] == ["rank-7"] and one["page"]["total"] == 1
    named = _get(teammate_client, f"{url}?ranks=rank-299,rank-3")[0].json()
    assert [r["name"] for r in named["ranks"]] == ["rank-299", "rank-3"]
    for bad in ("?class=x", "?ranks=" + "," * 128, "?limit=129", "?offset=x", "?limit=", "?class="):
        assert teammate_client.get(url + bad).status_code == 400, bad
    # Well formed, but the capture has no such rank (404) or its report no such class (409).
    assert teammate_client.get(url + "?ranks=rank-300").status_code == 404
    assert teammate_client.get(url + "?class=2").status_code == 409
    small = _get(teammate_client, f"/api/groups/{jobs[10][1].pk}/timeline/")[0].json()
    assert [r["name"] for r in small["ranks"]] == [f"rank-{n}" for n in range(10)]


def test_before_the_report_is_stored_the_timeline_spans_the_job_from_the_ranks_stats(
    jobs, teammate_client
):
    before, after = jobs[300]
    url = f"/api/groups/{after.pk}/timeline/"
    stored = _get(teammate_client, url)[0].json()
    CaptureGroup.objects.filter(pk=after.pk).update(job_report=None)  # rolled back after
    pending = _get(teammate_client, url)[0].json()
    assert (pending["start"], pending["bucket_s"]) == (stored["start"], stored["bucket_s"])
    assert pending["classes"] == [] and pending["page"]["total"] == 300
    assert [r["name"] for r in pending["ranks"][:2]] == ["rank-0", "rank-1"]  # capture order


def test_the_merged_flamegraph_of_a_large_job_is_one_rank_of_each_class(jobs, teammate_client):
    before, after = jobs[300]
    tree = _get(teammate_client, f"/api/groups/{after.pk}/flamegraph/")[0].json()
    assert tree["name"] == "job: one rank of each class"
    assert [c["name"].split(" (")[0] for c in tree["children"]] == ["class 1", "class 2"]
    assert "299 ranks" in tree["children"][0]["name"] and "rank-7" in tree["children"][1]["name"]
    too_many = "&".join(f"capture={n}" for n in range(1, FLAMEGRAPH_PROCESSES + 2))
    assert teammate_client.get(f"/api/groups/{after.pk}/flamegraph/?{too_many}").status_code == 400
    small = _get(teammate_client, f"/api/groups/{jobs[10][1].pk}/flamegraph/")[0].json()
    assert len(small["children"]) == 10 and small["children"][0]["name"].startswith("process ")


def test_the_compare_pools_classes_and_compares_a_page_of_roles_stragglers_first(
    jobs, teammate_client
):
    before, after = jobs[300]
    body = _get(teammate_client, f"/api/compare/groups/?a={before.pk}&b={after.pk}")[0].json()
    assert body["pooled"]["roles"] == 300 and body["roles_page"]["total"] == 300
    assert len(body["roles"]) == RANKS_PER_PAGE and body["roles"][0]["role"] == "rank-7"
    assert [c["roles"] for c in body["classes"]] == [299, 1]
    assert all(len(f["ranks"]) <= RANKS_PER_PAGE for f in body["functions"])
    assert body["straggler"]["b"]["name"] == "rank-7"
    page = _get(teammate_client, f"/compare/groups/?a={before.pk}&b={after.pk}")[0]
    html = page.content.decode()
    assert 'id="roles-pager"' in html and 'id="classes"' in html
    assert html.count("<tr data-role=") == RANKS_PER_PAGE
    small = _get(teammate_client, f"/compare/groups/?a={jobs[10][0].pk}&b={jobs[10][1].pk}")[0]
    assert 'id="roles-pager"' not in small.content.decode()


def test_lead_order_and_spread_keep_the_ranks_that_must_be_seen():
    assert lead_order([1, 2, 3, 4], [3, None, 9, 1]) == [3, 1, 2, 4]
    names = [f"r{n}" for n in range(100)]
    picked = spread(names, 10, keep=["r55"])
    assert len(picked) <= 10 and "r55" in picked and picked == sorted(picked, key=names.index)
    assert spread(names[:5], 10) == names[:5]
