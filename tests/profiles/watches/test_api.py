"""`/api/watches/` per persona: anonymous nothing, viewers read, operators write and
name targets, only host admins give URLs; URLs come back masked; bad bodies are 400,
objects a body names that do not exist 404, a state that refuses the request 409."""

import pytest

from profiles.watches.models import Alert, NotifyTarget, Watch
from tests import factories

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-webhook-token"


@pytest.fixture
def watch(baseline):
    return factories.watch(baseline, targets=[factories.target(url=f"json://h.example/{SECRET}")])


def body(run, baseline, **extra):
    return {"run": run.pk, "role": "rank-0", "baseline": baseline.pk, **extra}


def test_an_anonymous_caller_gets_no_watch_data(client, watch):
    for url in ("/api/watches/", f"/api/watches/{watch.pk}/"):
        response = client.get(url)
        assert response.status_code in (401, 403) and "rank-0" not in response.content.decode()
    assert client.post("/api/watches/", {}, content_type="application/json").status_code in (
        401,
        403,
    )


def test_a_viewer_reads_watches_with_masked_urls_but_cannot_write(teammate_client, watch):
    listed = teammate_client.get("/api/watches/")
    assert listed.status_code == 200 and listed.json()[0]["id"] == watch.pk
    detail = teammate_client.get(f"/api/watches/{watch.pk}/")
    assert detail.json()["notify"][0]["name"] == "team-hook" and "alerts" in detail.json()
    assert SECRET not in listed.content.decode() + detail.content.decode()
    for method in ("post", "patch", "delete"):
        url = "/api/watches/" if method == "post" else f"/api/watches/{watch.pk}/"
        response = getattr(teammate_client, method)(url, {}, content_type="application/json")
        assert response.status_code == 403


def test_an_operator_creates_a_watch_naming_a_target(owner_client, rank, baseline):
    factories.target("team-slack")
    response = owner_client.post(
        "/api/watches/",
        body(rank.run, baseline, notify=["team-slack"], min_effect_points=3),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    watch = Watch.objects.get(pk=response.json()["id"])
    assert watch.role == "rank-0" and watch.min_effect_points == 3
    assert [t.name for t in watch.targets.all()] == ["team-slack"]


def test_a_process_stands_for_run_and_role(owner_client, rank, baseline):
    response = owner_client.post(
        "/api/watches/",
        {"process": rank.pk, "baseline": baseline.pk},
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["role"] == "rank-0"


def test_an_operator_cannot_make_the_server_call_an_address(owner_client, rank, baseline):
    response = owner_client.post(
        "/api/watches/",
        body(rank.run, baseline, notify=["json://169.254.169.254/latest/meta-data"]),
        content_type="application/json",
    )
    assert response.status_code == 403 and "host admins" in response.json()["detail"]
    assert not NotifyTarget.objects.exists() and not Watch.objects.exists()


def test_a_host_admin_gives_a_url_that_becomes_a_masked_target(host_admin_client, rank, baseline):
    url = f"json://hooks.example.org/services/{SECRET}"
    response = host_admin_client.post(
        "/api/watches/", body(rank.run, baseline, notify=[url]), content_type="application/json"
    )
    assert response.status_code == 201
    assert SECRET not in response.content.decode()
    (target,) = NotifyTarget.objects.all()
    assert target.url == url and target.name.startswith("json-")
    assert response.json()["notify"][0]["name"] == target.name


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        # Not a JSON object: refused before the view, naming it (config.middleware).
        ([], "detail"),
        ('"watch"', "detail"),
        ({"run": 1, "role": "rank-0"}, "baseline"),
        ({"role": "rank-0", "baseline": "x"}, "role"),
        # Which rank: a process alone, a run and a role, or a run and all_roles.
        ({"run": 1, "baseline": 1}, "role"),
        ({"run": 1, "role": "", "baseline": 1}, "role"),
        ({"process": 1, "run": 1, "baseline": 1}, "process"),
        ({"process": 1, "role": "rank-0", "baseline": 1}, "process"),
        ({"run": 1, "role": "rank-0", "all_roles": True, "baseline": 1}, "all_roles"),
        ({"process": 1, "all_roles": True, "baseline": 1}, "all_roles"),
        ({"run": 1, "role": "r", "baseline": 1, "notify": "team-slack"}, "notify"),
        ({"run": 1, "role": "r", "baseline": 1, "min_effect_points": -1}, "min_effect_points"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_400(owner_client, payload, field):
    response = owner_client.post("/api/watches/", payload, content_type="application/json")
    assert response.status_code == 400 and field in response.json()


def test_an_unknown_target_name_is_a_404_and_a_baseline_without_samples_a_409(
    owner_client, rank, baseline
):
    unknown = owner_client.post(
        "/api/watches/", body(rank.run, baseline, notify=["nope"]), content_type="application/json"
    )
    assert unknown.status_code == 404 and "no notification target named" in str(unknown.json())
    empty = factories.capture(rank, None, status="failed")
    refused = owner_client.post(
        "/api/watches/", body(rank.run, empty), content_type="application/json"
    )
    assert refused.status_code == 409 and "not a done capture" in str(refused.json())
    assert not Watch.objects.exists()


@pytest.mark.parametrize(
    ("change", "named"),
    [({"run": 999999}, "run"), ({"baseline": 999999}, "baseline"), ("process", "process")],
)
def test_a_run_process_or_baseline_that_does_not_exist_is_a_404_naming_it(
    owner_client, rank, baseline, change, named
):
    payload = body(rank.run, baseline)
    if change == "process":
        payload = {"process": 999999, "baseline": baseline.pk}
    else:
        payload.update(change)
    response = owner_client.post("/api/watches/", payload, content_type="application/json")
    assert response.status_code == 404, response.content
    assert response.json()["detail"].startswith(f"{named}: no ")


def test_a_second_watch_of_the_same_rank_is_refused(owner_client, watch, rank, baseline):
    response = owner_client.post(
        "/api/watches/", body(rank.run, baseline), content_type="application/json"
    )
    assert response.status_code == 409 and "already watched" in str(response.json())


def test_patch_moves_the_baseline_snoozes_and_acknowledges(owner_client, watch, rank):
    alert = Alert.objects.create(watch=watch, key="state:idle", label="idle", direction=1)
    url = f"/api/watches/{watch.pk}/"
    acked = owner_client.patch(url, {"acknowledge": [alert.pk]}, content_type="application/json")
    assert acked.json()["alerts"][0]["status"] == "acknowledged"
    snoozed = owner_client.patch(url, {"snooze_hours": 6}, content_type="application/json")
    assert snoozed.json()["snoozed_until"] is not None
    newer = factories.capture(rank, factories.state_stats(5000), minutes_ago=1)
    moved = owner_client.patch(url, {"baseline": newer.pk}, content_type="application/json")
    assert moved.status_code == 200 and moved.json()["baseline"] == newer.pk
    bad = owner_client.patch(url, {"acknowledge": "some"}, content_type="application/json")
    assert bad.status_code == 400


def test_an_operator_deletes_a_watch(owner_client, watch):
    assert owner_client.delete(f"/api/watches/{watch.pk}/").status_code == 204
    assert not Watch.objects.exists()


def test_answers_have_the_shapes_the_schema_gives(owner_client, rank, baseline):
    from drf_spectacular.generators import SchemaGenerator

    from profiles.watches.judging import capture_judge
    from tests.config.test_api_schema import assert_answer_matches

    spec = SchemaGenerator().get_schema(request=None, public=True)
    factories.target("team-slack")
    created = owner_client.post(
        "/api/watches/",
        body(rank.run, baseline, notify=["team-slack"]),
        content_type="application/json",
    ).json()
    for minutes, level in ((2, 3.0), (1, 11.4)):
        capture = factories.capture(
            rank, factories.state_stats(5000, host_sync=level), minutes_ago=minutes
        )
        capture_judge(capture_id=capture.pk)
    detail = f"/api/watches/{created['id']}/"
    assert_answer_matches(spec, owner_client, "get", detail, "/api/watches/{id}/")
    assert_answer_matches(spec, owner_client, "get", "/api/watches/", "/api/watches/")
    assert_answer_matches(spec, owner_client, "patch", detail, "/api/watches/{id}/", snooze_hours=1)


BAD_IDS = [99999999999999999999999, 2**63, 0, -1, "²", "1e3", 1.5, True, None, "x"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_bad_alert_id_is_a_400_naming_acknowledge_and_nothing_is_saved(owner_client, watch, bad):
    alert = Alert.objects.create(watch=watch, key="state:idle", label="idle", direction=1)
    body = {"min_effect_points": 7.5, "snooze_hours": 3, "acknowledge": [alert.pk, bad]}
    response = owner_client.patch(
        f"/api/watches/{watch.pk}/", body, content_type="application/json"
    )
    assert response.status_code == 400 and "acknowledge" in response.json(), response.content
    watch.refresh_from_db()
    assert watch.min_effect_points == 2.0 and not watch.snoozed
    assert Alert.objects.get(pk=alert.pk).status == "open"


def test_another_watchs_alert_is_a_404_and_the_rest_of_the_change_is_undone(
    owner_client, watch, rank
):
    other_run = factories.run("other")
    their_rank = factories.process(other_run, "rank-0", pid=5)
    theirs = factories.watch(factories.capture(their_rank, factories.state_stats(5000)))
    foreign = Alert.objects.create(watch=theirs, key="state:idle", label="idle", direction=1)
    newer = factories.capture(rank, factories.state_stats(5000), minutes_ago=1)
    body = {"baseline": newer.pk, "min_effect_points": 7.5, "acknowledge": [foreign.pk]}
    response = owner_client.patch(
        f"/api/watches/{watch.pk}/", body, content_type="application/json"
    )
    assert response.status_code == 404 and f"no alert {foreign.pk}" in str(response.json())
    watch.refresh_from_db()
    assert watch.baseline_id != newer.pk and watch.min_effect_points == 2.0
    assert Alert.objects.get(pk=foreign.pk).status == "open"


def test_a_baseline_of_another_run_or_role_is_a_409_on_create_and_change(
    owner_client, rank, baseline, watch
):
    other_run = factories.run("unrelated")
    elsewhere = factories.capture(
        factories.process(other_run, "rank-0", pid=7), factories.state_stats(5000)
    )
    other_role = factories.capture(
        factories.process(rank.run, "rank-1", pid=8), factories.state_stats(5000)
    )
    for capture in (elsewhere, other_role):
        created = owner_client.post(
            "/api/watches/",
            {"run": rank.run.pk, "role": "rank-2", "baseline": capture.pk},
            content_type="application/json",
        )
        assert created.status_code == 409 and "baseline" in created.json()["detail"]
        changed = owner_client.patch(
            f"/api/watches/{watch.pk}/", {"baseline": capture.pk}, content_type="application/json"
        )
        assert changed.status_code == 409 and "baseline" in changed.json()["detail"]
    assert Watch.objects.get().baseline_id == baseline.pk


def test_a_failed_create_leaves_no_target_made_for_its_url(host_admin_client, rank, baseline):
    elsewhere = factories.capture(
        factories.process(factories.run("unrelated"), "rank-0", pid=7), factories.state_stats(5000)
    )
    response = host_admin_client.post(
        "/api/watches/",
        body(rank.run, elsewhere, notify=["json://hooks.example.org/abc"]),
        content_type="application/json",
    )
    assert response.status_code == 409 and "baseline" in response.json()["detail"]
    assert not NotifyTarget.objects.exists() and not Watch.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_effect_points", True),
        ("min_effect_points", "٣"),
        ("min_effect_points", "nan"),
        ("snooze_hours", "inf"),
        ("snooze_hours", 1e308),
        ("min_samples", 2**63),
        ("baseline", 2**63),
        ("baseline", -1),
    ],
)
def test_bad_numbers_are_a_400_naming_the_field(owner_client, watch, field, value):
    response = owner_client.patch(
        f"/api/watches/{watch.pk}/", {field: value}, content_type="application/json"
    )
    assert response.status_code == 400 and field in response.json(), response.content


def test_viewers_and_operators_see_targets_by_name_host_admins_a_mask(
    client, teammate, owner, host_admin, watch
):
    NotifyTarget.objects.filter(pk__in=watch.targets.all()).update(url="json://T0KEN@h.example/x")
    for user, keys in ((teammate, {"name"}), (owner, {"name"}), (host_admin, {"name", "url"})):
        client.force_login(user)
        (target,) = client.get(f"/api/watches/{watch.pk}/").json()["notify"]
        assert set(target) == keys
    assert target["url"] == "json://…@h.example/…"
