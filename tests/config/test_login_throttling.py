"""Login throttling (django-axes): repeated wrong passwords lock the user name from
that address, the login page says so, and the lock lifts after the cool-off."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _log_in(client, password: str):
    return client.post(reverse("login"), {"username": "teammate", "password": password})


def _logged_in(client) -> bool:
    return client.get(reverse("runs:run_list")).status_code == 200


def test_25_wrong_passwords_then_the_right_one_does_not_log_in(client, teammate):
    statuses = {_log_in(client, f"guess-{i}").status_code for i in range(25)}
    assert statuses <= {200, 429}
    response = _log_in(client, "teammate-pass")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert not _logged_in(client)


def test_the_login_page_shows_the_lockout_and_a_wrong_password_says_so(client, teammate):
    first = _log_in(client, "nope")
    assert "didn't match" in first.content.decode()
    for _ in range(10):
        _log_in(client, "nope")
    page = _log_in(client, "nope").content.decode()
    assert "Too many failed logins" in page and "locked" in page


def test_the_lock_lifts_after_the_cool_off(client, teammate, settings):
    from axes.models import AccessAttempt

    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        _log_in(client, "nope")
    assert _log_in(client, "teammate-pass").status_code == 429
    past = timezone.now() - timedelta(minutes=settings.AXES_COOLOFF_MINUTES + 1)
    AccessAttempt.objects.update(attempt_time=past)
    assert _log_in(client, "teammate-pass").status_code == 302
    assert _logged_in(client)


def test_a_locked_name_does_not_lock_out_other_users(client, teammate, owner):
    for _ in range(10):
        _log_in(client, "nope")
    response = client.post(reverse("login"), {"username": "owner", "password": "owner-pass"})
    assert response.status_code == 302


def test_a_spoofed_forwarded_for_does_not_escape_the_lock(client, teammate):
    for i in range(10):
        client.post(
            reverse("login"),
            {"username": "teammate", "password": "nope"},
            HTTP_X_FORWARDED_FOR=f"10.0.0.{i}",
        )
    response = client.post(
        reverse("login"),
        {"username": "teammate", "password": "teammate-pass"},
        HTTP_X_FORWARDED_FOR="10.9.9.9",
    )
    assert response.status_code == 429


def test_behind_one_proxy_the_client_is_the_last_forwarded_address(rf, settings):
    from config.middleware import client_ip

    settings.FLAMEDECK_PROXY_COUNT = 1
    request = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4", REMOTE_ADDR="10.0.0.1")
    assert client_ip(request) == "1.2.3.4"
    settings.FLAMEDECK_PROXY_COUNT = 0
    assert client_ip(request) == "10.0.0.1"


def test_the_test_clients_login_still_works_and_wrong_passwords_still_fail(client, teammate):
    assert not client.login(username="teammate", password="nope")
    assert client.login(username="teammate", password="teammate-pass")


def _fail(client, username: str, address: str):
    return client.post(
        reverse("login"), {"username": username, "password": "nope"}, REMOTE_ADDR=address
    )


def test_one_address_guessing_at_many_names_is_locked_for_every_name(client, owner, settings):
    limit, per_name = settings.FLAMEDECK_LOGIN_IP_FAILURE_LIMIT, settings.AXES_FAILURE_LIMIT - 1
    statuses = [  # a few guesses at each name, never a pair's limit
        _fail(client, f"user{i}", "10.1.1.1").status_code
        for i in range(-(-limit // per_name))
        for _ in range(per_name)
    ]
    assert statuses[: limit - 1] == [200] * (limit - 1) and statuses[limit - 1] == 429
    right = {"username": "owner", "password": "owner-pass"}
    locked = client.post(reverse("login"), right, REMOTE_ADDR="10.1.1.1")
    assert locked.status_code == 429 and "any account from your address" in locked.content.decode()
    elsewhere = client.post(reverse("login"), right, REMOTE_ADDR="10.2.2.2")
    assert elsewhere.status_code == 302  # the address is locked, not the account


def test_colleagues_typos_behind_one_address_lock_nobody(client, owner, settings):
    for i in range(3):
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            _fail(client, f"colleague{i}", "10.1.1.1")
    right = {"username": "owner", "password": "owner-pass"}
    assert client.post(reverse("login"), right, REMOTE_ADDR="10.1.1.1").status_code == 302
