"""Schemathesis against a real server on this run's PostgreSQL database: every check,
every phase (examples, coverage, fuzzing, stateful, which follows the schema's links),
a fixed seed and a fixed budget, with the repository's schemathesis.toml. Any failure
fails the test with Schemathesis's own report (docs/api.md says how to run the same
command by hand, longer).

The server is gunicorn with sync workers, as in production: Django's runserver gives
each kept-alive HTTP connection a thread of its own, and with persistent database
connections each such thread held a PostgreSQL connection (100, the server's limit, in
ten minutes of Schemathesis). Its request line has no length limit here, so that every
URL reaches the API: gunicorn's own (4,094 bytes by default) answers a longer one
itself with an HTML 414, before flamedeck (docs/api.md, "Errors")."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from runs.tokens import api_token_create
from tests.support.procs import wait_until
from tests.support.sshd import free_port
from tests.support.worker import worker_env

ROOT = Path(__file__).resolve().parents[2]
SEED, BUDGET_S = 49, 75

pytestmark = [pytest.mark.slow, pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    serve = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2",
         "--limit-request-line", "0"],
        cwd=ROOT, env={**worker_env(), "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1"},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(url + "/api/", timeout=5).status_code == 401
        except requests.ConnectionError:
            return False

    try:
        assert wait_until(answers, 60), (tmp_path / "server.log").read_text()
        yield url
    finally:
        os.killpg(serve.pid, 15)
        serve.wait(timeout=30)
        log.close()


def test_schemathesis_finds_no_failure_in_any_phase(server, django_user_model, tmp_path):
    admin = django_user_model.objects.create_superuser("schemathesis", "s@example.com", "x")
    token = api_token_create(user=admin)[1]
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", f"{server}/api/schema/",
        "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
        "--seed", str(SEED), "--max-time", str(BUDGET_S), "--workers", "1",
        "-H", f"Authorization: Token {token}", "--report", "ndjson",
        "--report-dir", str(tmp_path / "report"),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=BUDGET_S + 180)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-3000:]
