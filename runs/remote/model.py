"""Data the seam speaks: targets, settings, results and RemoteError (no I/O)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from runs import capture_settings

Transport = Literal["local", "ssh"]
Cause = Literal[
    "unreachable", "auth", "hostkey_unknown", "hostkey_changed", "pyspy_missing",
    "permission", "no_such_pid", "bound_exceeded", "exec_prefix", "connection_lost",
    "host_config", "python_unsupported", "not_python", "pyspy_crashed", "unknown",
]  # fmt: skip

READY = "@@flamedeck-ready@@"  # printed to stderr once the script runs on the host
END_MARKER = "@@flamedeck-end-5f2c9a@@"  # separates py-spy's log from the raw file
PYSPY_MISSING = "flamedeck: py-spy not found on the host"
SAMPLING_LINE = "py-spy> Sampling process"  # py-spy's first line: it samples from now
STARTUP_S = 30.0  # time allowed past connect for py-spy to attach and start sampling
QUICK_TIMEOUT_S = 60.0  # bound for dump / ps, past the connect timeout
# A host check is a button and an API call: its whole answer (ssh, py-spy, ptrace,
# processes; one session) comes within this, whatever the host does (runs.remote.ops).
CHECK_BUDGET_S = 6.0

# Addresses and user names reach ssh's option parser and its %h/%r tokens (which a
# user's ProxyCommand may hand to a shell), so only plain characters pass.
ADDRESS_RE = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]*\Z")
USERNAME_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]*\Z")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Linux's pid_max cannot exceed 2^22 (PID_MAX_LIMIT on 64-bit kernels); py-spy panics
# on larger numbers.
PID_MAX = 4_194_304


# The checks the builders apply to every host field. The Host model runs the same
# functions as field validators, so a host the builder would refuse is never saved.
def check_plain(name: str, value: str, pattern: re.Pattern[str]) -> str:
    """`value` when it matches `pattern` (address, user name), else ValueError."""
    if not isinstance(value, str) or not pattern.match(value):
        raise ValueError(f"{name} {value!r} may hold only letters, digits and . _ - : @")
    return value


def check_address(value: str) -> str:
    return check_plain("address", value, ADDRESS_RE)


def check_username(value: str) -> str:
    return check_plain("username", value, USERNAME_RE)


def check_path(name: str, value: str) -> str:
    """A file path for ssh's options (written inside double quotes there)."""
    if CONTROL_RE.search(value) or '"' in value:
        raise ValueError(f"{name} {value!r} may not contain quotes or control characters")
    return value


def check_py_spy(value: str) -> str:
    """py-spy's path: shell-quoted where used, so only emptiness and control characters
    (which no file name on a sane host holds) are refused."""
    if not value or CONTROL_RE.search(value):
        raise ValueError(f"py-spy path {value!r} must be non-empty, without control characters")
    return value


def split_exec_prefix(value: str) -> list[str]:
    """The exec prefix split like a shell would; ValueError when it cannot be."""
    if "\x00" in value:
        raise ValueError("exec prefix may not contain NUL bytes")
    try:
        return shlex.split(value)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise ValueError(f"exec prefix {value!r} cannot be split into words: {exc}") from None


def check_port(port: object) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port {port!r} is not a TCP port (1-65535)")
    return port


def check_pid(pid: object) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= PID_MAX:
        raise ValueError(f"a PID must be an int in 1..{PID_MAX}, not {pid!r}")
    return pid


@dataclass(frozen=True)
class Target:
    """How to reach the host where py-spy runs."""

    transport: Transport
    """"local" runs on this machine; "ssh" goes through OpenSSH's `ssh` client."""
    address: str = ""
    """Host name, IP address or ~/.ssh/config Host alias (ssh only)."""
    port: int | None = None
    """SSH port; None leaves it to ssh_config (default 22)."""
    username: str = ""
    """Remote user; empty leaves it to ssh_config."""
    exec_prefix: str = ""
    """Shell-like words run before the command, e.g. `docker exec -i trainer`."""
    py_spy: str = "py-spy"
    """py-spy executable on the host (inside the exec prefix): a name on PATH or a path."""
    sudo: bool = False
    """Run everything under `sudo -n` (passwordless sudo required)."""
    ssh_config: str | None = None
    """ssh client config passed as `-F`; None reads the user's ~/.ssh/config."""
    known_hosts: str | None = None
    """known_hosts file; None uses the one ssh_config names (default ~/.ssh/known_hosts)."""
    connect_timeout_s: int = 10
    """Seconds ssh may spend connecting before the host counts as unreachable."""


@dataclass(frozen=True)
class RecordSettings:
    """What `py-spy record` samples and how: one field per record setting of
    runs.capture_settings (where each is explained), plus the output format and GPU
    sampling. A capture passes every value (`of`); the defaults here are the seam's
    own for direct callers (a short Python-only record), not the dashboard's."""

    duration_s: float = 10
    """Wall-clock seconds of sampling; flamedeck enforces it, not py-spy's --duration."""
    rate: int = 100
    native: bool = False
    threads: bool = True
    idle: bool = False
    gil: bool = False
    nonblocking: bool = False
    subprocesses: bool = False
    format: Literal["raw", "speedscope"] = "raw"
    """Output format: collapsed stacks or a speedscope timeline."""
    gpu: bool = True
    """Also sample every GPU with nvidia-smi over the same window, when the host has it."""

    @classmethod
    def of(cls, values: Mapping[str, Any], **changes: Any) -> RecordSettings:
        """The record settings among a capture's `values` (by setting name)."""
        fields = {
            "duration_s" if name == "duration" else name: values[name]
            for name in capture_settings.names("record")
        }
        return cls(**{**fields, **changes})


MESSAGES: dict[str, str] = {
    "unreachable": "cannot reach the host: check the address and port, that sshd runs "
    "and that the network allows it",
    "auth": "the host refused the SSH key: add the worker's public key to the user's "
    "~/.ssh/authorized_keys, or set IdentityFile for the host in ~/.ssh/config",
    "hostkey_unknown": "the host key is not in known_hosts: verify the fingerprint, then "
    "connect once by hand (`ssh HOST`) or add it with `ssh-keyscan HOST >> known_hosts`",
    "hostkey_changed": "the host key changed since it was recorded: verify the host, then "
    "remove the old key with `ssh-keygen -R HOST` and record the new one",
    "pyspy_missing": "py-spy is not installed where flamedeck looked: install it with "
    "`pip install py-spy` on the host or set the host's py-spy path",
    "permission": "py-spy may not attach to the process (ptrace denied): run as root, add "
    "--cap-add SYS_PTRACE to the container, or set kernel.yama.ptrace_scope=0",
    "no_such_pid": "no process with that PID on the host (it exited, or the PID belongs "
    "to another PID namespace): pick a running process",
    "bound_exceeded": "py-spy did not stop within duration + margin after SIGINT and was "
    "killed, so no samples were written: lower the rate or drop --native",
    "exec_prefix": "the exec prefix failed before py-spy could run: check the container "
    "or pod name, that it is running, and the prefix words",
    "connection_lost": "the SSH connection dropped while py-spy ran (the host went down, "
    "sshd was stopped or the network broke), so the samples could not be fetched: check "
    "the host",
    "host_config": "the host's settings cannot be turned into a command",
    "python_unsupported": "this py-spy cannot read the target's Python version: upgrade "
    "py-spy on the host (`pip install -U py-spy`)",
    "not_python": "the process is not a Python interpreter py-spy can read (a launcher, a "
    "shell or a native helper): attach the Python process itself, e.g. the training "
    "script's PID rather than its wrapper's",
    "pyspy_crashed": "py-spy itself crashed, a py-spy bug rather than the target's: upgrade "
    "py-spy on the host (`pip install -U py-spy`); if it sampled with --subprocesses, capture "
    "without it (a whole-job rank is recorded again without it at once)",
    "unknown": "the remote command failed",
}
TRANSIENT_CAUSES = frozenset({"unreachable", "connection_lost"})
# A few words per cause, for one-line states such as "retrying, attempt 2 of 4: ...".
CAUSE_LABELS: dict[str, str] = {
    "unreachable": "host unreachable",
    "connection_lost": "connection lost",
    "auth": "SSH key refused",
    "hostkey_unknown": "unknown host key",
    "hostkey_changed": "host key changed",
    "pyspy_missing": "py-spy not found",
    "permission": "ptrace denied",
    "no_such_pid": "no such process",
    "bound_exceeded": "py-spy did not stop",
    "exec_prefix": "exec prefix failed",
    "host_config": "unusable host settings",
    "python_unsupported": "Python too new for py-spy",
    "not_python": "not a Python process",
    "pyspy_crashed": "py-spy crashed",
    "unknown": "remote command failed",
}


class RemoteError(Exception):
    """A failure reaching the host or running py-spy, with a cause a user can act on."""

    def __init__(
        self,
        cause: Cause,
        message: str = "",
        *,
        detail: str = "",
        transient: bool | None = None,
        signal: str = "",
    ) -> None:
        self.cause = cause
        self.message = message or MESSAGES[cause]
        self.detail = detail
        self.transient = cause in TRANSIENT_CAUSES if transient is None else transient
        self.signal = signal  # pyspy_crashed: the signal py-spy died by, e.g. "SIGSEGV"
        super().__init__(f"{cause}: {self.message}")


@dataclass(frozen=True)
class RecordResult:
    """A finished `py-spy record`: the samples and everything py-spy said."""

    raw: bytes | None
    log: str
    stderr: str
    exit_code: int
    stopped_by: Literal["duration", "cancel", "bound"]
    elapsed_s: float
    process_exited: bool = False
    gpu_csv: str | None = None
    """nvidia-smi's CSV over the capture (see runs.gpu), or None without nvidia-smi."""
    facts: dict[str, str] = field(default_factory=dict)
    """What the script learnt around py-spy (runs.remote.guard): py_spy, python,
    native_built, native_dropped, target (gone | continued)."""


@dataclass(frozen=True)
class DumpResult:
    """The text `py-spy dump` printed, and its stderr."""

    text: str
    stderr: str


@dataclass(frozen=True)
class ProcessInfo:
    """One Python process on the host, as `ps` reports it."""

    pid: int
    user: str
    cpu_percent: float
    threads: int
    command: str
    ppid: int | None = None
    """Parent PID: a launcher (torchrun) is the parent of its ranks."""
    rank: int | None = None
    """RANK from the process environment, when it was readable."""
    local_rank: int | None = None
    """LOCAL_RANK from the process environment, when it was readable."""
    world_size: int | None = None
    """WORLD_SIZE from the process environment, when it was readable."""


@dataclass(frozen=True)
class HostCheck:
    """The answer to "can flamedeck profile on this host?"."""

    ssh_ok: bool
    py_spy_path: str | None = None
    py_spy_version: str | None = None
    py_spy_native: bool | None = None
    """Whether this py-spy was built with native unwinding (`--native`); None unknown."""
    install_hint: str | None = None
    uid: int | None = None
    ptrace_scope: int | None = None
    can_attach: bool = False
    reason: str = ""
    processes: list[ProcessInfo] = field(default_factory=list)
    cause: str | None = None
    error: str | None = None
    error_detail: str = ""
    """The command's own words (ssh's stderr tail) under the friendly `error`."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for a JSONField or an API answer)."""
        return asdict(self)
