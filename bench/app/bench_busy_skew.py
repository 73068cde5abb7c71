"""Start skew of whole-job captures of 4 busy ranks on one machine (issue 47 item 1).

A real 4-rank PyTorch job (bench/targets/train.py, gloo on CPU, `--cause straggler`: every rank
computes without pause, the straggler longer) on this machine's `local` host: with 2
cores, 4 ranks saturate them, and py-spy's attach to a busy rank (libtorch's symbols
with `--native`) is where a whole-job capture used to start late. Each of `--captures`
whole-job captures goes through the API with the app's real workers, one after the
other; per capture it prints the group's `start_skew_s` (the spread of the ranks' first
kept samples on the host's clock: one machine, one clock, so this is the true spread),
how far ahead the instant was, and each rank's lead (request to sampling). Target:
skew <= 0.3 s on every capture.

Run: .venv/bin/python bench/app/bench_busy_skew.py [--captures 10] [--duration 3] [--json]
Needs the torch venv (`make torchenv`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "app"))

from bench_group import _configure, _drop  # noqa: E402

RANKS = 4


def _start_job(seconds: float) -> list[subprocess.Popen]:
    """4 ranks of bench/targets/train.py; returns once every rank said `ready`."""
    python = os.environ.get("TORCH_PYTHON", str(ROOT / ".torchenv" / "bin" / "python"))
    port = 29500 + os.getpid() % 1000
    ranks = []
    for rank in range(RANKS):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(RANKS),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
        argv = [python, str(ROOT / "bench" / "targets" / "train.py"), "--cause", "straggler",
                "--seconds", str(seconds)]  # fmt: skip
        ranks.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    for proc in ranks:
        for line in proc.stdout:
            if line.startswith("ready"):
                break
    return ranks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--captures", type=int, default=10)
    parser.add_argument("--duration", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    database = _configure(False)
    ranks = _start_job(seconds=60 + args.captures * (args.duration + 15))
    try:
        _bench(args, ranks)
    finally:
        for proc in ranks:
            proc.kill()
        _drop(database)


def _bench(args: argparse.Namespace, ranks: list[subprocess.Popen]) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from profiles.models import CaptureGroup
    from runs.models import Host, Run, RunProcess
    from runs.tokens import api_token_create
    from tests.support.worker import WorkerProcess

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="x")  # noqa: S106
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    local = Host.objects.get(name="local")
    run = Run.objects.create(name="busy", status="running")
    for rank, proc in enumerate(ranks):
        RunProcess.objects.create(run=run, host=local, pid=proc.pid, role=f"rank-{rank}")
    workdir = Path(os.environ["FLAMEDECK_VAR_DIR"])
    worker = WorkerProcess(workdir / "worker.log")
    skews = []
    try:
        for index in range(args.captures):
            t0 = time.time()
            response = client.post(f"/api/runs/{run.pk}/capture/", {"duration": args.duration},
                                   content_type="application/json")  # fmt: skip
            group_id = response.json()["id"]
            body = client.get(f"/api/groups/{group_id}/").json()
            while body["status"] in ("queued", "running") and time.time() - t0 < 120:
                time.sleep(0.2)
                body = client.get(f"/api/groups/{group_id}/").json()
            group = CaptureGroup.objects.get(pk=group_id)
            ahead = (group.start_by - group.created_at).total_seconds()
            leads = sorted(
                (c.progress or {}).get("lead_s") for c in group.captures.all()
            )  # fmt: skip
            skews.append(body["start_skew_s"])
            row = {"capture": index + 1, "status": body["status"], "skew_s": body["start_skew_s"],
                   "instant_ahead_s": round(ahead, 2), "rank_leads_s": leads,
                   "final_s": round(time.time() - t0, 1)}  # fmt: skip
            print(json.dumps(row) if args.json else row, flush=True)
    finally:
        worker.stop()
    done = [s for s in skews if s is not None]
    if done:
        print(f"skew over {len(done)} captures: max {max(done):.3f} s, "
              f"median {sorted(done)[len(done) // 2]:.3f} s (target <= 0.3 s)")  # fmt: skip


if __name__ == "__main__":
    main()
