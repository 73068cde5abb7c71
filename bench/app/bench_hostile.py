"""Hostile input against a real `make run`-like flamedeck (issue 18's review, replayed).

`manage.py serve` (runserver, the capture worker, the prefork analysis worker, beat)
runs on a throwaway var/ with `make run`'s defaults: SQLite and the embedded
filesystem broker. A viewer and an operator send, over loopback:
- comments of pathological Markdown, then every role loads the capture page;
- non-object JSON bodies and a form over Django's field limit to write endpoints;
- gzip bombs (16 GiB of valid lines, one 1.5 GiB line, a 1 GiB log: refused at
  upload) and files under the limit that used to hold workers (40 MiB of `;`, a
  400 MiB line, a 400 MiB log, deep distinct stacks that need more than the memory
  limit, a slow polynomial regex that needs more than the time limit);
- the `re:^(a+)+$` keyword on a frame of 31 `a`s (refused by the form, and by the
  engine for a set saved before the check existed);
- a burst on the embedded broker: 500 tasks sent by 3 processes while 3 workers
  consume (`--only burst --root CHECKOUT` runs it against another checkout).
Per case it prints the answer time, the peak memory over the case of the web server
and of the largest worker-side process (a worker, or an analysis child), the final
state and the bound.

Run: .venv/bin/python bench/app/bench_hostile.py [--only NAME,...]
The machine is shared: times are wall-clock under whatever else runs; rerun on a
quiet machine for clean figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_broker import burst  # noqa: E402
from hostile_server import MemoryWatch, Server  # noqa: E402

MIB = 1 << 20
ENV = {  # the bench's deployment: defaults except faster reaping and a short time base
    "FLAMEDECK_ANALYSIS_TIME_S": "20",
    "FLAMEDECK_HEARTBEAT_TIMEOUT_S": "10",
    "FLAMEDECK_REAP_EVERY_S": "2",
}
MEMORY_MB = 2048  # FLAMEDECK_ANALYSIS_MEMORY_MB's default, which the bench keeps
LINE = b"thread (1): MainThread;train (train.py:10);cuLaunchKernel (libcuda.so.1) 3\n"
COMMENTS = {
    '"[" * 19000': "[" * 19000,
    '"*" * 19000': "*" * 19000,
    '">" * 19000': ">" * 19000,
    '"1. " * 600': "1. " * 600,
    '"![" * 9000': "![" * 9000,
    '"*_" * 4999 + "a" + "_*" * 4999': "*_" * 4999 + "a" + "_*" * 4999,
}
BODIES = ["[]", '"s"', "null", "5", "true", json.dumps(list(range(300_000)))]
ROWS: list[dict] = []


def report(case: str, seconds: float, watch: MemoryWatch | None, state: str, ok: bool) -> None:
    peak = f"web {watch.peak_web_mb:4.0f}, workers {watch.peak_one_mb:5.0f} MB" if watch else ""
    ROWS.append({"case": case, "ok": ok})
    print(f"{'ok ' if ok else 'BAD'} {case:58} {seconds:6.2f} s {peak:29} {state}", flush=True)


def _done(body: dict) -> bool:
    return body["status"] == "done"


def timed(func, *args, **kwargs):
    started = time.monotonic()
    result = func(*args, **kwargs)
    return result, time.monotonic() - started


def bomb(inflated_mib: int, block: bytes) -> bytes:
    """A multi-member gzip: one compressed MiB of `block`, repeated."""
    member = gzip.compress((block * (MIB // len(block) + 1))[:MIB], compresslevel=9)
    return member * inflated_mib


class Bench:
    def __init__(self, server: Server) -> None:
        self.server, self.base = server, server.base
        self.viewer = server.session("viewer", "viewer-pass")
        self.operator = server.session("operator", "operator-pass")
        self.api = {"Authorization": f"Token {server.token('operator')}"}

    def post_import(self, samples: bytes, log: bytes | None = None, name: str = "f.txt.gz"):
        files = {"file": (name, samples)}
        if log is not None:
            files["log"] = ("py-spy.log.gz", log)
        return timed(
            self.operator.post, f"{self.base}/api/captures/import/", files=files, timeout=600
        )

    def final(self, capture_id: int, timeout_s: float = 600) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            body = self.operator.get(f"{self.base}/api/captures/{capture_id}/", timeout=60).json()
            if body["status"] in ("done", "failed", "cancelled"):
                return body
            time.sleep(0.5)
        return body

    def analysed(self, case: str, samples: bytes, bound: str, expect, log: bytes | None = None):
        """Upload (accepted), wait for the analysis, report time, memory and state."""
        with MemoryWatch(self.server) as watch:
            (response, answer_s) = self.post_import(samples, log)
            assert response.status_code == 201, (case, response.status_code, response.text[:300])
            body, total_s = timed(self.final, response.json()["id"])
        used = (body.get("progress") or {}).get("analysis") or {}
        state = f"{body['status']} ({body.get('error_cause') or 'ok'}) after {total_s:.1f} s"
        if used.get("peak_mb"):
            state += f", analysis child {used['peak_mb']:.0f} MB"
        ok = expect(body) and watch.peak_one_mb < MEMORY_MB + 600
        report(f"{case} [{bound}]", answer_s, watch, state + f"; {(body['error'] or '')[:90]}", ok)
        return body

    # --- cases ---------------------------------------------------------------------

    def comments(self) -> None:
        capture = self.imported(LINE * 50)
        url = f"{self.base}/captures/{capture}/"
        for label, body in COMMENTS.items():
            response, seconds = timed(
                self.viewer.post, f"{url}comments/", data={"body": body}, timeout=60
            )
            report(f"comment {label} saved", seconds, None, str(response.status_code),
                   response.status_code in (200, 302))  # fmt: skip
        for who, session in (("viewer", self.viewer), ("operator", self.operator)):
            page, seconds = timed(session.get, url, timeout=60)
            report(f"capture page with them, as {who} [< 1 s, 200]", seconds, None,
                   str(page.status_code), page.status_code == 200 and seconds < 1)  # fmt: skip

    def imported(self, raw: bytes) -> int:
        response, _ = self.post_import(gzip.compress(raw))
        capture = response.json()["id"]
        self.final(capture)
        return capture

    def bodies(self) -> None:
        urls = ["/api/register/", "/api/runs/1/processes/", "/api/hosts/", "/api/captures/"]
        worst, statuses = 0.0, set()
        for url in urls:
            for body in BODIES:
                response, seconds = timed(
                    self.operator.post, self.base + url, data=body,
                    headers={"Content-Type": "application/json", **self.api}, timeout=60,
                )  # fmt: skip
                worst, statuses = max(worst, seconds), statuses | {response.status_code}
        report(f"{len(urls) * len(BODIES)} non-object JSON bodies [400, < 1 s]", worst, None,
               f"statuses {sorted(statuses)}", statuses == {400} and worst < 1)  # fmt: skip
        fields = {f"f{i}": "x" for i in range(1200)}
        response, seconds = timed(self.viewer.post, f"{self.base}/runs/new/", data=fields)
        report("form of 1,200 fields [400 naming the limit]", seconds, None,
               f"{response.status_code} {response.text.strip()[:60]}",
               response.status_code == 400 and "NUMBER_FIELDS" in response.text)  # fmt: skip

    def refused(self, case: str, samples: bytes, log: bytes | None = None) -> None:
        with MemoryWatch(self.server) as watch:
            response, seconds = self.post_import(samples, log)
        text = response.json().get("detail", response.text) if response.content else ""
        ok = response.status_code == 413 and seconds < 5 and "FLAMEDECK_MAX_UPLOAD_MB" in text
        sent = (len(samples) + len(log or b"")) / MIB
        report(f"{case} ({sent:.1f} MB sent) [413, < 5 s]", seconds, watch,
               f"{response.status_code} {text[:75]}", ok)  # fmt: skip

    def bombs(self) -> None:
        self.refused("gzip of 16 GiB of valid lines", bomb(16 * 1024, LINE))
        self.refused("gzip of one 1.5 GiB line", bomb(1536, b"a"))
        self.refused("gzip of a 1 GiB log", gzip.compress(LINE * 20), bomb(1024, b"py-spy> x\n"))

    def heavy_files(self) -> None:
        failed = lambda body: body["status"] == "failed"  # noqa: E731
        self.analysed("gzip of 40 MiB of `;`", bomb(40, b";"), "failed, bounded", failed)
        self.analysed("gzip of one 400 MiB line", bomb(400, b"a"), "failed, bounded", failed)
        done = lambda body: body["status"] == "done"  # noqa: E731
        log = bomb(400, b"py-spy> x\n")
        self.analysed("samples + a 400 MiB log", gzip.compress(LINE * 100), "done", done, log)
        deep = b"".join(b"d%d;" % i + b"b;" * 7990 + b"b 1\n" for i in range(8300))
        self.analysed(
            "deep distinct stacks (65M nodes)", gzip.compress(deep), "failed at 2 GB",
            lambda body: body["error_cause"] == "analysis_memory_limit",
        )  # fmt: skip

    def regex(self) -> None:
        """Patterns that backtrack catastrophically on Python's `re` run on RE2 (issue 41):
        saved, and a re-analysis with each is done in well under a second."""
        reviews = "re:^" + ".?" * 28 + "." * 28 + "!"
        wide = b"".join(b"m;" + b".a" * 8000 + b"%d (x.py:1) 1\n" % i for i in range(60))
        cases = [
            ("nested", "re:^(a+)+$", b"main;" + b"a" * 31 + b" (x.py:1) 5\n", "on 31 `a`s"),
            ("reviews", reviews, b"main;" + b"a" * 37 + b" (x.py:1) 5\n", "on 37 `a`s"),
            ("dotted", r"re:(?:\.\w+)+x", wide, "on 60 frames of 16 KB"),
        ]
        for name, keyword, frames, on in cases:
            set_id = self.server_keyword_set(name, keyword)
            capture = self.imported(frames)
            label = f"{keyword[:22]}{'…' if len(keyword) > 22 else ''} {on}"
            body = self.reanalyse(capture, set_id, label, "done, RE2", _done)
            took = ((body.get("progress") or {}).get("analysis") or {}).get("seconds")
            report("... its analysis [under 1 s]", 0, None, f"{took} s", (took or 99) < 1)
        form = {"name": "bad", "description": "", "keywords_text": "x: re:a(?=b)"}
        response, seconds = timed(self.operator.post, f"{self.base}/keywords/new/", data=form)
        refused = response.status_code == 200 and "lookahead is not supported" in response.text
        said = "refused by the form, naming it" if refused else str(response.status_code)
        report("keyword re:a(?=b), which RE2 does not take [refused]", seconds, None, said, refused)

    def server_keyword_set(self, name: str, keyword: str) -> int:
        code = (
            "from profiles.models import Keyword, KeywordSet\n"
            f"ks = KeywordSet.objects.create(name={name!r})\n"
            f"Keyword.objects.create(keyword_set=ks, keyword={keyword!r}, category='x')\n"
            "print(ks.pk)\n"
        )
        return int(self.server.manage("shell", "-c", code).split()[-1])

    def reanalyse(self, capture: int, set_id: int, case: str, bound: str, expect) -> dict:
        url = f"{self.base}/captures/{capture}/reanalyze/"
        with MemoryWatch(self.server) as watch:
            response, seconds = timed(self.operator.post, url, data={"keyword_set": set_id})
            body, total_s = timed(self.final, capture)
        state = f"{body['status']} after {total_s:.1f} s: {(body['error'] or '')[:80]}"
        report(f"{case} [{bound}]", seconds, watch, state, expect(body) and response.ok)
        return body


CASES = ["comments", "bodies", "bombs", "heavy_files", "regex", "burst"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--root", default=None, help="checkout to run the burst against")
    args = parser.parse_args()
    wanted = args.only.split(",")
    if wanted != ["burst"]:
        server = Server(ENV).start()
        try:
            bench = Bench(server)
            for case in (c for c in CASES if c in wanted and c != "burst"):
                getattr(bench, case)()
            report("worker restarts by the supervisor [0]", 0, None, str(server.restarts()),
                   server.restarts() == 0)  # fmt: skip
        finally:
            server.stop()
    if "burst" in wanted:
        sent, done, crashes, seconds = burst(root=args.root)
        report(f"burst: {sent} tasks from 3 processes, 3 workers [0 lost, 0 crashes]", seconds,
               None, f"{done} ran, {crashes} crashes", done == sent and crashes == 0)  # fmt: skip
    bad = [row["case"] for row in ROWS if not row["ok"]]
    print(f"\n{len(ROWS) - len(bad)} of {len(ROWS)} within bounds" + (f"; out: {bad}" * bool(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
