"""Whole-job capture benchmark: do all ranks sample the same window, and how fast?

For 8 processes (one host: local), 32 (4 loopback sshd hosts × 8) and 64 (8 × 8):
request a whole-job capture through the API and print the start skew (spread of the
moments each py-spy announced sampling), the wall time from the request until every
capture is final, the workers' peak RSS and the most ssh clients open at once
(one per host is the design). Targets: skew < 1 s, wall < duration + 5 s.

Real parts: PostgreSQL and Redis when they answer on 127.0.0.1 (else SQLite and the
filesystem broker), OpenSSH's sshd on loopback, the app's two workers (threads pool
on the capture queue, prefork on the analysis queue), py-spy on real processes. The
targets are light (idle threads, sampled with --idle) so that 64 of them fit on a
small machine; py-spy does the same work per sample either way.
With `--dump`, a whole-job dump instead ("Dump all ranks": 3 dumps of every rank, 1 s
apart) of a hung job (every rank blocked in `all_reduce_wait` but one, in
`wait_for_lock`: tests/support/hung_ranks.py): the wall time from the request until the
group's verdict is stored, and the verdict. Target: within 10 s for 64 ranks on 8 hosts.
Run: .venv/bin/python bench/bench_group.py [--sizes 8,32,64] [--duration 10] [--embedded]
[--wait] [--dump] (`--embedded`: `make run`'s defaults, SQLite and the filesystem broker;
`--wait`: before each size's capture, print `ready` and wait for a line on stdin, so
that a caller can keep other work off the machine for the window alone).
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from config.env import local_port_answers  # noqa: E402

PER_HOST = 8


def _configure(embedded: bool) -> str | None:
    """Environment for a throwaway database and queue of this run; the database name."""
    import os
    import subprocess
    import tempfile

    os.environ["FLAMEDECK_VAR_DIR"] = tempfile.mkdtemp(prefix="flamedeck-bench-group-")
    os.environ["CELERY_QUEUE"] = f"flamedeck-bench-group-{os.getpid()}"
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    if embedded:  # `make run`'s defaults: SQLite and the filesystem broker
        return None
    if local_port_answers(6379):
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/14"
    if not local_port_answers(5432):
        return None
    name = f"flamedeck_bench_group_{os.getpid()}"
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc"]
    subprocess.run([*psql, f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    return name


def _drop(name: str | None) -> None:
    import subprocess

    if name:
        from django.db import connections

        connections.close_all()
        psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc"]
        subprocess.run([*psql, f"DROP DATABASE IF EXISTS {name}"], check=False)


def _hosts(count: int, workdir: Path) -> tuple[list, list[str], Path | None]:
    """`count` hosts: local for one, else `count` loopback sshd hosts node-0..."""
    from tests.support.sshd import SSHServer, cluster_config

    if count == 1:
        return [], ["local"], None
    servers = [SSHServer().start() for _ in range(count)]
    return servers, [f"node-{i}" for i in range(count)], cluster_config(servers, workdir)


DUMP = {"kind": "dump", "repeat": 3, "interval": 1}


def _measure(client, run_id: int, worker, duration: int, dump: bool = False) -> dict:
    from profiles.jobs import services as jobs
    from profiles.models import CaptureGroup

    t0 = time.monotonic()
    response = client.post(
        f"/api/runs/{run_id}/capture/",
        DUMP if dump else {"duration": duration, "rate": 20, "native": False, "idle": True},
        content_type="application/json",
    )
    group = CaptureGroup.objects.get(pk=response.json()["id"])
    rss = ssh = 0.0

    def waiting() -> bool:
        if dump:
            group.refresh_from_db()
            return group.report_status == "pending"
        return jobs.group_summary(group)["status"] == "running"

    while waiting() and time.monotonic() - t0 < 300:
        rss, ssh = max(rss, worker.rss_mb()), max(ssh, worker.ssh_clients())
        time.sleep(0.1)
    wall = time.monotonic() - t0
    summary = jobs.group_summary(group)
    done = group.captures.filter(status="done").count()
    verdict = (group.stacks or {}).get("verdict") or {"kind": group.report_error or "none"}
    return {**summary, "wall_s": wall, "rss_mb": rss, "ssh": ssh, "done": done,
            "phases": _phases(group), "verdict": verdict}  # fmt: skip


def _phases(group) -> str:
    """Seconds from the request to each phase, earliest..latest over the captures."""
    parts = []
    for label, name in (("claimed", "started_at"), ("sampling", "sampling_started_at"),
                        ("final", "finished_at")):  # fmt: skip
        times = [
            (value - group.created_at).total_seconds()
            for value in group.captures.values_list(name, flat=True)
            if value is not None
        ]
        if times:
            parts.append(f"{label} {min(times):.1f}..{max(times):.1f}")
    return ", ".join(parts)


def _targets(processes: int, dump: bool) -> list:
    """Light workloads to sample; for a dump, a hung job's stand-in ranks (one odd)."""
    from tests.support.hung_ranks import Rank
    from tests.support.workload import start_workload

    if not dump:
        return [start_workload(threads=0) for _ in range(processes)]
    return [Rank("locked" if rank == processes // 2 else "waiter") for rank in range(processes)]


def _one_size(
    client, processes: int, duration: int, workdir: Path, wait: bool, report, dump: bool = False
) -> None:
    """Measure one size and `report` it before the workers, targets and hosts stop (a
    caller waiting for the figures, as the `alone` test does, need not wait for those)."""
    from runs.models import Host, Run, RunProcess
    from tests.support.worker import WorkerProcess

    host_count = max(1, processes // PER_HOST)
    servers, names, config = _hosts(host_count if processes > PER_HOST else 1, workdir)
    py_spy = Host.objects.get(name="local").py_spy
    hosts = [
        Host.objects.get_or_create(
            name=name, defaults={"transport": "ssh", "address": name, "py_spy": py_spy}
        )[0]
        for name in names
    ]
    workloads = _targets(processes, dump)
    run = Run.objects.create(name=f"bench-{processes}-{time.time_ns()}", status="running")
    for rank, workload in enumerate(workloads):
        host = hosts[rank * len(hosts) // processes]
        RunProcess.objects.create(run=run, host=host, pid=workload.pid, role=f"rank-{rank}")
    env = {"FLAMEDECK_SSH_CONFIG": str(config)} if config else {}
    worker = WorkerProcess(workdir / f"worker-{processes}.log", concurrency=64, env=env)
    try:
        if wait:
            print(f"ready: {processes} targets and the workers run", flush=True)
            sys.stdin.readline()
        report(_measure(client, run.pk, worker, duration, dump))
    finally:
        worker.stop()
        for workload in workloads:
            workload.stop()
        for server in servers:
            server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,32,64")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--embedded", action="store_true", help="SQLite + filesystem broker")
    parser.add_argument("--wait", action="store_true", help="measure on a line from stdin")
    parser.add_argument("--dump", action="store_true", help="a whole-job dump of a hung job")
    args = parser.parse_args()
    database = _configure(args.embedded)
    try:
        _bench(args)
    finally:
        _drop(database)


def _bench(args: argparse.Namespace) -> None:
    import os

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from runs.tokens import api_token_create

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="x")  # noqa: S106
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    workdir = Path(os.environ["FLAMEDECK_VAR_DIR"])
    db = "postgresql" if "DATABASE_URL" in os.environ else "sqlite"
    broker = "redis" if "REDIS_URL" in os.environ else "filesystem"
    print(
        f"flamedeck whole-job capture benchmark ({db}, {broker} broker, capture worker "
        f"threads×64 + analysis prefork×2, {args.duration}-s captures at 20 Hz)"
    )
    for processes in (int(size) for size in args.sizes.split(",")):
        hosts = 1 if processes <= PER_HOST else processes // PER_HOST

        def report(r: dict, processes: int = processes, hosts: int = hosts) -> None:
            if args.dump:
                v = r["verdict"]
                print(f"  {processes:>3} ranks on {hosts} host(s), dumped 3 times 1 s apart: "
                      f"verdict {v['kind']} (odd: {', '.join(v.get('odd') or []) or '-'}) "
                      f"{r['wall_s']:.1f} s after the request (target < 10 s), "
                      f"{r['done']}/{processes} done, worker RSS peak {r['rss_mb']:.0f} MB, "
                      f"ssh clients peak {r['ssh']:.0f}\n      {v.get('explanation', '')}",
                      flush=True)  # fmt: skip
                return
            print(
                f"  {processes:>3} processes on {hosts} host(s): {r['done']}/{processes} done, "
                f"start skew {r['start_skew_s']:.3f} s, request to all done {r['wall_s']:.1f} s "
                f"(target < {args.duration + 5} s), worker RSS peak {r['rss_mb']:.0f} MB, "
                f"ssh clients peak {r['ssh']:.0f}\n      (s after the request: {r['phases']})",
                flush=True,
            )

        _one_size(client, processes, args.duration, workdir, args.wait, report, args.dump)


if __name__ == "__main__":
    main()
