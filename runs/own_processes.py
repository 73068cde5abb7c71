"""Which processes on this machine are flamedeck's own: the one place that knows.

A capture on the local host attaches py-spy to a process of this machine, and a
blocking capture pauses every thread of its target up to 2,000 times a second (the
web server then answered in 30-135 ms instead of 6). So the server's own processes
are for host admins only (runs.permissions.own_process_refusal). They are found from
/proc, so whoever started them (`manage.py serve`, gunicorn under systemd, a worker
by hand) and whatever their pids now:

- flamedeck's processes: this process; any process whose command line is one of this
  checkout's entry points (`manage.py …`, `celery -A config …`, a WSGI/ASGI server
  serving `config.wsgi`/`config.asgi`) and that runs from this checkout (its working
  directory, or the manage.py it names, is BASE_DIR; when its working directory cannot
  be read, another user's process without root, the command line alone decides);
  and every process under one of them (pool processes, gunicorn's workers);
- the database and broker it uses (DATABASES, CELERY_BROKER_URL,
  CELERY_RESULT_BACKEND, CACHES), when they are on this machine: the processes that
  listen on their port (/proc/net/tcp*, or PostgreSQL's unix socket), matched by their
  sockets; when another user's sockets cannot be read, by their program name
  (postgres, redis-server, ...); and every process under them (PostgreSQL's backends).

A process started by flamedeck itself is flamedeck's; a training job a user started
beside it is not. Only the local host's processes are checked: an SSH host that is
this machine under another name is not recognised (host admins configure hosts).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

PROC = Path("/proc")
MAX_DEPTH = 64  # ancestors looked at, at most (a loop in a crafted /proc ends here)
LOCAL_NAMES = {"", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}  # noqa: S104 — names
PG_SOCKET_DIRS = ("/var/run/postgresql", "/run/postgresql", "/tmp")  # noqa: S108 — read
WSGI_SERVERS = {"gunicorn", "uvicorn", "daphne", "hypercorn", "uwsgi", "waitress-serve"}


@dataclass(frozen=True)
class Service:
    """A server flamedeck talks to: what it is, its port, the programs that run it."""

    label: str
    port: int
    programs: frozenset[str]
    socket_dirs: tuple[str, ...] = ()
    """Folders of PostgreSQL's unix socket, when it may be reached through one."""


_PROGRAMS = {
    "postgres": ("PostgreSQL, flamedeck's database", 5432, {"postgres", "postmaster"}),
    "mysql": ("MySQL, flamedeck's database", 3306, {"mysqld", "mariadbd"}),
    "redis": ("Redis, flamedeck's broker", 6379, {"redis-server", "valkey-server"}),
    "amqp": ("RabbitMQ, flamedeck's broker", 5672, {"beam.smp", "rabbitmq-server"}),
}


def own_process(pid: int) -> str | None:
    """What `pid` is among flamedeck's own processes on this machine, in words that
    name no command line (those are for host admins: docs/security.md), e.g.
    "flamedeck's web server (manage.py runserver, pid 812)"; or None."""
    services = configured_services()
    listening = _listening_inodes(services)
    for depth, process in enumerate(_lineage(pid)):
        what = _flamedeck_role(process) or _service_role(process, services, listening)
        if what:
            return what if depth == 0 else f"under {what}"
    return f"this flamedeck process (pid {pid})" if pid == os.getpid() else None


def configured_services() -> list[Service]:
    """The database, broker, result backend and cache servers settings name, when
    they run on this machine (a local host name or address)."""
    found = []
    database = settings.DATABASES.get("default", {})
    engine = database.get("ENGINE", "")
    kind = "postgres" if "postgres" in engine else "mysql" if "mysql" in engine else None
    if kind:
        found.append(_service(kind, str(database.get("HOST") or ""), database.get("PORT")))
    for name in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        found += _url_service(str(getattr(settings, name, "") or ""))
    for cache in getattr(settings, "CACHES", {}).values():
        locations = cache.get("LOCATION", "")
        for location in [locations] if isinstance(locations, str) else locations:
            found += _url_service(str(location))
    return [s for s in found if s is not None]


def _url_service(url: str) -> list[Service | None]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return []
    scheme = parts.scheme.split("+")[0]
    kind = {"rediss": "redis", "valkey": "redis", "pyamqp": "amqp", "amqps": "amqp"}.get(
        scheme, scheme
    )
    if kind not in _PROGRAMS:
        return []
    return [_service(kind, parts.hostname or "", port)]


def _service(kind: str, host: str, port: object) -> Service | None:
    label, default_port, programs = _PROGRAMS[kind]
    if host.startswith("/"):
        dirs: tuple[str, ...] = (host.rstrip("/"),)
    elif not _is_local(host):
        return None
    else:  # libpq's default with no host: the unix socket in its usual folders
        dirs = PG_SOCKET_DIRS if kind == "postgres" and not host else ()
    number = int(port) if str(port or "").isdigit() else default_port
    return Service(label, number, frozenset(programs), dirs)


def _is_local(host: str) -> bool:
    if host.lower() in LOCAL_NAMES or host.startswith("127."):
        return True
    if host.lower() in {socket.gethostname().lower(), socket.getfqdn().lower()}:
        return True
    try:  # an address of one of this machine's interfaces can be bound to
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
        return True
    except OSError:
        return False


# --- /proc ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Process:
    pid: int
    argv: tuple[str, ...]
    program: str


def _lineage(pid: int):
    """`pid`'s process, then its parent's, up to (not including) pid 1."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen and len(seen) < MAX_DEPTH:
        seen.add(pid)
        try:
            stat = (PROC / str(pid) / "stat").read_text()
            argv = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            return
        name, _, rest = stat.rpartition(")")
        yield _Process(pid, _split_argv(argv), name.partition("(")[2])
        fields = rest.split()
        pid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0


def _split_argv(raw: bytes) -> tuple[str, ...]:
    return tuple(a for a in raw.decode("utf-8", "replace").split("\0") if a)


def _flamedeck_role(process: _Process) -> str | None:
    argv = process.argv
    names = [os.path.basename(a) for a in argv]
    if "manage.py" in names:
        at = names.index("manage.py")
        manage, command = argv[at], (argv[at + 1 : at + 2] or ("",))[0]
        if not _ours(process, manage):
            return None
        role = "web server" if command in ("runserver", "serve") else "process"
        return f"flamedeck's {role} (manage.py {command[:20]}, pid {process.pid})"
    if _is_celery(argv, names) and _ours(process):
        role = "beat" if "beat" in argv else "worker" if "worker" in argv else "Celery process"
        return f"flamedeck's {role} (celery, pid {process.pid})"
    served = any(a.startswith(("config.wsgi", "config.asgi")) for a in argv)
    server = sorted(WSGI_SERVERS & {*names, process.program})
    if served and server and _ours(process):
        return f"flamedeck's web server ({server[0]}, pid {process.pid})"
    return None


def _is_celery(argv: tuple[str, ...], names: list[str]) -> bool:
    if "celery" not in names and not any(
        a == "-m" and b == "celery" for a, b in zip(argv, argv[1:], strict=False)
    ):
        return False
    apps = [b for a, b in zip(argv, argv[1:], strict=False) if a in ("-A", "--app")]
    apps += [a.split("=", 1)[1] for a in argv if a.startswith("--app=")]
    apps += [a[2:] for a in argv if a.startswith("-A") and len(a) > 2]
    return any(app == "config" or app.startswith(("config.", "config:")) for app in apps)


def _ours(process: _Process, manage: str = "") -> bool:
    """The process runs from this checkout (the module doc says how that is told)."""
    base = Path(settings.BASE_DIR).resolve()
    try:
        cwd = Path(os.readlink(PROC / str(process.pid) / "cwd"))
    except OSError:
        return True  # cannot tell: the command line alone decides
    if manage:
        return (cwd / manage).resolve() == base / "manage.py"
    return cwd.resolve() == base


def _service_role(
    process: _Process, services: list[Service], listening: dict[int, Service]
) -> str | None:
    if not services:
        return None
    try:
        links = [os.readlink(fd) for fd in (PROC / str(process.pid) / "fd").iterdir()]
    except OSError:  # another user's process: by its program
        links = None
    if links is not None:
        for link in links:
            inode = link[8:-1] if link.startswith("socket:[") else ""
            service = listening.get(int(inode)) if inode.isdigit() else None
            if service is not None:
                return f"{service.label} (port {service.port}, pid {process.pid})"
        return None
    for service in services:
        if process.program in service.programs:
            return f"{service.label} ({process.program}, pid {process.pid})"
    return None


def _listening_inodes(services: list[Service]) -> dict[int, Service]:
    """Socket inodes of this machine's listeners on the services' ports."""
    by_port = {s.port: s for s in services}
    found: dict[int, Service] = {}
    for table in ("tcp", "tcp6"):
        for fields in _rows(PROC / "net" / table):
            if len(fields) > 9 and fields[3] == "0A":  # LISTEN
                port = int(fields[1].rpartition(":")[2], 16)
                if port in by_port and fields[9].isdigit():
                    found[int(fields[9])] = by_port[port]
    for fields in _rows(PROC / "net" / "unix"):
        path = fields[7] if len(fields) > 7 else ""
        for service in services:
            sockets = {f"{folder}/.s.PGSQL.{service.port}" for folder in service.socket_dirs}
            if path in sockets and fields[6].isdigit():
                found[int(fields[6])] = service
    return found


def _rows(path: Path) -> list[list[str]]:
    try:
        return [line.split() for line in path.read_text().splitlines()[1:]]
    except OSError:
        return []
