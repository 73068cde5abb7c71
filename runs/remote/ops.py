"""What flamedeck does on a host: record, dump, check, list processes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from . import guard, runner
from .build import (
    CHECK_END,
    ENV_MARKER,
    RANK_VARIABLES,
    alive_argv,
    check_argv,
    check_target,
    classify,
    clean_stderr,
    dump_argv,
    ps_argv,
    record_script,
    stderr_tail,
    wrap,
)
from .model import (
    CHECK_BUDGET_S,
    END_MARKER,
    MESSAGES,
    QUICK_TIMEOUT_S,
    READY,
    SAMPLING_LINE,
    STARTUP_S,
    Cause,
    DumpResult,
    HostCheck,
    ProcessInfo,
    RecordResult,
    RecordSettings,
    RemoteError,
    Target,
)
from .runner import Completed


def execute(target: Target, argv: list[str], **kwargs: Any) -> Completed:
    """Run `argv` (runner.run's bounds in kwargs); a client that cannot start is a
    RemoteError naming what to install or fix."""
    try:
        return runner.run(argv, **kwargs)
    except OSError as exc:
        if target.transport == "ssh":
            raise RemoteError(
                "unknown", f"cannot start ssh ({exc}): install openssh-client"
            ) from exc
        raise RemoteError("exec_prefix", f"{MESSAGES['exec_prefix']} ({exc})") from exc


def _quick(target: Target, argv: list[str]) -> Completed:
    timeout = target.connect_timeout_s + QUICK_TIMEOUT_S
    done = execute(target, argv, stdin_open=False, timeout_s=timeout, grace_s=2)
    if done.stopped == "killed":
        cause: Cause = "unknown" if READY in done.stderr else "unreachable"
        message = f"no answer within {timeout:.0f} s"
        raise RemoteError(cause, message, detail=stderr_tail(done.stderr), transient=True)
    return done


class _RecordWatch:
    """Clock and line filter for one record: the duration counts from py-spy's start."""

    def __init__(
        self,
        duration_s: float,
        should_cancel: Callable[[], bool] | None,
        on_progress: Callable[[str, float], None] | None,
    ) -> None:
        self.duration_s = duration_s
        self.should_cancel = should_cancel
        self.on_progress = on_progress
        self.start = time.monotonic()
        self.sampling_since: float | None = None
        self.clock: dict[str, str] = {}
        self.in_log = True
        self.reason: Literal["duration", "cancel", "bound"] = "duration"

    def on_line(self, line: str, elapsed_s: float) -> None:
        if END_MARKER in line:
            self.in_log = False
        if not self.in_log:
            return
        if (fact := guard.read_fact(line)) is not None:
            if fact[1] == "clock":
                self.clock.update(guard.clock_offset(fact[2]))
            return
        if self.sampling_since is None and line.startswith(SAMPLING_LINE):
            self.sampling_since = elapsed_s
            self.clock.update(guard.host_time("sampling_at", self.clock))
        if self.on_progress is not None:
            self.on_progress(line, elapsed_s)

    def should_stop(self) -> bool:
        if self.should_cancel is not None and self.should_cancel():
            self.reason = "cancel"
            return True
        since = self.sampling_since
        return since is not None and time.monotonic() - self.start - since >= self.duration_s


def _split_record(stdout: bytes) -> tuple[str, int | None, bytes | None, str | None]:
    """Split the record script's output: log, py-spy's exit code, raw, GPU CSV."""
    at = stdout.find(END_MARKER.encode())
    if at < 0:
        return stdout.decode(errors="replace"), None, None, None
    log = stdout[:at].decode(errors="replace").removesuffix("\n")
    head, _, rest = stdout[at:].partition(b"\n")
    words = head.decode(errors="replace").split()
    if len(words) != 4 or not words[1].isdigit() or not words[3].isdigit():
        return log, None, None, None
    gpu_bytes = int(words[3])
    gpu_csv = rest[:gpu_bytes].decode(errors="replace") if gpu_bytes else None
    raw = rest[gpu_bytes:]
    return log, int(words[1]), raw if words[2] == "1" else None, gpu_csv


def record(
    target: Target,
    pid: int,
    settings: RecordSettings,
    *,
    margin_s: float = 30.0,
    on_progress: Callable[[str, float], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> RecordResult:
    """Record `pid` for `settings.duration_s` wall-clock seconds and bring the samples home.

    `on_progress(line, elapsed_s)` gets py-spy's stdout live (lag warnings included).
    The clock starts when py-spy announces sampling; at `duration_s`, or when
    `should_cancel()` turns true, stdin closes and py-spy stops with SIGINT, keeping
    its samples (a cancel before py-spy is ready may leave `raw` None).
    `stopped_by` is "duration" or "cancel" for those, and "bound" when py-spy never
    announced sampling and the outer bound (connect + start-up + duration) stopped it.
    A py-spy still running `margin_s` after the stop is killed and
    RemoteError(cause="bound_exceeded") raised. Other failures raise RemoteError with
    their cause; a process that exits mid-capture is not one (`process_exited`).
    """
    script = record_script(target, pid, settings, kill_after_s=margin_s)
    watch = _RecordWatch(settings.duration_s, should_cancel, on_progress)
    bound = target.connect_timeout_s + STARTUP_S + settings.duration_s
    argv = wrap(target, ["sh", "-c", script])
    done = execute(
        target, argv, stdin_open=True, timeout_s=bound, grace_s=margin_s,
        on_line=watch.on_line, should_stop=watch.should_stop,
    )  # fmt: skip
    if done.stopped == "killed":
        raise RemoteError("bound_exceeded", detail=stderr_tail(done.stderr))
    log, code, raw, gpu_csv = _split_record(done.stdout)
    log, facts = guard.split_facts(log)
    facts = {**facts, **watch.clock}
    exit_code = done.returncode if code is None else code
    error = classify(exit_code, done.stderr, log) if raw is None else None
    # A cancel that lands before py-spy installs its SIGINT handler ends it with no
    # samples (exit 130): that is a cancelled capture, not a failure to explain.
    cancelled_early = watch.reason == "cancel" and code is not None
    if error is not None and not (cancelled_early and error.cause == "unknown"):
        raise guard.with_versions(error, facts)
    stopped_by = "bound" if done.trigger == "timeout" else watch.reason
    # py-spy 0.4.3 can miss the exit of a process killed mid-sample: the script's own
    # look at /proc after py-spy ends says so then.
    exited = "Stopped sampling because process exited" in log or facts.get("target") == "gone"
    return RecordResult(
        raw,
        log,
        clean_stderr(done.stderr),
        exit_code,
        stopped_by,
        done.elapsed_s,
        exited,
        gpu_csv,
        facts,
    )


def dump(target: Target, pid: int, native: bool = True, locals: bool = False) -> DumpResult:
    """Print every thread's current stack with `py-spy dump` (raises RemoteError on failure)."""
    done = _quick(target, dump_argv(target, pid, native=native, locals=locals))
    error = classify(done.returncode, done.stderr, done.text)
    if error is not None:
        raise error
    return DumpResult(done.text, clean_stderr(done.stderr))


def _is_python(command: str) -> bool:
    words = command.split(maxsplit=1)
    name = os.path.basename(words[0]) if words else ""
    return name.startswith(("python", "pypy")) or name in ("torchrun", "accelerate", "deepspeed")


def parse_ps(text: str) -> list[ProcessInfo]:
    """Python processes from `ps_argv`'s output: `ps -eo pid=,ppid=,user=,pcpu=,nlwp=,args=`
    lines, then (after ENV_MARKER) `PID NAME=NUMBER` lines for RANK_VARIABLES."""
    # The marker is a line of its own: the `sh -c` that prints it, and any other
    # listing running on the host at the same time, carry it inside their command line.
    lines = text.splitlines()
    cut = next((i for i, line in enumerate(lines) if line.strip() == ENV_MARKER), len(lines))
    env = _rank_variables(lines[cut + 1 :])
    found = []
    for line in lines[:cut]:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[0].isdigit() and _is_python(parts[5]):
            with contextlib.suppress(ValueError):
                pid, ppid, user, cpu, nlwp, command = parts
                extra = env.get(int(pid), {})
                found.append(ProcessInfo(int(pid), user, float(cpu), int(nlwp), command,
                                         ppid=int(ppid), **extra))  # fmt: skip
    return found


def _rank_variables(lines: list[str]) -> dict[int, dict[str, int]]:
    env: dict[int, dict[str, int]] = {}
    for line in lines:
        pid, _, pair = line.strip().partition(" ")
        name, _, value = pair.partition("=")
        if pid.isdigit() and name in RANK_VARIABLES and value.isdigit():
            env.setdefault(int(pid), {})[name.lower()] = int(value)
    return env


def list_processes(target: Target) -> list[ProcessInfo]:
    """The Python processes running on the target, with parent PIDs and, where the
    environment is readable, RANK/LOCAL_RANK/WORLD_SIZE (raises RemoteError on failure)."""
    done = _quick(target, ps_argv(target))
    error = classify(done.returncode, done.stderr, "")
    if error is not None:
        raise error
    return parse_ps(done.text)


ALIVE_TIMEOUT_S = 5.0


def alive_pids(target: Target, pids: list[int], *, timeout_s: float = ALIVE_TIMEOUT_S) -> set[int]:
    """Which of `pids` still run on the target (zombies count as exited), with one
    `ps` and a short bound: RemoteError when the host cannot be asked in `timeout_s`."""
    if not pids:
        return set()
    quick = replace(target, connect_timeout_s=max(1, min(target.connect_timeout_s, 3)))
    done = execute(quick, alive_argv(quick, pids), stdin_open=False, timeout_s=timeout_s,
                    grace_s=1)  # fmt: skip
    if done.stopped == "killed":
        raise RemoteError("unreachable", f"no answer within {timeout_s:.0f} s", transient=True)
    error = classify(done.returncode, done.stderr, "")
    if error is not None:
        raise error
    alive = set()
    for line in done.text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0].isdigit() and not words[1].startswith("Z"):
            alive.add(int(words[0]))
    return alive & set(pids)


_SSH_LEVEL = ("unreachable", "auth", "hostkey_unknown", "hostkey_changed")
_CAP_SYS_PTRACE = 1 << 19


def _verdict(facts: dict[str, str]) -> tuple[bool, str]:
    if "py_spy_path" not in facts:
        return False, MESSAGES["pyspy_missing"]
    uid, scope = facts.get("uid", ""), facts.get("ptrace_scope", "")
    with contextlib.suppress(ValueError):
        if int(facts.get("cap_eff", "0"), 16) & _CAP_SYS_PTRACE:
            return True, "runs with CAP_SYS_PTRACE: py-spy can attach to any process"
    if scope == "3":
        return False, "kernel.yama.ptrace_scope=3 forbids ptrace for everyone"
    if uid == "0":
        return False, "root without CAP_SYS_PTRACE (a container?): add --cap-add SYS_PTRACE"
    if scope in ("0", ""):
        return True, "not root: py-spy can attach to this user's own processes only"
    return False, f"not root and ptrace_scope={scope}: {MESSAGES['permission']}"


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.strip().isdigit() else None


# What a check leaves for killing what still hangs at its bound and reading the pipes.
_CHECK_KILL_S = 1.0


def _check_run(target: Target, budget_s: float) -> Completed:
    """The check's one session, classified, killed at the budget less _CHECK_KILL_S. ssh
    itself gives up connecting (and waiting for the server's greeting) a second before
    that, so an unreachable host is said in ssh's own words; the bound catches the rest (a
    name server that never answers, a step on the host that hangs)."""
    run_s = max(budget_s - _CHECK_KILL_S, 0.5)
    connect_s = max(1, min(target.connect_timeout_s, int(run_s) - 1))
    quick = replace(target, connect_timeout_s=connect_s)
    done = execute(quick, check_argv(quick), stdin_open=False, timeout_s=run_s, grace_s=0)
    if done.stopped == "killed":
        raise _check_stopped(target, done, budget_s)
    error = classify(done.returncode, done.stderr, "")
    if error is None:
        return done
    shortened = connect_s < target.connect_timeout_s and "timed out" in error.detail
    if error.cause == "unreachable" and shortened:  # a slow link a capture may still cross
        error.message += (f" (a check waits {connect_s} s for ssh to connect, a capture "
                          f"{target.connect_timeout_s} s)")  # fmt: skip
    raise error


# The check script's steps, last first, each found by a line that only comes once the
# steps before it are done: where a check that ran out of time was, and the fix.
_CHECK_STEPS = [
    (f"\n{CHECK_END}", "listing the processes (`ps`, /proc/PID/environ)",
     "a process stuck in the kernel (state D) makes `ps` hang: run `ps -ef` on the host "
     "by hand to find it"),
    ("\nuid=", "reading the uid and ptrace settings (/proc)", "an overloaded host: try again"),
    ("", "asking py-spy its version (`py-spy --version`, `py-spy record --help`)",
     "run that on the host by hand; a py-spy that hangs there needs reinstalling "
     "(`pip install -U py-spy`)"),
]  # fmt: skip


def _check_stopped(target: Target, done: Completed, budget_s: float) -> RemoteError:
    """The step a check was at when its bound ran out, and what to do about it."""
    detail, within = stderr_tail(done.stderr), f"within the {budget_s:g} s a check has"
    if READY not in done.stderr:  # the script never started on the host
        if target.transport == "local":
            message = (f"the exec prefix did not start the check {within}: check that the "
                       "container or pod is running and answers, and the prefix words")  # fmt: skip
            return RemoteError("exec_prefix", message, detail=detail, transient=True)
        prefix = ", then the exec prefix" if target.exec_prefix else ""
        message = (f"no answer from the host {within} (connecting with ssh{prefix}): "
                   f"{MESSAGES['unreachable'].split(': ', 1)[1]}")  # fmt: skip
        return RemoteError("unreachable", message, detail=detail, transient=True)
    said = "\n" + done.text
    step, fix = next((step, fix) for line, step, fix in _CHECK_STEPS if line in said)
    message = f"the host answered, but the check ran out of its {budget_s:g} s while {step}: {fix}"
    return RemoteError("unknown", message, detail=detail, transient=True)


def check_host(target: Target, *, budget_s: float = CHECK_BUDGET_S) -> HostCheck:
    """Can flamedeck profile on this host? SSH, py-spy, uid, ptrace and Python processes,
    in one session answered within `budget_s` whatever the host does.

    Failures come back inside the HostCheck (`cause`, `error`), never raised; a check
    that ran out of time names the step it was at.
    """
    try:
        check_target(target)
        done = _check_run(target, budget_s)
    except RemoteError as exc:
        # Nothing past the failing step was looked at: py-spy and ptrace stay unknown
        # (None), and the reason is said once, in `error`.
        ok = exc.cause != "host_config" and (
            target.transport == "local" or exc.cause not in _SSH_LEVEL
        )
        return HostCheck(ssh_ok=ok, cause=exc.cause, error=exc.message, error_detail=exc.detail)
    lines = done.text.splitlines()
    cut = next((i for i, line in enumerate(lines) if line.strip() == CHECK_END), len(lines))
    facts = dict(line.split("=", 1) for line in lines[:cut] if "=" in line)
    processes = parse_ps("\n".join(lines[cut + 1 :]))
    can_attach, reason = _verdict(facts)
    return HostCheck(
        ssh_ok=True,
        py_spy_path=facts.get("py_spy_path"),
        py_spy_version=facts.get("py_spy_version"),
        py_spy_native={"1": True, "0": False}.get(facts.get("py_spy_native", "")),
        install_hint=None if "py_spy_path" in facts else "pip install py-spy",
        uid=_int_or_none(facts.get("uid")),
        ptrace_scope=_int_or_none(facts.get("ptrace_scope")),
        can_attach=can_attach,
        reason=reason,
        processes=processes,
    )
