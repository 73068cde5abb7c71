"""Faults end in named states: a broker that is down, a lost task message, host
settings no command can be built from, two samplers on one PID, and what a
failure or a retry says. Real PostgreSQL and Redis; a closed loopback port for
the broker that is down."""

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from django.utils import timezone

from config.env import local_port_answers
from profiles.captures import enqueue, pipeline, redelivery, services
from profiles.captures import lifecycle as states
from profiles.models import Capture
from runs.models import Host, Run
from runs.remote import RemoteError
from runs.remote.model import MESSAGES
from runs.tokens import api_token_create
from tests.support.brokers import broker_url
from tests.support.procs import wait_until
from tests.support.sshd import free_port
from tests.support.worker import ROOT, worker_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_down():
    with broker_url(f"redis://127.0.0.1:{free_port()}/0"):
        yield


@pytest.fixture(autouse=True)
def empty_queue():
    """No test leaves messages for the next one (no worker consumes them here)."""
    yield
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(redelivery.capture_queue())


@pytest.fixture
def local():
    return Host.objects.get(name="local")


def _post(client, url: str, **body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_a_capture_asked_while_the_broker_is_down_answers_503_and_nothing_waits_queued(
    owner_client, local, broker_down
):
    response = _post(owner_client, "/api/captures/", host="local", pid=4242, duration=5)
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail.startswith("queue unavailable: the broker at redis://127.0.0.1:")
    assert "\n" not in detail and "REDIS_URL" in detail
    capture = Capture.objects.get(pk=response.json()["id"])
    assert (capture.status, capture.error_cause) == ("failed", "queue_unavailable")
    assert not Capture.objects.filter(status="queued").exists()


def test_a_web_server_started_with_redis_url_at_a_closed_port_answers_503(owner, local, tmp_path):
    port, env = free_port(), {**worker_env(), "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    with open(tmp_path / "web.log", "w") as log:
        web = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: local_port_answers(port), 30), (tmp_path / "web.log").read_text()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/captures/",
            data=json.dumps({"host": "local", "pid": 4242}).encode(),
            headers={"Authorization": f"Token {api_token_create(user=owner)[1]}",
                     "Content-Type": "application/json"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=30)  # noqa: S310 — http://127.0.0.1 above
        # Read while the server runs: on a slow machine its body may still be on the way.
        body = answer.value.read()
    finally:
        web.terminate()
        web.wait()
    assert answer.value.code == 503
    assert json.loads(body)["detail"].startswith("queue unavailable: the broker")
    assert set(Capture.objects.values_list("status", "error_cause")) == {
        ("failed", "queue_unavailable")
    }


def test_a_whole_job_capture_asked_while_the_broker_is_down_fails_every_capture(
    owner_client, local, broker_down
):
    run = Run.objects.create(name="job")
    for pid in (101, 102, 103):
        run.processes.create(host=local, pid=pid)
    response = _post(owner_client, f"/api/runs/{run.pk}/capture/", duration=5)
    assert response.status_code == 503 and "queue unavailable" in response.json()["detail"]
    causes = set(Capture.objects.values_list("status", "error_cause"))
    assert causes == {("failed", "queue_unavailable")}
    assert Capture.objects.count() == 3


def _stale(host: Host, pid: int, **fields) -> Capture:
    capture = services.capture_create(user=None, host=host, pid=pid, enqueue=False)
    old = timezone.now() - timezone.timedelta(seconds=120)
    Capture.objects.filter(pk=capture.pk).update(queued_at=old, **fields)
    return capture


def test_the_reaper_resends_a_capture_whose_message_never_came_and_counts_it(local):
    lost = _stale(local, 4242)
    fresh = services.capture_create(user=None, host=local, pid=4343, enqueue=False)
    assert redelivery.captures_resend_lost(timeout_s=60) == 1
    lost.refresh_from_db()
    assert lost.status == "queued" and lost.resends == 1 and lost.enqueued_at is not None
    assert Capture.objects.get(pk=fresh.pk).resends == 0
    # Sent just now: not stale again until another timeout passes.
    assert redelivery.captures_resend_lost(timeout_s=60) == 0


def test_the_reaper_leaves_a_stale_capture_alone_while_messages_wait_in_the_queue(local):
    waiting = services.capture_create(user=None, host=local, pid=4343, enqueue=False)
    assert enqueue.capture_enqueue(capture=waiting)  # a message no worker took yet
    lost = _stale(local, 4242)
    assert redelivery.captures_resend_lost(timeout_s=60) == 0
    lost.refresh_from_db()
    assert lost.status == "queued" and lost.resends == 0


def test_the_reaper_fails_a_lost_capture_as_queue_unavailable_when_the_broker_is_down(
    local, broker_down
):
    lost = _stale(local, 4242)
    assert redelivery.captures_resend_lost(timeout_s=60) == 1
    lost.refresh_from_db()
    assert (lost.status, lost.error_cause) == ("failed", "queue_unavailable")
    assert lost.error.startswith("queue unavailable: the broker at redis://")


def test_a_capture_resent_too_often_fails_naming_the_queue(local, settings):
    lost = _stale(local, 4242, resends=redelivery.MAX_RESENDS)
    redelivery.captures_resend_lost(timeout_s=60)
    lost.refresh_from_db()
    assert (lost.status, lost.error_cause) == ("failed", "queue_unavailable")
    assert f"sent {redelivery.MAX_RESENDS + 1} times" in lost.error
    assert settings.CELERY_TASK_DEFAULT_QUEUE in lost.error


BAD_HOSTS = [
    ({"transport": "ssh", "address": "127.0.0.1;touch${IFS}x"}, "address '127.0.0.1;touch"),
    ({"transport": "ssh", "address": "gpu-1", "username": "a$(b)"}, "username 'a$(b)'"),
    ({"transport": "local", "exec_prefix": "'unbalanced"}, 'exec prefix "\'unbalanced"'),
]


@pytest.mark.parametrize(("fields", "named"), BAD_HOSTS)
def test_a_host_no_command_can_be_built_for_fails_the_capture_at_once(owner_client, fields, named):
    host = Host.objects.create(name="bad", **fields)  # past validation, as old rows may be
    response = _post(owner_client, "/api/captures/", host="bad", pid=4242, duration=5)
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["error_cause"]) == ("failed", "host_config")
    assert named in body["error"] and "fix it on the host's Edit page" in body["error"]
    assert Capture.objects.get(pk=body["id"]).enqueued_at is None  # no task was sent
    check = owner_client.post(f"/api/hosts/{host.pk}/check/")
    assert check.status_code == 200
    assert check.json()["cause"] == "host_config" and named in check.json()["error"]


def test_a_host_broken_after_the_capture_was_queued_fails_on_the_worker_with_that_cause(local):
    capture = services.capture_create(user=None, host=local, pid=4242, enqueue=False)
    Host.objects.filter(pk=local.pk).update(exec_prefix="'unbalanced")
    assert pipeline.capture_execute(capture_id=capture.pk) == "failed"
    capture.refresh_from_db()
    assert capture.error_cause == "host_config" and "exec prefix" in capture.error


def test_a_dump_asked_while_a_record_runs_on_the_pid_is_refused_naming_it(owner_client, local):
    record = services.capture_create(user=None, host=local, pid=4242, enqueue=False)
    Capture.objects.filter(pk=record.pk).update(status="running")
    response = _post(owner_client, "/api/captures/", host="local", pid=4242, kind="dump")
    assert response.status_code == 409
    assert response.json()["busy"] == record.pk
    assert f"capture #{record.pk} (record, running)" in response.json()["detail"]
    assert Capture.objects.count() == 1
    other_pid = _post(owner_client, "/api/captures/", host="local", pid=4343, kind="dump")
    assert other_pid.status_code in (201, 503)


def test_of_two_captures_claimed_on_one_pid_the_later_claim_steps_back(local):
    first = Capture.objects.create(host=local, pid=4242, duration=5)
    second = Capture.objects.create(host=local, pid=4242, kind="dump")
    assert services.capture_claim(capture_id=first.pk, worker="w1")
    assert pipeline.capture_execute(capture_id=second.pk) == "failed"
    second.refresh_from_db()
    assert second.error_cause == "pid_busy"
    assert f"capture #{first.pk} (record) was already running py-spy" in second.error
    assert second.attempts == 1


def test_a_retry_says_so_on_the_api_the_page_and_the_rows(owner_client, local):
    capture = Capture.objects.create(host=local, pid=4242, status="queued", attempts=1)
    error = RemoteError(
        "unreachable", detail="ssh: connect to host gpu-1 port 22: Connection refused"
    )
    states.capture_retry_noted(capture_id=capture.pk, error=error, attempt=2, of=4, countdown=3)
    body = owner_client.get(f"/api/captures/{capture.pk}/").json()
    line = "retrying, attempt 2 of 4 in 3 s: host unreachable"
    assert body["status"] == "queued" and body["progress"]["retry"]["message"] == line
    assert body["error"].startswith(line) and body["error_detail"].startswith("ssh: connect")
    page = owner_client.get(f"/captures/{capture.pk}/").content.decode()
    assert line in page
    rows = owner_client.get("/captures/").content.decode()
    assert line in rows


def test_a_final_failure_does_not_promise_a_retry_and_shows_the_commands_words_once(
    owner_client, local
):
    capture = Capture.objects.create(host=local, pid=4242, status="queued", attempts=4)
    error = RemoteError(
        "unreachable", detail="ssh: connect to host gpu-1 port 22: Connection refused"
    )
    states.capture_fail_retried(capture_id=capture.pk, error=error, attempts=4)
    capture.refresh_from_db()
    assert capture.error == f"failed after 4 attempts: {MESSAGES['unreachable']}"
    assert not any("retry" in message for message in MESSAGES.values())
    assert capture.progress == {}
    page = owner_client.get(f"/captures/{capture.pk}/").content.decode()
    assert page.count("cannot reach the host") == 1
    assert '<details class="errordetail">' in page
    assert "ssh: connect to host gpu-1 port 22: Connection refused" in page


def test_every_failed_attempt_is_kept_after_the_live_retry_line_is_gone(owner_client, local):
    capture = Capture.objects.create(host=local, pid=4242, status="queued", attempts=1)
    said = "debug1: x\nssh: connect to host a port 22: refused"
    refused = RemoteError("unreachable", detail=said)
    states.capture_retry_noted(capture_id=capture.pk, error=refused, attempt=2, of=2, countdown=1)
    Capture.objects.filter(pk=capture.pk).update(attempts=2)
    lost = RemoteError("connection_lost", detail="Connection to a closed by remote host.")
    states.capture_fail_retried(capture_id=capture.pk, error=lost, attempts=2)
    capture.refresh_from_db()
    assert [(a["attempt"], a["cause"]) for a in capture.attempt_log] == [
        (1, "unreachable"),
        (2, "connection_lost"),
    ]
    assert capture.attempt_log[0]["said"] == "ssh: connect to host a port 22: refused"
    assert owner_client.get(f"/api/captures/{capture.pk}/").json()["attempt_log"] == (
        capture.attempt_log
    )
    page = owner_client.get(f"/captures/{capture.pk}/").content.decode()
    assert "2 failed attempts" in page
    assert "Connection to a closed by remote host." in page


def test_a_host_check_that_cannot_reach_the_host_says_so_once_and_keeps_sshs_words(
    owner_client,
):
    host = Host.objects.create(name="down", transport="ssh", address="127.0.0.1", port=free_port())
    check = owner_client.post(f"/api/hosts/{host.pk}/check/").json()
    assert (check["ssh_ok"], check["cause"], check["ok"]) == (False, "unreachable", False)
    assert check["py_spy_version"] is None and check["py_spy_path"] is None
    assert check["reason"] == "" and check["error"] == MESSAGES["unreachable"]
    assert "Connection refused" in check["error_detail"]
