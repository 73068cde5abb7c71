"""Whole-job compare (`GET /api/compare/groups/?a=&b=` and its page): two launches of
one job, the real 4-rank recordings of tests/data/jobs/ (balanced, then the same job
with a straggler planted on rank-3) through the real pipeline, compared rank by rank."""

import pytest

from profiles.models import CaptureGroup
from tests import factories
from tests.support.recorded_jobs import record_group, relaunch

pytestmark = pytest.mark.django_db


@pytest.fixture
def launches(monkeypatch):
    """(before, after): a balanced launch, then a relaunch of the same run (new
    processes, new PIDs, the old ones replaced) with a straggler."""
    before, _ = record_group(monkeypatch, "balanced", run_name="gloo-job")
    relaunch(before.run)
    after, _ = record_group(monkeypatch, "straggler", run=before.run)
    return before, after


def test_the_compare_of_two_launches_names_the_planted_straggler_as_new(launches, teammate_client):
    before, after = launches
    # Two launches of one run: new PIDs, launch 1's processes replaced by launch 2's.
    pids = [set(g.captures.values_list("pid", flat=True)) for g in (before, after)]
    replaced = before.run.processes.filter(replaced_at__isnull=False)
    assert after.run_id == before.run_id and not pids[0] & pids[1]
    assert set(replaced.values_list("pid", flat=True)) == pids[0]
    body = teammate_client.get(f"/api/compare/groups/?a={before.pk}&b={after.pk}").json()
    assert [r["role"] for r in body["roles"]] == ["rank-0", "rank-1", "rank-2", "rank-3"]
    assert body["straggler"]["a"] is None and body["straggler"]["b"]["name"] == "rank-3"
    new = {f["rule"]: f["ranks"] for f in body["findings"]["new"]}
    assert new["straggler"] == ["rank-3"] and body["findings"]["resolved"] == []
    rank3 = next(r for r in body["roles"] if r["role"] == "rank-3")
    compute = next(s for s in rank3["states"] if s["state"] == "compute")
    assert compute["verdict"] == "real change" and compute["delta"] > 0
    low, high = compute["interval"]
    assert 0 < low <= compute["delta"] <= high
    assert set(compute) == {"state", "a_percent", "b_percent", "delta", "interval", "verdict"}
    moved = [f for f in body["functions"] if "rank-3" in f["ranks"]]
    assert moved[0]["function"].startswith("metric_per_sample") and moved[0]["delta"] > 0
    assert body["only_a"] == body["only_b"] == []
    assert (body["groups"]["a"]["launches"], body["groups"]["b"]["launches"]) == ([1], [2])
    assert body["groups"]["a"]["run"] == body["groups"]["b"]["run"] == before.run_id


def test_the_earlier_capture_is_before_whatever_order_the_url_gives(launches, teammate_client):
    before, after = launches
    body = teammate_client.get(f"/api/compare/groups/?a={after.pk}&b={before.pk}").json()
    assert (body["groups"]["a"]["id"], body["groups"]["b"]["id"]) == (before.pk, after.pk)
    assert (body["groups"]["a"]["launches"], body["groups"]["b"]["launches"]) == ([1], [2])


def test_the_page_is_reached_from_the_whole_job_capture_and_shows_the_new_finding(
    launches, teammate_client
):
    before, after = launches
    group_page = teammate_client.get(after.get_absolute_url()).content.decode()
    assert f'href="/compare/groups/?a={after.pk}"' in group_page
    picker = teammate_client.get(f"/compare/groups/?a={after.pk}").content.decode()
    assert f'<option value="{before.pk}" selected' in picker  # the earlier one, preselected
    page = teammate_client.get(f"/compare/groups/?a={after.pk}&b={before.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert "The other ranks wait for rank-3" in text and 'data-role="rank-3"' in text
    assert text.count("run gloo-job · launch ") == 2
    assert "run gloo-job · launch 1</p>" in text and "run gloo-job · launch 2</p>" in text


def test_a_dump_a_missing_or_an_unfinished_capture_is_refused_with_why(teammate_client):
    run = factories.job_run(ranks=1)
    pending = CaptureGroup.objects.create(run=run)
    dump = CaptureGroup.objects.create(run=run, kind="dump")
    answer = teammate_client.get(f"/api/compare/groups/?a={pending.pk}&b={dump.pk}")
    assert answer.status_code == 409 and "no report" in answer.json()["detail"]
    assert teammate_client.get(f"/api/compare/groups/?a={pending.pk}&b=999999").status_code == 404
    assert teammate_client.get("/api/compare/groups/?a=x&b=1").status_code == 400


def test_anonymous_requests_get_no_comparison(client):
    assert client.get("/api/compare/groups/?a=1&b=2").status_code in (401, 403)
    assert client.get("/compare/groups/?a=1&b=2").status_code in (302, 401, 403)


def test_the_schema_describes_the_whole_job_compare(teammate_client):
    schema = teammate_client.get("/api/schema/?format=json").json()
    answer = schema["paths"]["/api/compare/groups/"]["get"]["responses"]["200"]
    ref = answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    fields = schema["components"]["schemas"][ref]["properties"]
    assert {"roles", "straggler", "findings", "functions"} <= set(fields)
