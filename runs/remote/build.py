"""Pure builders: argv, host scripts and the error classifier (no I/O).

Every user value is checked or passed through `shlex.quote` / `shlex.join`.
"""

from __future__ import annotations

import math
import re
import shlex
import signal
from dataclasses import asdict, replace

from runs import capture_settings, gpu

from . import guard
from .model import (
    CONTROL_RE,
    END_MARKER,
    MESSAGES,
    PYSPY_MISSING,
    READY,
    Cause,
    RecordSettings,
    RemoteError,
    Target,
    check_address,
    check_path,
    check_pid,
    check_port,
    check_username,
    split_exec_prefix,
)


def ssh_argv(target: Target) -> list[str]:
    """The `ssh ... -- DEST` argv for a target, without the remote command."""
    address = check_address(target.address)
    argv = ["ssh", "-T", "-o", "BatchMode=yes"]
    argv += ["-o", f"ConnectTimeout={int(target.connect_timeout_s)}"]
    argv += ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    # Given on the command line so it wins over a user's config that would accept new keys.
    argv += ["-o", "StrictHostKeyChecking=yes"]
    if target.ssh_config:
        argv += ["-F", check_path("ssh_config", target.ssh_config)]
    if target.known_hosts:
        known = check_path("known_hosts", target.known_hosts)
        argv += ["-o", f'UserKnownHostsFile="{known}"']
    if target.port is not None:
        argv += ["-p", str(check_port(target.port))]
    if target.username:
        argv += ["-l", check_username(target.username)]
    return [*argv, "--", address]


def prefix_words(target: Target) -> list[str]:
    """`sudo -n --` (when asked) and the exec prefix, split like a shell would."""
    sudo = ["sudo", "-n", "--"] if target.sudo else []
    return sudo + split_exec_prefix(target.exec_prefix)


def wrap(target: Target, argv: list[str]) -> list[str]:
    """The local argv that runs `argv` on the target (never through a local shell)."""
    if target.transport == "local":
        return prefix_words(target) + list(argv)
    if target.transport != "ssh":
        raise ValueError(f"unknown transport {target.transport!r}")
    # ssh hands one string to the remote login shell, which parses it exactly once.
    return [*ssh_argv(target), shlex.join(prefix_words(target) + list(argv))]


def check_target(target: Target) -> None:
    """Raise RemoteError("host_config") naming the first stored field the builders
    cannot use (and how to fix it), so a bad host fails at once with that cause
    instead of crashing a task later."""
    try:
        if target.transport == "ssh":
            ssh_argv(target)
        elif target.transport != "local":
            raise ValueError(f"transport {target.transport!r} is not local or ssh")
    except ValueError as exc:
        raise _host_config(str(exc)) from None
    try:
        prefix_words(target)
    except ValueError as exc:
        problem = f"exec prefix {target.exec_prefix!r} cannot be split like a shell would ({exc})"
        raise _host_config(problem) from None
    if not isinstance(target.py_spy, str) or CONTROL_RE.search(target.py_spy):
        raise _host_config(f"py-spy path {target.py_spy!r} may not hold control characters")


def _host_config(problem: str) -> RemoteError:
    message = f"{MESSAGES['host_config']}: {problem}; fix it on the host's Edit page"
    return RemoteError("host_config", message, transient=False)


def _pyspy_assignment(py_spy: str) -> str:
    # A quoted "~/..." would not expand, yet it is how people write per-user installs.
    if py_spy.startswith("~/"):
        return f'PYSPY="$HOME"/{shlex.quote(py_spy[2:])}\n'
    return f"PYSPY={shlex.quote(py_spy)}\n"


def script_head(target: Target) -> str:
    """The start of every script that runs py-spy on the host: READY on stderr, then
    $PYSPY set and found (else PYSPY_MISSING and exit 127)."""
    return (
        f"printf '%s\\n' {READY} >&2\n"
        # A worker's RUST_BACKTRACE would bury py-spy's one-line error under a backtrace.
        "RUST_BACKTRACE=0; export RUST_BACKTRACE\n"
        + _pyspy_assignment(target.py_spy)
        + 'if ! command -v "$PYSPY" >/dev/null 2>&1; then\n'
        f"  printf '%s: %s\\n' {shlex.quote(PYSPY_MISSING)} \"$PYSPY\" >&2\n"
        "  exit 127\nfi\n"
    )


def record_flags(settings: RecordSettings) -> list[str]:
    """py-spy record flags for the settings (validated)."""
    duration, rate = settings.duration_s, settings.rate
    if isinstance(duration, bool) or not isinstance(duration, int | float) or not duration > 0:
        raise ValueError(f"duration_s must be a positive number, not {duration!r}")
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"rate must be a positive int, not {rate!r}")
    if settings.format not in ("raw", "speedscope", "chrometrace"):
        raise ValueError(f"format must be raw, speedscope or chrometrace, not {settings.format!r}")
    # --duration counts samples (duration x rate), not seconds: a lagging sampler runs
    # past it, so flamedeck stops py-spy at the wall-clock duration itself. Passing the
    # real duration keeps py-spy's log truthful for the lag analysis and makes py-spy
    # stop on its own if the connection drops silently.
    flags = ["--rate", str(rate), "--duration", str(math.ceil(duration))]
    flags += ["--format", settings.format]
    flags += capture_settings.switch_flags(asdict(settings))  # --native, --threads, ...
    if not isinstance(settings.gpu, bool):
        raise ValueError(f"gpu must be a bool, not {settings.gpu!r}")
    return flags


_RECORD_BODY = """\
trap '' PIPE
dir=$(mktemp -d "${TMPDIR:-/tmp}/flamedeck.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
exec 3<&0 </dev/null
fd_before @PID@
# The host's clock, once as py-spy starts and once as it ends: the worker notes when the
# first arrives, which gives this host's offset, and places the samples on its clock.
fd_fact @PID@ "clock=$(date +%s.%N 2>/dev/null)"
"$PYSPY" record --pid @PID@ @FLAGS@ $fd_flag_@PID@ -o "$dir/out" 3<&- &
spy=$!
gpu=
if [ @GPU@ = 1 ]; then
  fd_gpu "$dir/gpu.csv" @PID@
  gpu=$fd_gpu_pid
fi
(
  while read -r _ <&3; do :; done
  n=0
  # Repeated: an INT that lands before py-spy installs its handler is ignored.
  while [ "$n" -lt @KILL_AFTER@ ] && kill -INT "$spy"; do sleep 1 3<&-; n=$((n + 1)); done
  [ "$n" -lt @KILL_AFTER@ ] || kill -KILL "$spy"
) >/dev/null 2>&1 &
watch=$!
exec 3<&-
trap 'kill -INT "$spy" 2>/dev/null' HUP TERM
code=
while [ -z "$code" ]; do
  wait "$spy"; rc=$?
  kill -0 "$spy" 2>/dev/null || code=$rc
done
fd_fact @PID@ "ended_at=$(date +%s.%N 2>/dev/null)"
kill "$watch" 2>/dev/null
[ -n "$gpu" ] && kill "$gpu" 2>/dev/null && wait "$gpu" 2>/dev/null
fd_after @PID@
if [ -f "$dir/out" ]; then has=1; else has=0; fi
gpu_bytes=0
[ -s "$dir/gpu.csv" ] && gpu_bytes=$(wc -c <"$dir/gpu.csv" | tr -d ' ')
printf '\\n%s %s %s %s\\n' @MARKER@ "$code" "$has" "$gpu_bytes"
[ "$gpu_bytes" -gt 0 ] && cat "$dir/gpu.csv"
[ "$has" = 1 ] && cat "$dir/out"
exit 0
"""


def record_script(
    target: Target, pid: int, settings: RecordSettings, *, kill_after_s: float = 30
) -> str:
    """POSIX sh that records `pid` and stops py-spy with SIGINT when its stdin closes.

    Output: the facts of `guard` (`--native` kept or dropped, and why) and py-spy's
    stdout (the log) stream first, then the facts of what py-spy left behind, then the line
    `END_MARKER <py-spy exit code> <1 if a raw file exists> <bytes of GPU CSV>`, then
    the GPU report (runs.gpu: the rank's GPUs and nvidia-smi's samples beside py-spy,
    or a line saying the host has no nvidia-smi), then the raw file.
    A closed stdin (cancel, wall-clock stop, a dead worker or a dropped connection)
    sends SIGINT, so py-spy writes its samples; SIGKILL follows `kill_after_s` later.
    """
    body = _RECORD_BODY.replace("@PID@", str(check_pid(pid)))
    # --native is passed by the script, when this py-spy and the target's Python allow it.
    body = body.replace("@FLAGS@", shlex.join(record_flags(replace(settings, native=False))))
    body = body.replace("@KILL_AFTER@", str(max(1, math.ceil(kill_after_s))))
    body = body.replace("@GPU@", "1" if settings.gpu else "0")
    head = script_head(target) + guard.shell(settings.native) + gpu.shell()
    return head + body.replace("@MARKER@", END_MARKER)


def dump_argv(
    target: Target, pid: int, native: bool = True, json: bool = False, locals: bool = False
) -> list[str]:
    """The local argv that runs `py-spy dump` for `pid` on the target."""
    flags = ["--pid", str(check_pid(pid))] + ["--native"] * native + ["--json"] * json
    flags += ["--locals"] * locals
    script = script_head(target) + f'exec "$PYSPY" dump {shlex.join(flags)}\n'
    return wrap(target, ["sh", "-c", script])


def check_script(target: Target) -> str:
    """POSIX sh that prints `key=value` facts about py-spy, the user and ptrace."""
    return (
        f"printf '%s\\n' {READY} >&2\n"
        + _pyspy_assignment(target.py_spy)
        + 'if p=$(command -v "$PYSPY" 2>/dev/null); then\n'
        "  printf 'py_spy_path=%s\\n' \"$p\"\n"
        '  printf \'py_spy_version=%s\\n\' "$("$PYSPY" --version 2>&1 | head -n 1)"\n'
        # Built without native unwinding, py-spy leaves --native out of its help (and
        # refuses it): captures then drop it, with the reason (runs.remote.guard).
        '  case $("$PYSPY" record --help 2>/dev/null) in *--native*) n=1 ;; *) n=0 ;; esac\n'
        "  printf 'py_spy_native=%s\\n' \"$n\"\n"
        "fi\n"
        "printf 'uid=%s\\n' \"$(id -u)\"\n"
        "printf 'ptrace_scope=%s\\n' \"$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null)\"\n"
        "printf 'cap_eff=%s\\n' \"$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)\"\n"
    )


# -ww: without a terminal ps cuts args at the (often 80-column) width it guesses.
PS_ARGV = ["ps", "-ww", "-eo", "pid=,ppid=,user=,pcpu=,nlwp=,args="]
ENV_MARKER = "@@flamedeck-env-3b7d@@"
# Only these variables are read from a process's environment, and only when their
# value is a plain number: nothing else of the environment (tokens, keys) leaves the host.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
_PS_BODY = r"""out=$(@PS@) || exit $?
printf '%s\n' "$out"
printf '%s\n' @MARKER@
printf '%s\n' "$out" | while read -r pid ppid rest; do
  case "$pid" in ''|*[!0-9]*) continue ;; esac
  case "$rest" in *python*|*pypy*|*torchrun*|*accelerate*|*deepspeed*) ;; *) continue ;; esac
  [ -r "/proc/$pid/environ" ] || continue
  tr '\000' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -E '^(@VARS@)=[0-9]{1,7}$' |
    while read -r pair; do printf '%s %s\n' "$pid" "$pair"; done
done
exit 0
"""


def _ps_body() -> str:
    body = _PS_BODY.replace("@PS@", shlex.join(PS_ARGV)).replace("@MARKER@", ENV_MARKER)
    return body.replace("@VARS@", "|".join(RANK_VARIABLES))


def ps_argv(target: Target) -> list[str]:
    """The local argv that lists the target's processes with one `ps`, then (after
    ENV_MARKER) `PID NAME=NUMBER` lines for the RANK_VARIABLES of Python processes
    whose /proc/PID/environ is readable."""
    return wrap(target, ["sh", "-c", f"printf '%s\\n' {READY} >&2\n{_ps_body()}"])


CHECK_END = "@@flamedeck-check-end-8e41@@"  # a line between check_argv's facts and its ps


def check_argv(target: Target) -> list[str]:
    """The local argv of a whole host check in one session (one connection, one bound):
    `check_script`'s facts, a CHECK_END line, then what `ps_argv` prints."""
    script = check_script(target) + f"printf '%s\\n' {CHECK_END}\n" + _ps_body()
    return wrap(target, ["sh", "-c", script])


def alive_argv(target: Target, pids: list[int]) -> list[str]:
    """The local argv that prints `PID STAT` for those of `pids` that exist on the target."""
    listed = ",".join(str(check_pid(pid)) for pid in pids)
    script = f"printf '%s\\n' {READY} >&2\nps -o pid=,stat= -p {listed} || true\n"
    return wrap(target, ["sh", "-c", script])


_SSH_CAUSES: list[tuple[str, Cause]] = [
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "hostkey_changed"),
    (r"No \S+ host key is known|Host key verification failed", "hostkey_unknown"),
    (r"Permission denied \(|Too many authentication failures", "auth"),
    (
        r"Connection refused|Connection timed out|Operation timed out|No route to host|"
        r"Could not resolve hostname|Network is unreachable|Connection reset|"
        r"Connection closed by|kex_exchange_identification",
        "unreachable",
    ),
]
# Checked in order once the command got past ssh. Texts from docker / kubectl / pct
# name a prefix failure even though they may look like an "Error: ..." from py-spy.
_HOST_CAUSES: list[tuple[str, Cause]] = [
    (re.escape(PYSPY_MISSING), "pyspy_missing"),
    (r"No such container|Error from server|not running", "exec_prefix"),
    (r"(?i)permission denied|operation not permitted|ptrace|SYS_PTRACE", "permission"),
    (r"Failed to get process executable name|No such process", "no_such_pid"),
    (r"Unsupported version of Python", "python_unsupported"),
    (r"Failed to find python version", "not_python"),
]
# ssh's words when an established session dies under the running command.
_CONNECTION_LOST = re.compile(
    r"closed by remote host|Broken pipe|Connection reset|Timeout, server \S+ not responding|"
    r"client_loop: send disconnect"
)
_PYSPY_SAID = re.compile(r"^(Error: |py-spy> )", re.M)


def clean_stderr(stderr: str) -> str:
    """stderr without the line the host scripts print when they start."""
    return "".join(line for line in stderr.splitlines(True) if line.strip() != READY)


def stderr_tail(text: str, lines: int = 15) -> str:
    """The last lines of a cleaned stderr, for `RemoteError.detail`."""
    return "\n".join(clean_stderr(text).strip().splitlines()[-lines:])


def _last_line(detail: str) -> str:
    return (detail.splitlines()[-1:] or ["no output"])[0]


# Signals that mean py-spy itself crashed (not a stop flamedeck sent: INT, KILL).
CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
)


def crash_signal(returncode: int) -> str | None:
    """The crash signal's name ("SIGSEGV") for a shell's exit code 128+N, else None."""
    number = returncode - 128
    return next((s.name for s in CRASH_SIGNALS if s.value == number), None)


def classify(returncode: int, stderr: str, log: str) -> RemoteError | None:
    """The cause of a failed command, from its exit code, stderr and py-spy's stdout.

    None when `returncode` is 0. ssh's own failures (exit 255 before the host
    script said it was running) come first, then a session that died under a
    running script (exit 255 after it). A command that failed before the script
    started, with nothing from py-spy, means the exec prefix (or sudo) failed. After
    it started, an exit by a crash signal (128+N) is py-spy's own crash, whatever it
    said before (a child killed mid-sample makes it warn "No such process").
    """
    if returncode == 0:
        return None
    text, detail = f"{stderr}\n{log}", stderr_tail(stderr)
    started = READY in stderr or _PYSPY_SAID.search(text) is not None
    if returncode == 255 and not started:
        for pattern, cause in _SSH_CAUSES:
            if re.search(pattern, stderr):
                return RemoteError(cause, detail=detail)
    if returncode == 255 and started and _CONNECTION_LOST.search(stderr):
        return RemoteError("connection_lost", detail=detail)
    if "sudo:" in text and "password" in text:
        message = "sudo asked for a password: allow passwordless sudo or turn sudo off"
        return RemoteError("permission", message, detail=detail)
    if not started and returncode != 255:
        message = f"{MESSAGES['exec_prefix']} ({_last_line(detail)})"
        return RemoteError("exec_prefix", message, detail=detail)
    if (crashed := crash_signal(returncode)) is not None:
        said = f"crashed with {crashed} (exit {returncode}),"
        message = MESSAGES["pyspy_crashed"].replace("crashed,", said, 1)
        return RemoteError("pyspy_crashed", message, detail=detail, signal=crashed)
    for pattern, cause in _HOST_CAUSES:
        if re.search(pattern, text):
            return RemoteError(cause, detail=detail)
    message = f"command failed with exit {returncode}: {_last_line(detail)}"
    return RemoteError("unknown", message, detail=detail)
