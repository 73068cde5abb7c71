"""Whole-job pages at scale: the group page, its timeline, the merged flamegraph and the
whole-job compare of two N-rank captures (issue 47 item 2: each <= 1 s of server time,
with a bounded payload).

The data are real recorded ranks stored by the real pipeline, then repeated:
- two 4-rank whole-job captures of tests/data/jobs (balanced, then straggler) go
  through the group pipeline with only the remote seam swapped and are analysed by the
  real analysis step (tests.support.recorded_jobs.record_group): stats, flamegraph,
  per-thread tables, raw text and log are stored as the worker stores them;
- two real recordings with time (tests/data/timeline: steady and periodic_eval) are
  split and analysed the same way (tests.factories.timed_capture): their time tracks;
- each bench group has N ranks on N/8 ssh hosts (node-000…, 8 ranks each); rank r
  takes the stored stats and files of recorded rank r % 4 and the time track of one of
  the two timed recordings, with a host clock offset that puts both recordings on one
  clock (a few ms apart) and a start of its own. In the
  "before" group every rank is a balanced rank; in the "after" group rank-3 keeps the
  straggler's recorded rank 3 (the straggler) and the others take recorded ranks 0-2.
  Each group's job report is then stored by the worker's own function
  (profiles.jobs.report.group_report_update).

Then, for each answer, the server time (Django test client, the median of --runs after
one warm-up), the SQL queries and the payload in bytes:
the group page (HTML) and the JSON it polls (`/api/groups/<id>/live/`),
`GET /api/groups/<id>/`, `GET /api/groups/<id>/timeline/`, the merged flamegraph
(`GET /api/groups/<id>/flamegraph/`, as the page first asks for it), and the whole-job
compare (`GET /api/compare/groups/?a=&b=` and its page), each as a first visit asks for
it (no `?offset=`). Target: each under 1 s, with a payload that stops growing with ranks.

Run: `.venv/bin/python bench/app/bench_group_pages.py [--ranks 64,256,1024] [--runs 5]
[--json] [--profile NAME]` (one line per answer; `--json`: one JSON object per size;
`--profile NAME[,NAME]`: cProfile of those answers, their top functions). Uses
config.settings_test:
a throwaway PostgreSQL database (test_flamedeck_<pid>) when PostgreSQL answers on
127.0.0.1, else SQLite under a temporary folder.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

import pytest  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from profiles.jobs import report as group_report  # noqa: E402
from profiles.models import Capture, CaptureGroup  # noqa: E402
from runs.models import Host, Run, RunProcess  # noqa: E402
from tests import factories  # noqa: E402
from tests.support.recorded_jobs import record_group  # noqa: E402

PER_HOST = 8
FILES = ("raw_file", "log_file", "flamegraph_file", "threads_file", "export_file")
COPIED = ("raw_format", "raw_size", "rate", "duration", "native", "threads", "idle")


def recorded_ranks(case: str) -> list[Capture]:
    """The 4 ranks of a real recorded job, stored and analysed by the real pipeline."""
    with pytest.MonkeyPatch.context() as patch:
        _, ids = record_group(patch, case, run_name=f"bench-{case}")
    return [Capture.objects.get(pk=pk) for pk in ids]


def timed_sources() -> list[Capture]:
    """Two real recordings with time, split and analysed as the worker does."""
    return [factories.timed_capture("steady"), factories.timed_capture("periodic_eval")]


def ssh_hosts(count: int) -> list[Host]:
    have = {h.name: h for h in Host.objects.filter(name__startswith="node-")}
    missing = [f"node-{i:03d}" for i in range(count) if f"node-{i:03d}" not in have]
    Host.objects.bulk_create(
        Host(name=name, transport="ssh", address="127.0.0.1", username="bench") for name in missing
    )
    return list(Host.objects.filter(name__startswith="node-").order_by("name"))[:count]


def rank_capture(run, group, process, source: Capture, timed, n: int, at) -> Capture:
    """Rank n's capture: `source`'s stored stats and files, the time track of one of
    the `timed` recordings, moved onto the first one's clock."""
    first, timed = timed[0], timed[n % 2]
    align = first.stats["time"]["start"] - timed.stats["time"]["start"]
    stats = dict(source.stats)
    stats["time"] = timed.stats["time"]
    started = at + timedelta(seconds=0.002 * (n % 97))
    capture = Capture(
        run=run,
        group=group,
        process=process,
        host=process.host,
        pid=process.pid,
        kind=Capture.Kind.RECORD,
        status=Capture.Status.DONE,
        started_at=at,
        sampling_started_at=started,
        finished_at=started + timedelta(seconds=10.2),
        progress={
            # The two recordings were made at different times: each host's offset puts
            # them on one clock, a few ms apart.
            "clock_offset_s": round(align + 0.001 * (n % 13) - 0.006, 4),
            "sampled_s": 10.1,
            "expected_samples": 400,
        },
        stats=stats,
        time_file=timed.time_file.name,
        **{field: getattr(source, field).name for field in FILES},
        **{field: getattr(source, field) for field in COPIED},
    )
    return capture


def big_group(run: Run, hosts: list[Host], ranks: int, sources: list[Capture], timed, label: str):
    """A whole-job capture of `ranks` ranks (rank r: sources[r % len]), report stored."""
    group = CaptureGroup.objects.create(run=run, hosts_total=len(hosts), hosts_settled=len(hosts))
    at = timezone.now() - timedelta(minutes=30 if label == "before" else 5)
    CaptureGroup.objects.filter(pk=group.pk).update(created_at=at)
    pid0 = 10_000 + 10_000 * run.capture_groups.count()
    processes = RunProcess.objects.bulk_create(
        RunProcess(run=run, host=hosts[n // PER_HOST], pid=pid0 + n, role=f"rank-{n}")
        for n in range(ranks)
    )
    Capture.objects.bulk_create(
        rank_capture(run, group, p, sources[n], timed, n, at) for n, p in enumerate(processes)
    )
    start = time.perf_counter()
    stored = group_report.group_report_update(group_id=group.pk)
    took = time.perf_counter() - start
    assert stored is not None, CaptureGroup.objects.get(pk=group.pk).report_error
    return CaptureGroup.objects.get(pk=group.pk), took


def make_groups(ranks: int, balanced, straggler, timed):
    run = Run.objects.create(name=f"bench job {ranks} ranks")
    hosts = ssh_hosts(max(1, -(-ranks // PER_HOST)))
    before_sources = [balanced[n % 4] for n in range(ranks)]
    after_sources = [straggler[3] if n == 3 else straggler[n % 4 % 3] for n in range(ranks)]
    before, before_s = big_group(run, hosts, ranks, before_sources, timed, "before")
    after, after_s = big_group(run, hosts, ranks, after_sources, timed, "after")
    return before, after, {"before": round(before_s, 2), "after": round(after_s, 2)}


def answers(before: CaptureGroup, after: CaptureGroup) -> list[tuple[str, str]]:
    pk = after.pk
    compare = f"?a={before.pk}&b={after.pk}"
    return [
        ("group page", f"/groups/{pk}/"),
        ("group live JSON", f"/api/groups/{pk}/live/"),
        ("group API", f"/api/groups/{pk}/"),
        ("group timeline", f"/api/groups/{pk}/timeline/"),
        ("merged flamegraph", f"/api/groups/{pk}/flamegraph/"),
        ("compare API", f"/api/compare/groups/{compare}"),
        ("compare page", f"/compare/groups/{compare}"),
    ]


def measure(client: Client, url: str, runs: int) -> dict:
    client.get(url)  # warm caches and the compressor
    reset_queries()
    times, queries, size, status = [], 0, 0, 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.get(url)
            body = (
                b"".join(response.streaming_content)
                if hasattr(response, "streaming_content")
                else response.content
            )
            times.append(time.perf_counter() - start)
        queries, size, status = len(ctx.captured_queries), len(body), response.status_code
    return {
        "server_s": round(statistics.median(times), 4),
        "slowest_s": round(max(times), 4),
        "queries": queries,
        "bytes": size,
        "status": status,
    }


def profile(client: Client, url: str, top: int = 30) -> str:
    client.get(url)
    profiler = cProfile.Profile()
    profiler.enable()
    client.get(url)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def run_size(ranks: int, sources, client: Client, args) -> dict:
    before, after, report_s = make_groups(ranks, *sources)
    result = {
        "ranks": ranks,
        "hosts": max(1, -(-ranks // PER_HOST)),
        "database": connection.vendor,
        "report_s": report_s,
        "straggler": (after.job_report.get("straggler") or {}).get("name"),
        "answers": {},
    }
    for name, url in answers(before, after):
        if args.profile and name not in args.profile.split(","):
            continue
        result["answers"][name] = {"url": url, **measure(client, url, args.runs)}
        if args.profile:
            print(profile(client, url))
    return result


def print_table(result: dict) -> None:
    print(
        f"{result['ranks']} ranks on {result['hosts']} hosts ({result['database']}); "
        f"straggler {result['straggler']}; job reports stored in {result['report_s']} s"
    )
    for name, row in result["answers"].items():
        flag = "" if row["server_s"] <= 1 else "  OVER 1 s"
        print(
            f"  {name:<20} {row['server_s'] * 1000:9.1f} ms (slowest {row['slowest_s'] * 1000:.0f})"
            f" {row['queries']:5d} queries {row['bytes'] / 1024:10.1f} KiB"
            f"  [{row['status']}]{flag}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1024", help="comma-separated sizes (default 1024)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument(
        "--profile", default="", help="cProfile these answers (names, comma-separated)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.ranks.split(",") if s.strip()]
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        owner = User.objects.create_user("bench")
        owner.groups.add(Group.objects.get(name="operators"))
        factories.local_host()
        sources = (recorded_ranks("balanced"), recorded_ranks("straggler"), timed_sources())
        client = Client()
        client.force_login(owner)
        for ranks in sizes:
            result = run_size(ranks, sources, client, args)
            if args.json:
                print(json.dumps(result), flush=True)
            else:
                print_table(result)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
