"""Watch pages, the capture and run page panels, and the notification targets page,
per persona: viewers see, operators act, host admins enter URLs; no URL in full."""

import pytest
from django.urls import reverse

from profiles.watches.judging import capture_judge
from profiles.watches.models import NotifyTarget, Watch
from tests import factories

pytestmark = pytest.mark.django_db
SECRET = "T0P-s3cr3t-path"


@pytest.fixture
def judged(rank, baseline):
    """A watch whose latest capture moved: an open alert and a stored verdict."""
    watch = factories.watch(baseline, targets=[factories.target(url=f"json://h.example/{SECRET}")])
    for minutes, level in ((3, 3.0), (2, 3.2), (1, 11.4)):
        capture = factories.capture(
            rank, factories.state_stats(5000, host_sync=level), minutes_ago=minutes
        )
        capture_judge(capture_id=capture.pk)
    return watch, capture


@pytest.mark.parametrize(
    "name", ["watch_list", "target_list", "watch_create", "watch_detail", "watch_edit"]
)
def test_an_anonymous_visitor_is_sent_to_log_in(client, name):
    url = reverse(f"watches:{name}", args=[1] if name in ("watch_detail", "watch_edit") else [])
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_viewer_sees_the_list_with_verdict_sparkline_data_and_compare_link(
    teammate_client, judged
):
    watch, capture = judged
    page = teammate_client.get(reverse("watches:watch_list")).content.decode()
    assert "real change" in page and f"?a={watch.baseline_id}&amp;b={capture.pk}" in page
    assert 'id="watch-sparklines"' in page and "state:host_sync" in page
    assert SECRET not in page


def test_a_viewer_sees_a_watch_its_alerts_and_series_but_no_forms(teammate_client, judged):
    watch, _ = judged
    page = teammate_client.get(watch.get_absolute_url()).content.decode()
    assert "host sync 3.1% [2.6–3.6] → 11.4% [10.6–12.3]" in page
    assert 'id="watch-series"' in page and "team-hook" in page
    assert 'id="settings"' not in page and "acknowledge" not in page.lower().split("alerts")[0]
    assert SECRET not in page


def test_the_capture_page_shows_the_verdict_line(teammate_client, judged):
    watch, capture = judged
    page = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert 'id="watch-panel"' in page
    assert f"since baseline #{watch.baseline_id}: real change" in page


def test_an_operator_is_offered_to_watch_a_rank_from_the_capture_and_run_pages(
    client, owner, teammate, baseline
):
    client.force_login(owner)
    capture_page = client.get(baseline.get_absolute_url()).content.decode()
    assert 'id="watch-offer"' in capture_page
    run_page = client.get(baseline.run.get_absolute_url()).content.decode()
    assert f"watch this rank with capture #{baseline.pk} as baseline" in run_page
    client.force_login(teammate)
    assert 'id="watch-offer"' not in client.get(baseline.get_absolute_url()).content.decode()
    assert "watch this rank" not in client.get(baseline.run.get_absolute_url()).content.decode()


def test_an_operator_watches_a_rank_from_the_capture_page(owner_client, baseline):
    factories.target("team-slack")
    response = owner_client.post(
        reverse("watches:watch_create"),
        {
            "baseline": baseline.pk,
            "min_effect_points": 2.5,
            "min_samples": 1000,
            "targets": ["team-slack"],
        },
    )
    watch = Watch.objects.get()
    assert response.status_code == 302 and response["Location"] == watch.get_absolute_url()
    assert watch.role == "rank-0" and watch.min_effect_points == 2.5
    assert [t.name for t in watch.targets.all()] == ["team-slack"]


def test_a_viewer_cannot_create_change_snooze_acknowledge_or_delete(teammate_client, judged):
    watch, _ = judged
    posts = [
        (reverse("watches:watch_create"), {"baseline": watch.baseline_id}),
        (reverse("watches:watch_edit", args=[watch.pk]), {"baseline": watch.baseline_id}),
        (reverse("watches:watch_snooze", args=[watch.pk]), {"hours": 4}),
        (reverse("watches:watch_acknowledge", args=[watch.pk]), {"alert": "all"}),
        (reverse("watches:watch_delete", args=[watch.pk]), {}),
    ]
    for url, data in posts:
        assert teammate_client.post(url, data).status_code == 403
    assert Watch.objects.get().alerts.filter(status="open").exists()


def test_an_operator_acknowledges_snoozes_and_deletes(owner_client, judged):
    watch, _ = judged
    owner_client.post(reverse("watches:watch_acknowledge", args=[watch.pk]), {"alert": "all"})
    assert not watch.alerts.filter(status="open").exists()
    owner_client.post(reverse("watches:watch_snooze", args=[watch.pk]), {"hours": "4"})
    watch.refresh_from_db()
    assert watch.snoozed
    owner_client.post(reverse("watches:watch_delete", args=[watch.pk]))
    assert not Watch.objects.exists()


def test_only_a_host_admin_adds_a_target_and_sees_it_masked(host_admin_client, owner, client):
    url = reverse("watches:target_list")
    response = host_admin_client.post(
        url, {"name": "team-slack", "url": f"json://hooks.example.org/{SECRET}", "description": ""}
    )
    assert response.status_code == 302
    page = host_admin_client.get(url).content.decode()
    assert "team-slack" in page and "hooks.example.org" in page and SECRET not in page
    client.force_login(owner)
    assert "hooks.example.org" not in client.get(url).content.decode()
    refused = client.post(url, {"name": "mine", "url": "json://10.0.0.1/x"})
    assert refused.status_code == 403 and not NotifyTarget.objects.filter(name="mine").exists()


def test_an_unknown_apprise_url_is_refused_with_a_reason(host_admin_client):
    response = host_admin_client.post(
        reverse("watches:target_list"), {"name": "x", "url": "nonsense://x"}
    )
    assert response.status_code == 200 and "Apprise does not know" in response.content.decode()
    assert not NotifyTarget.objects.exists()


def test_the_admin_never_shows_a_stored_url(host_admin_client, admin_user, client):
    target = factories.target(url=f"json://hooks.example.org/{SECRET}")
    client.force_login(admin_user)
    for url in (
        "/admin/profiles/notifytarget/",
        f"/admin/profiles/notifytarget/{target.pk}/change/",
    ):
        page = client.get(url)
        assert page.status_code == 200 and SECRET not in page.content.decode()


@pytest.mark.parametrize("bad", ["99999999999999999999999", str(2**63), "-1", "²", "x", "0"])
def test_a_bad_alert_id_on_the_page_is_a_400_naming_it(owner_client, judged, bad):
    watch, _ = judged
    url = reverse("watches:watch_acknowledge", args=[watch.pk])
    response = owner_client.post(url, {"alert": bad})
    assert response.status_code == 400 and b"alert" in response.content
    assert watch.alerts.filter(status="open").exists()


def test_another_watchs_alert_or_a_baseline_of_another_run_is_a_400(owner_client, judged, rank):
    watch, _ = judged
    other = factories.process(factories.run("other"), "rank-0", pid=9)
    elsewhere = factories.capture(other, factories.state_stats(5000))
    theirs = factories.watch(elsewhere)
    foreign = theirs.alerts.create(key="state:idle", label="idle", direction=1)
    ack = owner_client.post(
        reverse("watches:watch_acknowledge", args=[watch.pk]), {"alert": foreign.pk}
    )
    assert ack.status_code == 400 and f"no alert {foreign.pk}".encode() in ack.content
    assert theirs.alerts.get().status == "open"
    form = {"baseline": elsewhere.pk, "min_effect_points": 9, "min_samples": 1000}
    edit = owner_client.post(reverse("watches:watch_edit", args=[watch.pk]), form)
    assert edit.status_code == 400 and b"baseline" in edit.content
    watch.refresh_from_db()
    assert watch.baseline_id != elsewhere.pk and watch.min_effect_points == 2.0
    for bad in (str(2**63), "²", "-1"):
        form["baseline"] = bad
        response = owner_client.post(reverse("watches:watch_edit", args=[watch.pk]), form)
        assert response.status_code == 400 and b"baseline" in response.content


def test_viewers_and_operators_see_no_target_url_on_any_watch_page(client, owner, judged):
    watch, _ = judged
    client.force_login(owner)
    for url in (reverse("watches:watch_list"), watch.get_absolute_url(), "/watches/targets/"):
        page = client.get(url).content.decode()
        assert "h.example" not in page and SECRET not in page, url
