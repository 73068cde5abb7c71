"""The Apprise seam: URLs checked and masked, failures reported without secrets,
messages sent to a real HTTP server on loopback."""

import logging

import pytest

from profiles.watches import notify
from tests.support.webhook import Receiver


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        (
            "json://user:pa55word@hooks.example.org:8443/services/T0KEN123",
            "pa55word",
            "hooks.example.org:8443",
        ),
        (
            "json://hooks.example.org/services/T0KEN123?token=abc123",
            "T0KEN123",
            "json://hooks.example.org",
        ),
        (
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#ops",
            "TIiajkdnlazkcOXrIdevi7FQ",
            "slack://",
        ),
        (
            "mailtos://alice:hunter22@mail.example.org?to=team@example.org",
            "hunter22",
            "mail.example.org",
        ),
    ],
)
def test_a_masked_url_keeps_the_host_and_hides_the_secret(url, secret, shown):
    masked = notify.mask_url(url)
    assert secret not in masked and shown in masked


def test_an_unknown_or_malformed_url_is_refused_with_a_reason():
    assert "Apprise does not know" in notify.url_problem("nonsense://x/y")
    assert notify.url_problem("json://a b") is not None
    assert notify.url_problem("json://127.0.0.1:8000/hook") is None


def test_secrets_in_apprise_and_urllib3_log_lines_are_masked(caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("apprise").debug("JSON POST URL: %s", "http://127.0.0.1:9/hook/S3CRET")
    logging.getLogger("urllib3.connectionpool").debug(
        '"POST /hook/S3CRET HTTP/1.1" http://h/x/S3CRET'
    )
    assert "S3CRET" not in caplog.text and "127.0.0.1:9" in caplog.text


def test_a_message_reaches_a_real_http_server(receiver):
    sent = notify.send(
        receiver.url(), title="flamedeck: run changed", body="host sync 3.1% → 11.4%"
    )
    assert sent.ok and sent.error == ""
    (request,) = receiver.accepted
    assert request["title"] == "flamedeck: run changed" and "11.4%" in request["message"]
    assert request["path"] == "/hook/s3cr3t-token"


def test_a_failure_says_why_without_the_secret():
    receiver = Receiver(fail_first=1).start()
    try:
        sent = notify.send(receiver.url("/hook/T0P-S3CRET"), title="t", body="b")
    finally:
        receiver.stop()
    assert not sent.ok and "500" in sent.error and "T0P-S3CRET" not in sent.error


def test_an_unreachable_receiver_fails_with_a_reason():
    sent = notify.send("json://127.0.0.1:9/hook/S3CRET", title="t", body="b")
    assert not sent.ok and sent.error and "S3CRET" not in sent.error
