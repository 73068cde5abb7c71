"""Watches follow the job across its launches: a watch set on launch A judges the
same roles in launch B (new processes, new PIDs, the same run), on the step threads,
and says so once per whole-job capture to a real webhook receiver on 127.0.0.1. The
ranks are the real 4-rank recordings of tests/data/jobs/ (tests/support/recorded_jobs)."""

import pytest
from django.test import Client

from profiles.models import Capture
from profiles.watches import judging as watch_judging
from profiles.watches import messages as watch_messages
from profiles.watches import services as watches
from profiles.watches.models import Delivery, Judgement, Watch
from tests import factories
from tests.support.recorded_jobs import record_group, relaunch
from tests.support.webhook import Receiver

pytestmark = pytest.mark.django_db
MIN_SAMPLES = 100  # 10 s at 40 Hz: about 400 samples on a rank's step thread


@pytest.fixture
def receiver():
    started = Receiver().start()
    yield started
    started.stop()


def launch_a(monkeypatch):
    group, ids = record_group(monkeypatch, "balanced", run_name="gloo-job")
    return group, Capture.objects.get(pk=ids[0])


def judge_and_send(ids):
    """What the worker does for each analysed rank: judge it, send what it wrote."""
    deliveries = [d for pk in ids for d in watch_judging.capture_judge(capture_id=pk)]
    outcomes = [watch_messages.delivery_send(delivery_id=d).status for d in deliveries]
    assert outcomes == ["sent"] * len(deliveries)
    return deliveries


def all_roles_watch(baseline, receiver):
    target = factories.target(url=receiver.url())
    return watches.watch_create(
        user=None,
        baseline=baseline,
        run=baseline.run,
        all_roles=True,
        targets=[target],
        min_samples=MIN_SAMPLES,
    )


def test_a_watch_set_on_launch_a_sends_one_message_for_launch_b_with_a_straggler(
    monkeypatch, receiver
):
    group_a, baseline = launch_a(monkeypatch)
    watch = all_roles_watch(baseline, receiver)
    relaunch(baseline.run)
    group_b, ids = record_group(monkeypatch, "straggler", run=baseline.run)
    assert not set(ids) & set(group_a.captures.values_list("pk", flat=True))
    judge_and_send(ids)
    (message,) = receiver.accepted
    text = message["message"]
    assert f"whole-job capture #{group_b.pk}" in message["title"]
    assert f"/compare/groups/?a={group_a.pk}&b={group_b.pk}" in text
    assert "rank-3:" in text and "metric_per_sample (train.py" in text
    assert "on the step threads" in text and "→" in text
    judged = Judgement.objects.filter(watch=watch)
    assert judged.count() == 4 and {j.options["scope"] for j in judged} == {"step threads"}


def test_a_launch_without_the_cause_sends_nothing(monkeypatch, receiver):
    _, baseline = launch_a(monkeypatch)
    watch = all_roles_watch(baseline, receiver)
    relaunch(baseline.run)
    _, ids = record_group(monkeypatch, "balanced", run=baseline.run)
    assert judge_and_send(ids) == []
    assert receiver.requests == [] and not Delivery.objects.exists()
    verdicts = set(Judgement.objects.filter(watch=watch).values_list("verdict", flat=True))
    assert verdicts == {Judgement.Verdict.UNCHANGED}


def test_a_role_watch_follows_its_role_into_the_next_launch(monkeypatch, receiver):
    group_a, _ = launch_a(monkeypatch)
    run = group_a.run
    baseline = group_a.captures.get(process__role="rank-0")
    watch = watches.watch_create(
        user=None,
        baseline=baseline,
        run=run,
        role="rank-0",
        targets=[factories.target(url=receiver.url())],
        min_samples=MIN_SAMPLES,
    )
    relaunch(run)
    group_b, ids = record_group(monkeypatch, "hostsync", run=run)
    judge_and_send(ids)
    (message,) = receiver.accepted
    new = group_b.captures.get(process__role="rank-0")
    assert new.process_id != baseline.process_id and new.process.launch.number == 2
    assert Judgement.objects.get(watch=watch).capture_id == new.pk
    assert "host sync at " in message["message"] and "train.py:" in message["message"]
    assert f"/compare/groups/?a={group_a.pk}&b={group_b.pk}" in message["message"]


def test_a_capture_without_idle_against_an_idle_baseline_is_not_judged(
    monkeypatch, receiver, teammate_client
):
    _, baseline = launch_a(monkeypatch)
    watch = all_roles_watch(baseline, receiver)
    relaunch(baseline.run)
    _, ids = record_group(monkeypatch, "straggler_noidle", run=baseline.run)
    assert len(judge_and_send(ids)) == 1 and len(receiver.requests) == 1  # one, not per rank
    reason = "not comparable: the baseline used --idle, this capture did not"
    assert reason in receiver.accepted[0]["message"]
    judged = Judgement.objects.filter(watch=watch)
    assert {(j.verdict, j.reason) for j in judged} == {("not comparable", reason)}
    assert not watch.alerts.exists()
    assert reason in teammate_client.get(watch.get_absolute_url()).content.decode()
    last = teammate_client.get(f"/api/watches/{watch.pk}/").json()["last"]
    assert last["verdict"] == "not comparable" and last["reason"] == reason


def test_the_api_makes_an_all_roles_watch_from_a_rank_of_a_whole_job_capture(
    monkeypatch, owner_client, teammate
):
    _, baseline = launch_a(monkeypatch)
    viewer = Client()
    viewer.force_login(teammate)
    body = {"run": baseline.run_id, "all_roles": True, "baseline": baseline.pk}
    assert viewer.post("/api/watches/", body, content_type="application/json").status_code == 403
    made = owner_client.post("/api/watches/", body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["all_roles"] is True and made.json()["role"] == ""
    again = owner_client.post("/api/watches/", body, content_type="application/json")
    # The rank is watched already: its state refuses the request (409, docs/api.md).
    assert again.status_code == 409 and "already watched" in again.json()["detail"], again.json()


def test_an_all_roles_watch_refuses_a_single_capture_or_a_role(monkeypatch, owner_client):
    _, baseline = launch_a(monkeypatch)
    single = factories.capture(baseline.process, factories.state_stats(2000))
    post = lambda body: owner_client.post("/api/watches/", body, content_type="application/json")  # noqa: E731
    alone = post({"run": baseline.run_id, "all_roles": True, "baseline": single.pk})
    assert alone.status_code == 409, alone.json()  # the baseline's state, not the body's shape
    assert "not a rank of a whole-job capture" in alone.json()["detail"]
    with_role = post(
        {"run": baseline.run_id, "all_roles": True, "role": "rank-0", "baseline": baseline.pk}
    )
    assert with_role.status_code == 400 and "all_roles" in with_role.json()


def test_the_capture_page_form_watches_all_roles(monkeypatch, owner_client):
    _, baseline = launch_a(monkeypatch)
    page = owner_client.get(baseline.get_absolute_url()).content.decode()
    assert 'id="watch-all-roles"' in page
    form = {"baseline": baseline.pk, "min_effect_points": 2, "min_samples": 1000, "all_roles": "on"}
    response = owner_client.post("/watches/new/", form)
    watch = Watch.objects.get()
    assert response.status_code == 302 and watch.all_roles and watch.role == ""
    assert "all roles" in owner_client.get(watch.get_absolute_url()).content.decode()
    run_page = owner_client.get(f"/runs/{baseline.run_id}/").content.decode()
    assert 'id="all-roles-watch"' in run_page and f"capture #{baseline.group_id}" in run_page
