"""`HOST=0.0.0.0 make run` serves the nodes of a job: the server answers through this
machine's own names and addresses, and only those (never any Host header); loopback
stays the default."""

import http.client
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from config.hosts import _interface_ipv4, default_allowed_hosts, default_csrf_origins
from runs.tokens import api_token_create
from tests.support.procs import wait_until
from tests.support.sshd import free_port
from tests.support.worker import worker_env

ROOT = Path(__file__).resolve().parents[2]


def _outside_address() -> str:
    addresses = sorted(a for a in _interface_ipv4() if not a.startswith("127."))
    if not addresses:
        pytest.skip("this machine has no non-loopback IPv4 address")
    return addresses[0]


def test_a_loopback_bind_answers_loopback_names_only():
    assert default_allowed_hosts("127.0.0.1") == ["127.0.0.1", "localhost", "[::1]"]


def test_a_wildcard_bind_answers_this_machines_names_and_addresses_but_no_wildcard():
    allowed = default_allowed_hosts("0.0.0.0")  # noqa: S104
    assert "*" not in allowed and not any(h.startswith(".") for h in allowed)
    assert _outside_address() in allowed
    assert all(h.startswith("[") for h in allowed if ":" in h)  # IPv6 as Host headers spell it


def test_the_base_url_host_is_answered_and_is_a_trusted_origin_whatever_the_bind():
    base = "https://flamedeck.example.org"
    assert "flamedeck.example.org" in default_allowed_hosts("127.0.0.1", base)
    assert default_csrf_origins(base + "/") == [base]
    assert default_csrf_origins("") == []


def test_make_run_binds_loopback_unless_host_says_otherwise():
    def serve_line(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT")}
        dry = subprocess.run(
            ["make", "-n", "run", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )
        return next(line for line in dry.stdout.splitlines() if "manage.py serve" in line)

    assert serve_line().endswith("serve --host 127.0.0.1 --port 8000")
    assert serve_line("HOST=0.0.0.0", "PORT=9000").endswith("serve --host 0.0.0.0 --port 9000")


def _get(address: str, port: int, path: str, host: str | None = None, **headers: str):
    conn = http.client.HTTPConnection(address, port, timeout=10)
    conn.request("GET", path, headers={"Host": host or f"{address}:{port}", **headers})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_host_0_0_0_0_serves_the_login_page_and_the_api_through_the_machines_address(
    tmp_path, owner
):
    address, port = _outside_address(), free_port()
    token = api_token_create(user=owner)[1]
    env = {**worker_env(), "HOST": "0.0.0.0", "DEBUG": "0"}  # noqa: S104
    env.pop("ALLOWED_HOSTS", None)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--no-beat"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def answers() -> bool:
            try:
                return _get(address, port, "/accounts/login/") == 200
            except OSError:
                return False

        assert wait_until(answers, 60), log.read_text()
        said = log.read_text()
        assert f"bound to 0.0.0.0:{port}" in said and "FLAMEDECK_URL=http://" in said
        assert re.search(rf"answers requests for: .*\b{re.escape(address)}\b", said), said
        api = _get(address, port, "/api/runs/", Authorization=f"Token {token}")
        assert api == 200
        # A forged Host header is refused: the names are this machine's, not any.
        assert _get(address, port, "/accounts/login/", host="evil.example") == 400
    finally:
        os.killpg(serve.pid, 15)
        serve.wait(timeout=30)


def test_the_default_bind_refuses_the_machines_address_as_host(tmp_path):
    address = _outside_address()
    code = "from django.conf import settings as s; print(' '.join(s.ALLOWED_HOSTS))"
    env = {k: v for k, v in os.environ.items() if k not in ("ALLOWED_HOSTS", "FLAMEDECK_BIND")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", FLAMEDECK_VAR_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert address not in done.stdout.split()
