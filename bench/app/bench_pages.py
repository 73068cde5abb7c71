"""Page speed at scale, in a throwaway database.

Creates a run with 1,000 captures, a capture with 100,000 unique stacks and a
whole-job dump of 1,024 ranks (the real hung gloo job of tests/data/dumps/own_code,
its ranks repeated, a quarter of them odd), then prints, per page, the server time and
the number of SQL queries (Django test client), and the time to an interactive page
in headless Chromium (the flamegraph drawn; the dump's classes drawn).

Run: `.venv/bin/python bench/app/bench_pages.py [--dump-only]` (uses config.settings_test:
PostgreSQL when it answers on 127.0.0.1, otherwise SQLite under a temporary folder).
"""

import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, logged_in_context  # noqa: E402

CAPTURES_IN_RUN = 1000
UNIQUE_STACKS = 100_000
REPEAT = 5


def big_raw(unique: int) -> bytes:
    """Collapsed stacks: `unique` distinct root→leaf paths over 8 threads."""
    rng = random.Random(7)
    mods = [f"mod{i}" for i in range(40)]
    natives = [
        "cuLaunchKernel (libcuda.so.1)",
        "cuStreamSynchronize (libcuda.so.1)",
        "0x7fc0eb8a71f5 (libc.so.6)",
        "pthread_cond_wait (libc.so.6)",
    ]
    lines = []
    for i in range(unique):
        depth = rng.randint(6, 24)
        frames = [f"thread ({5000 + i % 8}): target-{i % 8}", "<module> (train.py:1)"]
        frames += [
            f"f{rng.randint(0, 300)} ({rng.choice(mods)}.py:{rng.randint(1, 400)})"
            for _ in range(depth)
        ]
        frames.append(f"leaf{i} ({rng.choice(natives)})")
        lines.append(";".join(frames) + f" {rng.randint(1, 50)}")
    return ("\n".join(lines) + "\n").encode()


def make_data(owner):
    from profiles.captures import services
    from profiles.models import Capture
    from runs.models import Host, Run, RunProcess
    from tests.profiles.web.test_views import fake_stats

    host = Host.objects.get(name="local")
    run = Run.objects.create(name="bench run")
    process = RunProcess.objects.create(run=run, host=host, pid=4242, role="target-0")
    Capture.objects.bulk_create(
        Capture(
            run=run,
            process=process,
            host=host,
            pid=4242,
            status=Capture.Status.DONE,
            stats=fake_stats(i, "degraded" if i % 10 == 0 else None),
        )
        for i in range(CAPTURES_IN_RUN)
    )
    Run.objects.bulk_create(Run(name=f"other {i}") for i in range(300))
    t0 = time.perf_counter()
    raw = big_raw(UNIQUE_STACKS)
    big = services.capture_import(user=owner, file=SimpleUploadedFile("big.txt", raw), run=run)
    if big.stats is None:
        raise SystemExit(f"the big import ended {big.status}: {big.error}")
    print(
        f"setup: imported {len(raw) / 1e6:.1f} MB raw, {big.stats['unique_stacks']} unique stacks "
        f"in {time.perf_counter() - t0:.1f} s (status {big.status}); stored per-thread "
        f"tables {big.threads_file.size / 1e6:.2f} MB gzip"
    )
    return run, big, host


DUMP_RANKS = 1024


def make_dump_group():
    """A whole-job dump of DUMP_RANKS ranks: the real dumps of the 4-rank own_code hang,
    rank r taking rank r % 4's dumps (so a quarter stand apart, in `wait_for_lock`)."""
    from profiles.pyspy.formats.dump import parse_dump
    from runs.models import Run
    from tests import factories

    case = ROOT / "tests" / "data" / "dumps" / "own_code"
    real = [[parse_dump((case / f"rank-{r}.{k}.json").read_text()) for k in range(3)]
            for r in range(4)]  # fmt: skip
    t0 = time.perf_counter()
    series = {f"rank-{r}": real[r % 4] for r in range(DUMP_RANKS)}
    group = factories.whole_job_dump(Run.objects.create(name="bench hung job"), series)
    print(f"setup: a whole-job dump of {DUMP_RANKS} ranks stored with its verdict in "
          f"{time.perf_counter() - t0:.1f} s ({group.stacks['verdict']['kind']})")  # fmt: skip
    return group


def time_page(client: Client, label: str, url: str) -> None:
    client.get(url)  # warm caches and compressor
    reset_queries()  # a full query log (9,000 of the set-up's inserts) miscounts
    times, queries = [], 0
    for _ in range(REPEAT):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.get(url)
            if hasattr(response, "streaming_content"):
                b"".join(response.streaming_content)
            times.append(time.perf_counter() - start)
        queries = len(ctx.captured_queries)
    assert response.status_code == 200, (url, response.status_code)
    print(f"  {label:<38} {statistics.median(times) * 1000:8.1f} ms {queries:5d} queries")


def browser_times(owner_client: Client, big, run, dump_group) -> None:
    from pytest_django.live_server_helper import LiveServer

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("  (playwright missing: no browser timings)")
        return
    if not os.path.exists(CHROMIUM):
        print(f"  ({CHROMIUM} missing: no browser timings)")
        return
    server = LiveServer("127.0.0.1:0")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = logged_in_context(browser, owner_client, server.url)
            page = context.new_page()
            page.set_default_timeout(60_000)
            dump_page = (
                f"whole-job dump page, {DUMP_RANKS} ranks",
                dump_group.get_absolute_url(),
                "#stack-classes",
            )
            for label, url, ready in (
                [dump_page]
                if big is None
                else [
                    dump_page,
                    (
                        "capture page, 100k stacks",
                        big.get_absolute_url(),
                        "#flamegraph[data-ready='1']",
                    ),
                    ("run page, 1,000 captures", run.get_absolute_url(), "#captures table"),
                    ("run list", "/", "table.runs"),
                ]
            ):
                page.goto(server.url + url)  # warm
                samples = []
                for _ in range(3):
                    start = time.perf_counter()
                    page.goto(server.url + url)
                    page.wait_for_selector(ready)
                    samples.append(time.perf_counter() - start)
                print(f"  {label:<38} {statistics.median(samples) * 1000:8.1f} ms to interactive")
            if big is None:
                browser.close()
                return
            page.goto(server.url + big.get_absolute_url())
            page.wait_for_selector("#flamegraph[data-ready='1']")
            nodes = page.locator("#flamegraph g").count()
            zoom_ms = page.evaluate(
                "() => { const g = document.querySelectorAll('#flamegraph g');"
                " const t = performance.now();"
                " const target = g[Math.min(5, g.length - 1)];"
                " target.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
                " return performance.now() - t; }"
            )
            print(
                f"  flamegraph: {nodes} frames drawn (frames under 1 px skipped); "
                f"a zoom click runs in {zoom_ms:.0f} ms"
            )
            browser.close()
    finally:
        server.stop()


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        owner = User.objects.create_user("bench")
        owner.groups.add(Group.objects.get(name="operators"))
        dump_group = make_dump_group()
        client = Client()
        client.force_login(owner)
        if "--dump-only" in sys.argv:  # the whole-job dump page alone
            time_page(client, f"whole-job dump page ({DUMP_RANKS} ranks)",
                      dump_group.get_absolute_url())  # fmt: skip
            time_page(client, f"whole-job dump API ({DUMP_RANKS} ranks)",
                      f"/api/groups/{dump_group.pk}/")  # fmt: skip
            browser_times(client, None, None, dump_group)
            return
        run, big, host = make_data(owner)
        print(f"server time (median of {REPEAT}) and SQL queries per page:")
        for label, url in [
            ("run list (301 runs)", "/"),
            ("run page (1,000 captures)", run.get_absolute_url()),
            ("run page, page 20", run.get_absolute_url() + "?page=20"),
            ("capture list (1,001 captures)", "/captures/"),
            ("capture page (100k unique stacks)", big.get_absolute_url()),
            (
                "flamegraph API (100k stacks, 8000 nodes)",
                f"/api/captures/{big.pk}/flamegraph/?max_nodes=8000",
            ),
            ("capture API (stats, no flamegraph)", f"/api/captures/{big.pk}/"),
            (
                "capture API, 2 of 8 threads",
                f"/api/captures/{big.pk}/?thread=target-1,target-2",
            ),
            ("host page", host.get_absolute_url()),
            (f"whole-job dump page ({DUMP_RANKS} ranks)", dump_group.get_absolute_url()),
            (f"whole-job dump API ({DUMP_RANKS} ranks)", f"/api/groups/{dump_group.pk}/"),
            ("keyword sets", "/keywords/"),
        ]:
            time_page(client, label, url)
        print("headless Chromium, navigation to interactive (median of 3):")
        browser_times(client, big, run, dump_group)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
