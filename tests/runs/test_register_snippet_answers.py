"""The README's register snippet never stops training: run as users copy it, against real
local HTTP servers that answer every wrong way, it prints one line saying what is wrong
and the script goes on."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.runs.test_register_snippet import snippet

AFTER = "training goes on"


class _Answers(BaseHTTPRequestHandler):
    """What a wrong server, proxy or neighbour answers, by the URL's first path segment."""

    def do_POST(self) -> None:  # noqa: N802 — http.server's name
        case = self.path.strip("/").split("/")[0]
        if case == "slow":
            time.sleep(8)  # past the snippet's 5 s timeout
        if case == "signin":
            return self._send(302, b"", location="/login-page")
        if case == "hangup":
            self.close_connection = True
            return self.wfile.flush()
        status, body = {
            "html": (200, b"<!doctype html>\n<title>Sign in</title><form>SSO</form>"),
            "list": (200, b"[]"),
            "other": (200, json.dumps({"detail": "ok", "run": "job-1"}).encode()),
            "norun": (200, json.dumps({"status": "registered"}).encode()),
            "broken": (502, b"<html>\n<h1>502 Bad Gateway</h1>\n</html>"),
        }.get(case, (404, b"no such page"))
        self._send(status, body)

    def do_GET(self) -> None:  # noqa: N802 — where the redirect leads
        self._send(200, b"<html><body>Please sign in</body></html>")

    def _send(self, status: int, body: bytes, location: str = "") -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def garbage_server() -> Iterator[str]:
    """Answers every connection with a line that is not HTTP at all (an SSH banner)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _train_with(url: str) -> list[str]:
    """Run the snippet then a line of 'training' in a fresh Python, as a rank would."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FLAMEDECK")}
    env = {**clean, "FLAMEDECK_URL": url, "FLAMEDECK_TOKEN": "k" * 40, "RANK": "3"}
    env["FLAMEDECK_HOST"] = "gpu-node-7"
    done = subprocess.run(
        [sys.executable, "-c", snippet() + f"\nprint({AFTER!r})\n"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def _one_line_then_training(lines: list[str]) -> str:
    assert len(lines) == 2 and lines[1] == AFTER, lines
    assert lines[0].startswith("flamedeck: not registered:"), lines
    return lines[0]


def test_a_url_without_a_scheme_is_named_and_training_goes_on():
    line = _one_line_then_training(_train_with("flamedeck.internal:8000"))
    assert "FLAMEDECK_URL='flamedeck.internal:8000' needs http://" in line


def test_a_refused_connection_names_the_url_and_training_goes_on():
    url = f"http://127.0.0.1:{_free_port()}"
    line = _one_line_then_training(_train_with(url))
    assert f"{url} cannot be reached" in line and "refused" in line


def test_a_server_that_never_answers_times_out_and_training_goes_on(server):
    started = time.monotonic()
    line = _one_line_then_training(_train_with(f"{server}/slow"))
    assert "cannot be reached" in line and "timed out" in line
    assert time.monotonic() - started < 8


@pytest.mark.parametrize("case", ["html", "signin"])
def test_a_sign_in_page_instead_of_the_api_is_named_and_training_goes_on(server, case):
    line = _one_line_then_training(_train_with(f"{server}/{case}"))
    assert f"{server}/{case} is not flamedeck, it answered b'<" in line


@pytest.mark.parametrize("case", ["list", "other", "norun"])
def test_json_of_another_shape_is_named_and_training_goes_on(server, case):
    line = _one_line_then_training(_train_with(f"{server}/{case}"))
    assert f"{server}/{case} is not flamedeck, it answered b'" in line


@pytest.mark.parametrize(("case", "code"), [("broken", "502"), ("missing", "404")])
def test_an_error_status_is_one_line_with_its_body_and_training_goes_on(server, case, code):
    line = _one_line_then_training(_train_with(f"{server}/{case}"))
    assert line.startswith(f"flamedeck: not registered: {code} ")


def test_a_server_that_hangs_up_or_speaks_another_protocol_does_not_stop_training(
    server, garbage_server
):
    _one_line_then_training(_train_with(f"{server}/hangup"))
    line = _one_line_then_training(_train_with(garbage_server))
    assert "SSH-2.0" in line
