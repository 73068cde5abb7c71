"""Whole-job compare at scale: 64 ranks against 64, in a throwaway database.

Two 4-rank whole-job captures of the real recordings in tests/data/jobs/ (balanced,
then straggler) go through the real pipeline and analysis; their ranks' stored stats
are then repeated to make two whole-job captures of 64 ranks each (rank-N takes the
stats of recorded rank N % 4; after, only rank-3 keeps the straggler's, the others take
those of recorded ranks 0-2), whose job reports are computed as the worker would.
Prints the server time of `GET /api/compare/groups/?a=&b=` (Django test client; the
median and the slowest of --runs) and its SQL queries. Target: under 1 s.

Run: `.venv/bin/python bench/app/bench_compare_groups.py [--ranks 64] [--runs 7]` (uses
config.settings_test: PostgreSQL when it answers on 127.0.0.1, else SQLite).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

import pytest  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from profiles.jobs import report as group_report  # noqa: E402
from profiles.models import Capture, CaptureGroup  # noqa: E402
from runs.models import Host, RunProcess  # noqa: E402
from tests.support.recorded_jobs import record_group  # noqa: E402


def big_group(case: str, ranks: int, run=None, one_slow: bool = False) -> CaptureGroup:
    """A whole-job capture of `ranks` ranks made of the 4 recorded ranks of `case`."""
    with pytest.MonkeyPatch.context() as patch:
        small, ids = record_group(patch, case, run_name=f"bench-{case}")
    stats = [Capture.objects.get(pk=pk).stats for pk in ids]
    run = run or small.run
    host = Host.objects.get(name="local")
    group = CaptureGroup.objects.create(run=run)
    processes = RunProcess.objects.bulk_create(
        RunProcess(run=run, host=host, pid=100_000 + group.pk * 1000 + n, role=f"rank-{n}")
        for n in range(ranks)
    )
    Capture.objects.bulk_create(
        Capture(run=run, group=group, process=p, host=host, pid=p.pid,
                status=Capture.Status.DONE, stats=stats[_source(n, one_slow)])
        for n, p in enumerate(processes)
    )  # fmt: skip
    captures = list(group.captures.select_related("process", "host").order_by("pk"))
    report = group_report.job_report(group, captures)
    CaptureGroup.objects.filter(pk=group.pk).update(job_report=report)
    return CaptureGroup.objects.get(pk=group.pk)


def _source(rank: int, one_slow: bool) -> int:
    """The recorded rank whose stats `rank` takes."""
    if one_slow:
        return 3 if rank == 3 else rank % 3
    return rank % 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        owner = User.objects.create_user("bench")
        owner.groups.add(Group.objects.get(name="operators"))
        Host.objects.get_or_create(name="local", defaults={"transport": "local"})
        before = big_group("balanced", args.ranks)
        after = big_group("straggler", args.ranks, run=before.run, one_slow=True)
        client = Client()
        client.force_login(owner)
        url = f"/api/compare/groups/?a={before.pk}&b={after.pk}"
        times, queries = [], 0
        for _ in range(args.runs):
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                answer = client.get(url)
                times.append(time.perf_counter() - start)
            queries = len(ctx.captured_queries)
            assert answer.status_code == 200, answer.content[:300]
        body = answer.json()
        new = [(f["rule"], f["ranks"]) for f in body["findings"]["new"]]
        print(f"database: {connection.vendor}; {args.ranks} ranks against {args.ranks}")
        print(f"roles compared: {len(body['roles'])}; functions listed: {len(body['functions'])}")
        print(f"new findings: {new}")
        print(
            f"GET /api/compare/groups/: median {statistics.median(times):.3f} s, "
            f"slowest {max(times):.3f} s over {args.runs} runs, {queries} SQL queries "
            f"(target < 1 s)"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
