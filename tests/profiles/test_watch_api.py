"""`/api/watches/` per persona: anonymous nothing, viewers read, operators write and
name targets, only host admins give URLs; URLs come back masked; bad bodies are 400."""

import pytest

from profiles.watch_models import Alert, NotifyTarget, Watch
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
        ({"role": "rank-0", "baseline": "x"}, "baseline"),
        ({"run": 999999, "role": "rank-0", "baseline": 1}, "baseline"),
        ({"process": 999999, "baseline": 1}, "baseline"),
        ({"run": 1, "role": "r", "baseline": 1, "notify": "team-slack"}, "notify"),
        ({"run": 1, "role": "r", "baseline": 1, "min_effect_points": -1}, "min_effect_points"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_400(owner_client, payload, field):
    response = owner_client.post("/api/watches/", payload, content_type="application/json")
    assert response.status_code == 400 and field in response.json()


def test_an_unknown_target_name_or_a_baseline_without_samples_is_a_400(
    owner_client, rank, baseline
):
    unknown = owner_client.post(
        "/api/watches/", body(rank.run, baseline, notify=["nope"]), content_type="application/json"
    )
    assert unknown.status_code == 400 and "no notification target named" in str(unknown.json())
    empty = factories.capture(rank, None, status="failed")
    refused = owner_client.post(
        "/api/watches/", body(rank.run, empty), content_type="application/json"
    )
    assert refused.status_code == 400 and "not a done capture" in str(refused.json())


def test_a_second_watch_of_the_same_rank_is_refused(owner_client, watch, rank, baseline):
    response = owner_client.post(
        "/api/watches/", body(rank.run, baseline), content_type="application/json"
    )
    assert response.status_code == 400 and "already watched" in str(response.json())


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

    from profiles.watch_judging import capture_judge
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
