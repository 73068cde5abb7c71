"""Share charts at 64 ranks, in a throwaway database.

Creates 25 runs (one page of the runs list), each with 14 whole-job captures of 64
ranks (22,400 captures; stats with 8 categories of 10 callers each, as heavy as the
engine's), then prints the server time and SQL queries of the runs list (sparklines
over the last 12 whole-job captures of each run), one run's chart (896 captures) and
the cross-run trends ("latest" and "mean").

Run: `.venv/bin/python bench/app/bench_series.py` (config.settings_test: PostgreSQL when it
answers on 127.0.0.1, otherwise SQLite under a temporary folder).
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench.app.bench_pages import time_page  # noqa: E402

RUNS = 25
RANKS = 64
CAPTURES_PER_RUN = 14
CATEGORIES = ["sync", "launch", "alloc", "copy", "host sync", "comm", "wait", "gil"]


def make_data() -> list:
    from runs.models import Run
    from tests.factories import minutes_ago, ranked_processes, whole_job_capture

    runs = []
    for r in range(RUNS):
        run = Run.objects.create(name=f"llama-{r}")
        processes = ranked_processes(run, RANKS)
        for g in range(CAPTURES_PER_RUN):
            shares = [
                {c: float((i + g + k) % 30) for k, c in enumerate(CATEGORIES)} for i in range(RANKS)
            ]
            whole_job_capture(run, processes, shares, at=minutes_ago(600 - 30 * g), callers=10)
        runs.append(run)
    return runs


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        start = time.perf_counter()
        runs = make_data()
        print(
            f"setup: {RUNS} runs x {CAPTURES_PER_RUN} whole-job captures x {RANKS} ranks "
            f"in {time.perf_counter() - start:.0f} s ({connection.vendor})"
        )
        client = Client()
        client.force_login(User.objects.create_user("bench"))
        print("server time (median of 5) and SQL queries:")
        for label, url in [
            ("runs list (25 sparklines, 64 ranks)", "/"),
            ("run chart, default (65 series)", f"/runs/{runs[0].pk}/trends.json"),
            (
                "run chart, one rank per category",
                f"/runs/{runs[0].pk}/trends.json?series=role:rank-7",
            ),
            ("cross-run trends, latest", "/trends.json?name=sync&runs=25"),
            ("cross-run trends, mean", "/trends.json?name=sync&runs=25&mode=mean"),
        ]:
            time_page(client, label, url)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
