"""A real HTTP server on 127.0.0.1 that records the webhooks it receives (Apprise's
json:// posts), optionally answering 500 to the first ones (a flaky receiver)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.requests: list[dict] = []
        self.accepted: list[dict] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook/s3cr3t-token") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 — http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    receiver.requests.append({"path": self.path, **body})
                    failing = len(receiver.requests) <= receiver.fail_first
                    if not failing:
                        receiver.accepted.append({"path": self.path, **body})
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        return Handler
