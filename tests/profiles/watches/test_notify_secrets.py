"""No secret of a notification URL shows anywhere, for every scheme Apprise ships.

A URL for each template of each scheme (tests/support/apprise_urls.py: every token's
value random, each a planted secret, except the scheme, a network host, the port and
fixed choices; every enabled scheme but those whose package is missing) is stored as a
target by a host admin and attached to a watch; a message is then sent to each through
the real delivery task, with the network cut so each fails and says why. Every watch
page, API answer and admin view, as a viewer, an operator, a host admin and a
superuser, and every log record made meanwhile (DEBUG included, every logger), hold
none of the secrets. Viewers and operators see targets by name only; host admins see
the mask, which keeps a network host.
"""

import logging
import socket

import apprise
import pytest
from django.test import Client

from profiles.watches import messages as watch_messages
from profiles.watches import services as watches
from profiles.watches.models import Alert, Delivery, Judgement, NotifyTarget
from tests import factories
from tests.support.apprise_urls import HOST, needs_a_package, planted_urls

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def no_network(monkeypatch):
    def refused(*args, **kwargs):
        raise OSError("network cut for this test")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refused)
    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(socket, "getaddrinfo", refused)
    monkeypatch.setattr(apprise.url.URLBase, "throttle", lambda self, *a, **k: None)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _texts(clients: dict, watch, targets, deliveries) -> dict[str, str]:
    """Every answer of every view that shows a watch, a target or a delivery."""
    pages = ["/api/watches/", f"/api/watches/{watch.pk}/", "/watches/", watch.get_absolute_url()]
    pages += ["/watches/targets/", f"/admin/profiles/watch/{watch.pk}/change/"]
    pages += [f"/admin/profiles/notifytarget/?p={p}" for p in range(len(targets) // 100 + 1)]
    pages += [f"/admin/profiles/delivery/?p={p}" for p in range(len(deliveries) // 100 + 1)]
    pages += [f"/admin/profiles/alert/{a.pk}/change/" for a in Alert.objects.all()]
    # One change form of each kind per 20 rows: every row's form is the same code.
    admin_only = [f"/admin/profiles/notifytarget/{t.pk}/change/" for t in targets[::20]]
    admin_only += [f"/admin/profiles/delivery/{d.pk}/change/" for d in deliveries[::20]]
    texts = {}
    for persona, client in clients.items():
        for url in pages + (admin_only if persona == "superuser" else []):
            response = client.get(url)
            assert response.status_code in (200, 302, 403), (persona, url)
            texts[f"{persona} {url}"] = response.content.decode()
    return texts


def _around(text: str, secret: str) -> str:
    at = text.lower().index(secret.lower())
    return text[max(0, at - 150) : at + 40]


def test_no_planted_secret_of_any_apprise_scheme_shows_in_any_page_answer_or_log(
    baseline, owner, teammate, host_admin, django_user_model, no_network, caplog, settings
):
    planted, enabled, uncovered = planted_urls()
    print(f"\n{len(planted)} URLs of {len(enabled) - len(uncovered)} of {len(enabled)} schemes")
    assert all(needs_a_package(s) for s in uncovered), sorted(uncovered)
    caplog.set_level(logging.DEBUG)  # from here on: what the product logs
    caplog.set_level(logging.DEBUG, logger="apprise")
    caplog.clear()
    targets = [
        watches.target_save(user=host_admin, name=f"t{i}", url=p.url) for i, p in enumerate(planted)
    ]
    watch = factories.watch(baseline)
    watch.targets.set(targets)
    judged = Judgement.objects.create(watch=watch, capture=baseline, verdict="changed")
    Alert.objects.create(watch=watch, judgement=judged, key="state:idle", label="idle", direction=1)
    settings.FLAMEDECK_NOTIFY_ATTEMPTS = 1
    deliveries = [
        Delivery.objects.create(
            judgement=judged, target=t, target_name=t.name, title="flamedeck", body="b"
        )
        for t in targets
    ]
    for delivery in deliveries:
        watch_messages.delivery_send(delivery_id=delivery.pk)
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    clients = {
        "viewer": _client(teammate),
        "operator": _client(owner),
        "host admin": _client(host_admin),
        "superuser": _client(root),
    }
    texts = _texts(clients, watch, targets, deliveries)
    texts["log"] = caplog.text
    texts["delivery errors"] = "\n".join(Delivery.objects.values_list("error", flat=True))
    lowered = {where: text.lower() for where, text in texts.items()}  # once, not per secret
    leaks = [
        f"{where}: {p.url[:80]} shows {secret!r} in {_around(texts[where], secret)!r}"
        for p in planted
        for secret in p.secrets
        for where, text in lowered.items()
        if secret.lower() in text
    ]
    assert not leaks, "\n".join(leaks[:30])
    tried = [Delivery.Status.FAILED, Delivery.Status.SENT]  # sent: a local service (syslog)
    assert Delivery.objects.filter(status__in=tried).count() == len(deliveries)
    viewer = clients["viewer"].get(f"/api/watches/{watch.pk}/").json()["notify"]
    assert all(set(t) == {"name"} for t in viewer)
    admin = clients["host admin"].get(f"/api/watches/{watch.pk}/").json()["notify"]
    masks = {t["name"]: t["url"] for t in admin}
    json_target = NotifyTarget.objects.filter(url__startswith=f"json://{HOST}").first()
    assert masks[json_target.name].startswith(f"json://{HOST}")
