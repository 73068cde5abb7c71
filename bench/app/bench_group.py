"""Whole-job capture benchmark: do all ranks sample the same window, and how fast?

Sizes (`--sizes`, default 64,256,1024 ranks): 8 ranks a host, on one host (local) up
to 8 ranks, else on ranks / 8 loopback sshd hosts, each an sshd of its own (1,024 ranks:
128; each takes one connection, under sshd's default MaxStartups 10:30:100). For
each size: ask for a whole-job capture through the API (`POST /api/runs/<id>/capture/`,
`--duration` s at 20 Hz with --idle) and measure
- `skew_s`: the group's `start_skew_s` as `GET /api/groups/<id>/` gives it: the spread
  of the moments each sampler said it samples, read on the hosts' clocks (target < 1 s);
- `true_skew_s`: the spread of each rank's first kept sample (its time track's `start`
  on this machine's clock, through the host's offset); null when a rank has no track;
- `final_s`: from the request until every capture is final (the last `finished_at`;
  target < duration + 5 s);
- `report_s`: from the last capture final until the group's report is stored (or has
  failed: `report_status`), read every 0.15 s;
- `request_s`: how long the capture request itself took (it creates a capture a rank);
- `worker_rss_mb`: the peak summed RSS of the capture worker processes (threads pools,
  one process each), read every 0.15 s; the readable line adds the most ssh clients they
  ran at once (one per host is the design) and when the ranks were claimed, sampled and
  final (seconds after the request, earliest..latest).
With `--dump`, a whole-job dump instead ("Dump all ranks": 3 dumps of every rank, 1 s
apart) of a hung job (every rank blocked in `all_reduce_wait` but one, in
`wait_for_lock`: tests/support/hung_ranks.py): `verdict_s`, from the request until the
group's verdict is stored, and the verdict. Target: within 10 s for 64 ranks on 8 hosts.

Samplers (`--sampler`): `py-spy` samples real Python processes (light ones, idle threads
sampled with --idle, so that 64 fit on a small machine; py-spy does the same work per
sample either way). `stand-in` is bench/support/standin_pyspy: it speaks py-spy's command line
and serves real py-spy recordings, against one `sleep` a rank, since 1,024 py-spy
processes need far more than a 2-core machine (its hosts get `env
FLAMEDECK_STANDIN_...` as their exec prefix: sshd passes no client environment on).
`auto` (the default): py-spy up to 64 ranks, the stand-in above. What the figures are:
- with py-spy, what a user would see, py-spy's attach and CPU included;
- with the stand-in, what flamedeck itself costs at that size (ssh sessions, the
  scheduled start, the capture workers, storing and analysing every rank, the report). `skew_s`
  and `final_s` leave out py-spy's attach (`--attach-s` adds a fixed one) and the CPU
  py-spy would take from the machine; every rank brings the same real recording (a
  training loop's 1,376 samples), so `report_s` analyses a realistic rank each time. A
  dump's ranks are the real dumps of a hung gloo job (tests/data/dumps/own_code).

Real parts: PostgreSQL and Redis when they answer on 127.0.0.1 (else SQLite and the
filesystem broker), OpenSSH's sshd on loopback, the app's workers: `--workers` threads
pools on the capture queue, `--concurrency` threads each (default: enough for every
host at once, at least 64), and a prefork pool on the analysis queue. Every host session
holds a database connection in its worker thread: a PostgreSQL whose max_connections
cannot hold one per host is named on stderr before the run.

Run: .venv/bin/python bench/app/bench_group.py [--sizes 64,256,1024] [--duration 10]
[--sampler auto|py-spy|stand-in] [--workers 1] [--json] [--dump] [--embedded] [--wait]
- `--json`: one JSON object a size on a line of its own, and on stdout nothing else
  than `--wait`'s `ready` lines: {ranks, hosts, sampler, skew_s, final_s, report_s,
  worker_rss_mb, workers, true_skew_s, done, request_s}; with `--dump` {ranks, hosts,
  sampler, verdict, verdict_s, done, request_s};
- `--repeat N`: N captures of each size, one after the other, on the same hosts; the
  last is reported, with `captures` and the first's `first_skew_s` and `first_final_s`
  (`first_verdict_s`): the first capture of hosts never seen starts at a first guess
  of an instant, the next ones at the instant learned from it (profiles.jobs.schedule);
- `--fail-hosts F`: that share of the ssh hosts fails, in turn unreachable (a closed
  port), slow (ssh answers 4 s late, through a ProxyCommand; needs socat) and without
  py-spy; the JSON adds `failing` (kind: hosts) and the group's `failed_hosts`;
- `--embedded`: `make run`'s defaults, SQLite and the filesystem broker;
- `--wait`: before each size's capture, print `ready` and wait for a line on stdin, so
  that a caller can keep other work off the machine for the window alone.
"""

import argparse
import json
import math
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from config.env import local_port_answers  # noqa: E402

PER_HOST = 8
AUTO_PYSPY_MAX = 64  # `--sampler auto`: real py-spy up to this many ranks
STANDIN = ROOT / "bench" / "support" / "standin_pyspy"
ODD_DUMP = ROOT / "tests" / "data" / "dumps" / "own_code" / "rank-2.0.json"  # in wait_for_lock
POLL_S = 0.15
DUMP = {"kind": "dump", "repeat": 3, "interval": 1}


def _configure(embedded: bool) -> str | None:
    """Environment for a throwaway database and queue of this run; the database name."""
    import os
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
    if name:
        from django.db import connections

        connections.close_all()
        psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc"]
        subprocess.run([*psql, f"DROP DATABASE IF EXISTS {name}"], check=False)


def _host_count(processes: int) -> int:
    return 1 if processes <= PER_HOST else processes // PER_HOST


def _sampler(choice: str, processes: int) -> str:
    if choice == "auto":
        return "py-spy" if processes <= AUTO_PYSPY_MAX else "stand-in"
    return choice


def _hosts(count: int, workdir: Path) -> tuple[list, list[str], Path | None]:
    """`count` hosts: local for one, else `count` loopback sshd hosts node-0..."""
    from tests.support.sshd import SSHServer, cluster_config

    if count == 1:
        return [], ["local"], None
    servers = []
    try:
        for _ in range(count):  # one at a time: each listens before the next picks a port
            servers.append(SSHServer().start())
    except BaseException:
        for server in servers:
            server.cleanup()
        raise
    return servers, [f"node-{i}" for i in range(count)], cluster_config(servers, workdir)


class _Sleeper:
    """A live PID for the stand-in sampler, which needs nothing more of a rank: `sleep`,
    copied under an interpreter's name so that the host script's probe of the target's
    Python (runs.remote.guard) reads its version from the name, as for a real rank,
    rather than searching its memory maps for a libpython."""

    def __init__(self, workdir: Path) -> None:
        program = workdir / "python3.11"
        if not program.exists():
            shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
        self.proc = subprocess.Popen([str(program), "3600"])
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _targets(processes: int, dump: bool, sampler: str, workdir: Path) -> list:
    """Light workloads to sample; for a dump, a hung job's stand-in ranks (one odd)."""
    from tests.support.hung_ranks import Rank
    from tests.support.workload import start_workload

    if sampler == "stand-in":
        return [_Sleeper(workdir) for _ in range(processes)]
    if not dump:
        return [start_workload(threads=0) for _ in range(processes)]
    return [Rank("locked" if rank == processes // 2 else "waiter") for rank in range(processes)]


def _host_rows(names: list[str], processes: int, sampler: str, workloads: list, args) -> list:
    """A Host row per host name of this size, with the sampler's path (and, for the
    stand-in, its settings as an `env` exec prefix: the odd rank's dump for --dump)."""
    from runs.models import Host

    words: dict[str, list[str]] = {name: [] for name in names}
    if sampler == "stand-in":
        attach = f"FLAMEDECK_STANDIN_ATTACH_S={args.attach_s:g}"
        for name in names:  # the sleeping targets never exit: no need to check each second
            words[name] += ["FLAMEDECK_STANDIN_POLL_S=0", attach]
        if args.dump:
            odd = processes // 2
            host = names[odd * len(names) // processes]
            words[host].append(f"FLAMEDECK_STANDIN_DUMP_{workloads[odd].pid}={ODD_DUMP}")
    local = names == ["local"]
    return [
        Host.objects.update_or_create(
            name=f"r{processes}-{name}",
            defaults={
                "transport": "local" if local else "ssh",
                "address": "" if local else name,
                "py_spy": str(STANDIN) if sampler == "stand-in" else args.real_py_spy,
                "exec_prefix": shlex.join(["env", *words[name]]) if words[name] else "",
            },
        )[0]
        for name in names
    ]


SLOW_SSH_S = 4.0  # a slow host's ssh answers this late (past the first instant's lead)


def _fail_some(hosts: list, config: Path, share: float) -> dict[str, list[str]]:
    """Make `share` of the ssh hosts fail, in turn: unreachable (its alias points at a
    closed port), slow (its ssh goes through a ProxyCommand that waits SLOW_SSH_S
    first) and without py-spy (a path that does not exist); {kind: host names}."""
    count = round(len(hosts) * share)
    if not count:
        return {}
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    kinds = ("unreachable", "slow", "no_py_spy")
    failing: dict[str, list[str]] = {kind: [] for kind in kinds}
    step = len(hosts) / count
    entries = []
    for index in range(count):
        host = hosts[int(index * step + step / 2)]
        kind = kinds[index % len(kinds)]
        failing[kind].append(host.name)
        if kind == "no_py_spy":
            host.py_spy = "/nonexistent/py-spy"
        else:
            alias = f"{kind}-{host.address}"
            entries.append(_alias(config, host.address, alias, kind, port))
            host.address = alias
        host.save()
    # Host blocks first: ssh takes the first value it reads for each option.
    config.write_text("".join(entries) + config.read_text())
    return failing


def _alias(config: Path, name: str, alias: str, kind: str, closed_port: int) -> str:
    """An ssh_config block for `alias`: `name`'s own settings, made to fail as `kind`."""
    text = config.read_text()
    block = text[text.index(f"Host {name}\n") :].split("\nHost ", 1)[0]
    block = block.replace(f"Host {name}\n", f"Host {alias}\n", 1).rstrip("\n") + "\n"
    if kind == "unreachable":
        return block.replace("  Port ", f"  Port {closed_port}\n  #Port ", 1)
    wait = f"sleep {SLOW_SSH_S:g}; exec socat - TCP:%h:%p"
    return block + f"  ProxyCommand sh -c {shlex.quote(wait)}\n"


def _measure(client, run_id: int, worker, duration: int, dump: bool = False) -> dict:
    from profiles.models import Capture

    client.get(f"/api/runs/{run_id}/")  # a warm-up: a running server has loaded its views
    requested = time.time()
    response = client.post(
        f"/api/runs/{run_id}/capture/",
        DUMP if dump else {"duration": duration, "rate": 20, "native": False, "idle": True},
        content_type="application/json",
    )
    request_s = round(time.time() - requested, 3)
    if response.status_code != 201:
        answer = f"{response.status_code}: {response.content[:500]!r}"
        raise RuntimeError(f"the capture request answered {answer}")
    group_id = response.json()["id"]
    unfinished = Capture.objects.filter(group_id=group_id).exclude(status__in=Capture.FINAL)
    rss = ssh = 0.0
    final_seen = stored_at = None
    next_ssh, deadline = 0.0, time.monotonic() + duration + 600
    while time.monotonic() < deadline:
        rss = max(rss, worker.capture_rss_mb())
        if time.monotonic() >= next_ssh:  # once a second: it reads every thread's children
            ssh, next_ssh = max(ssh, worker.capture_ssh_clients()), time.monotonic() + 1
        if final_seen is None and not unfinished.exists():
            final_seen = time.time()
        if final_seen is not None and _report_status(group_id) != "pending":
            stored_at = time.time()
            break
        time.sleep(POLL_S)
    return {**_figures(client, group_id, requested, stored_at, rss, ssh), "request_s": request_s}


def _report_status(group_id: int) -> str:
    from profiles.models import CaptureGroup

    fields = ("kind", "job_report", "stacks", "report_error")
    return CaptureGroup.objects.only(*fields).get(pk=group_id).report_status


def _figures(client, group_id: int, requested: float, stored_at, rss: float, ssh: float) -> dict:
    """The size's figures from the group's rows, once it ended (or the wait gave up)."""
    from django.db.models import Max

    from profiles.models import CaptureGroup

    group = CaptureGroup.objects.get(pk=group_id)
    last = group.captures.aggregate(last=Max("finished_at"))["last"]
    ended = last is not None and not group.captures.filter(finished_at__isnull=True).exists()
    last_final = last.timestamp() if ended else None
    stored = stored_at is not None and last_final is not None
    body = client.get(f"/api/groups/{group_id}/").json()
    verdict = (group.stacks or {}).get("verdict") or {"kind": group.report_error or "none"}
    return {
        "skew_s": body.get("start_skew_s"),
        "true_skew_s": _true_skew(group),
        "final_s": None if last_final is None else round(last_final - requested, 3),
        "report_s": round(stored_at - last_final, 3) if stored else None,
        "verdict_s": None if stored_at is None else round(stored_at - requested, 3),
        "verdict": verdict,
        "dump_spread_s": _dump_spread(group) if group.kind == "dump" else None,
        "worker_rss_mb": round(rss, 1),
        "ssh": ssh,
        "done": group.captures.filter(status="done").count(),
        "phases": _phases(group),
        "failed_hosts": body.get("failed_hosts"),
    }


def _dump_spread(group) -> float | None:
    """The spread of the ranks' first dumps (host clocks: one machine here)."""
    from django.db.models.fields.json import KT

    firsts = group.captures.annotate(at=KT("stats__dump_series__0__at"))
    times = [float(at) for at in firsts.values_list("at", flat=True) if at is not None]
    return round(max(times) - min(times), 3) if times else None


def _true_skew(group) -> float | None:
    """The spread of the ranks' first kept samples on this machine's clock (each time
    track's `start` plus its host's clock offset); None when a done rank has no track."""
    from profiles.pyspy import ProfileError
    from profiles.pyspy.formats.time_track import load_track

    starts = []
    for capture in group.captures.filter(status="done").only("time_file", "progress"):
        if not capture.time_file:
            return None
        try:
            with capture.time_file.open("rb") as stored:
                track = load_track(stored.read())
        except (OSError, ProfileError):
            return None
        starts.append(track.start + float((capture.progress or {}).get("clock_offset_s") or 0))
    return round(max(starts) - min(starts), 3) if starts else None


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


def _one_size(client, processes: int, workdir: Path, args, report) -> None:
    """Measure one size and `report` it before the workers, targets and hosts stop (a
    caller waiting for the figures, as the `alone` test does, need not wait for those)."""
    from runs.models import Run, RunProcess
    from tests.support.worker import WorkerProcess

    sampler, hosts_wanted = _sampler(args.sampler, processes), _host_count(processes)
    servers, names, config = _hosts(hosts_wanted, workdir)
    workloads = []
    worker = None
    try:
        workloads = _targets(processes, args.dump, sampler, workdir)
        hosts = _host_rows(names, processes, sampler, workloads, args)
        failing = _fail_some(hosts, config, args.fail_hosts) if config else {}
        run = Run.objects.create(name=f"bench-{processes}-{time.time_ns()}", status="running")
        for rank, workload in enumerate(workloads):
            host = hosts[rank * len(hosts) // processes]
            RunProcess.objects.create(run=run, host=host, pid=workload.pid, role=f"rank-{rank}")
        env = {"FLAMEDECK_SSH_CONFIG": str(config)} if config else {}
        threads = args.concurrency or max(64, math.ceil(len(hosts) / args.workers))
        worker = WorkerProcess(workdir / f"worker-{processes}.log", concurrency=threads, env=env,
                               capture_workers=args.workers)  # fmt: skip
        if args.wait:
            print(f"ready: {processes} targets and the workers run", flush=True)
            sys.stdin.readline()
        first = None
        for _ in range(args.repeat):  # the same hosts: the next instant is learned
            figures = _measure(client, run.pk, worker, args.duration, args.dump)
            first = first or figures
        learned = {"first_skew_s": first["skew_s"], "first_final_s": first["final_s"],
                   "first_verdict_s": first["verdict_s"]}  # fmt: skip
        report({**figures, "ranks": processes, "hosts": len(hosts), "sampler": sampler,
                "workers": args.workers, "threads": threads, "failing": failing,
                "captures": args.repeat, **learned})  # fmt: skip
    finally:
        if worker is not None:
            worker.stop()
        for workload in workloads:
            workload.stop()
        for server in servers:
            server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="64,256,1024", help="ranks, comma-separated")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--sampler", choices=("auto", "py-spy", "stand-in"), default="auto")
    parser.add_argument("--workers", type=int, default=1, help="capture worker processes")
    parser.add_argument("--concurrency", type=int, default=0, help="threads per capture worker")
    parser.add_argument("--attach-s", type=float, default=0.0, help="the stand-in's attach")
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument("--embedded", action="store_true", help="SQLite + filesystem broker")
    parser.add_argument("--wait", action="store_true", help="measure on a line from stdin")
    parser.add_argument("--dump", action="store_true", help="a whole-job dump of a hung job")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="captures a size, one after the other, on the same hosts; the last is reported",
    )
    parser.add_argument(
        "--fail-hosts",
        type=float,
        default=0.0,
        help="share of the ssh hosts made to fail (unreachable, slow, no py-spy)",
    )
    args = parser.parse_args()
    args.sizes = [int(size) for size in args.sizes.split(",")]
    if min(args.sizes) < 1 or args.workers < 1 or args.concurrency < 0:
        parser.error("sizes and --workers must be positive")
    _raise_open_files_limit()
    database = _configure(args.embedded)
    try:
        _bench(args)
    finally:
        _drop(database)


def _raise_open_files_limit() -> None:
    """Every child inherits it: the capture worker keeps three pipes per ssh client
    and a database connection per thread, and 128 hosts pass a soft limit of 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 16384:
        wanted = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))


def _warn_connections(sizes: list[int]) -> None:
    """Each host session holds a database connection in its capture worker thread."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        limit = int(cursor.fetchone()[0])
    most = max(_host_count(size) for size in sizes)
    if most + 10 > limit:
        print(f"warning: {most} host sessions at once hold {most} database connections "
              f"(one per capture worker thread) beside the analysis workers and every other "
              f"client; this PostgreSQL allows {limit} in all. Raise max_connections "
              "(ALTER SYSTEM SET max_connections = 300, then restart) or use --embedded.",
              file=sys.stderr, flush=True)  # fmt: skip


def _bench(args: argparse.Namespace) -> None:
    import os

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from runs.models import Host
    from runs.tokens import api_token_create

    call_command("migrate", verbosity=0)
    args.real_py_spy = Host.objects.get(name="local").py_spy
    user = get_user_model().objects.create_superuser("bench", password="x")  # noqa: S106
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    workdir = Path(os.environ["FLAMEDECK_VAR_DIR"])
    db = "postgresql" if "DATABASE_URL" in os.environ else "sqlite"
    broker = "redis" if "REDIS_URL" in os.environ else "filesystem"
    _warn_connections(args.sizes)
    print(
        f"flamedeck whole-job capture benchmark ({db}, {broker} broker, {args.workers} capture "
        f"worker(s) (threads pool) + analysis prefork×2, {args.duration}-s captures at 20 Hz, "
        f"sampler {args.sampler})",
        file=sys.stderr if args.json else sys.stdout,
    )
    for processes in args.sizes:
        _one_size(client, processes, workdir, args, lambda r: _report(r, args))


def _report(r: dict, args: argparse.Namespace) -> None:
    if args.json:
        keys = ("ranks", "hosts", "sampler")
        keys += (("verdict", "verdict_s") if args.dump else ("skew_s", "final_s", "report_s",
                 "worker_rss_mb", "workers", "true_skew_s"))  # fmt: skip
        keys += ("done", "request_s") + (("failing", "failed_hosts") if r["failing"] else ())
        if r["captures"] > 1:
            firsts = ("first_verdict_s",) if args.dump else ("first_skew_s", "first_final_s")
            keys += ("captures", *firsts)
        keys += ("dump_spread_s",) if args.dump else ()
        print(json.dumps({key: r[key] for key in keys}), flush=True)
        return
    head = f"  {r['ranks']:>3} processes on {r['hosts']} host(s)"
    tail = (f"capture workers' RSS peak {r['worker_rss_mb']:.0f} MB ({r['workers']} × "
            f"{r['threads']} threads), ssh clients peak {r['ssh']:.0f}")  # fmt: skip
    if args.dump:
        v = r["verdict"]
        print(f"{head}, dumped 3 times 1 s apart ({r['sampler']}): verdict {v['kind']} (odd: "
              f"{', '.join(v.get('odd') or []) or '-'}) {_s(r['verdict_s'])} after the request "
              f"(target < 10 s), {r['done']}/{r['ranks']} done, {tail}\n"
              f"      {v.get('explanation', '')}", flush=True)  # fmt: skip
        return
    print(f"{head}: {r['done']}/{r['ranks']} done, start skew {_s(r['skew_s'], 3)}, request "
          f"to all done {_s(r['final_s'])} (target < {args.duration + 5} s), report "
          f"{_s(r['report_s'])} later, {tail}\n      ({r['sampler']}; true skew "
          f"{_s(r['true_skew_s'], 3)}; the request took {_s(r['request_s'], 2)}; s after "
          f"it: {r['phases']})",
          flush=True)  # fmt: skip


def _s(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} s"


if __name__ == "__main__":
    main()
