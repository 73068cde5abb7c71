"""The one seam for all SSH and subprocess work (pure standard library, no Django).

- `model`: `Target`, `RecordSettings`, results and `RemoteError` (plain data).
- `build`: pure builders `ssh_argv`, `wrap`, `record_script`, `dump_argv`,
  `check_script` and the error classifier `classify`. No I/O; every user value is
  checked or quoted with `shlex`.
- `runner`: `run()`, the only function that starts a process. It streams stdout
  lines, bounds the wall clock, stops by closing stdin (the record script turns EOF
  into SIGINT for py-spy, which then writes its samples) and kills only after a
  grace period.
- `ops`: `record`, `dump`, `check_host`, `list_processes`, `alive_pids`, built on the two.
- `dumps`: `dump_many`, `py-spy dump --json` of several PIDs of one host, repeated, in
  one session (whole-job dumps), and its script builder `dump_many_script`.
- `many`: `record_many`, several PIDs of one host in one session started by one
  `go` (whole-job captures), and its script builder `record_many_script`.

Tests elsewhere swap the seam by patching the operations on this package
(`runs.remote.record`, ...) or `runs.remote.runner.run` underneath them.

We drive OpenSSH's `ssh` binary rather than a Python SSH library so that Host
aliases, ProxyJump, IdentityFile, the agent and known_hosts behave exactly as in the
user's own shell.
"""

from . import guard
from .build import (
    alive_argv,
    check_script,
    check_target,
    classify,
    dump_argv,
    prefix_words,
    ps_argv,
    record_flags,
    record_script,
    ssh_argv,
    wrap,
)
from .dumps import Dump, PidDumps, dump_many, dump_many_script
from .many import ManyResult, Session, record_many, record_many_script
from .model import (
    CAUSE_LABELS,
    END_MARKER,
    PYSPY_MISSING,
    READY,
    SAMPLING_LINE,
    DumpResult,
    HostCheck,
    ProcessInfo,
    RecordResult,
    RecordSettings,
    RemoteError,
    Target,
)
from .ops import alive_pids, check_host, dump, list_processes, parse_ps, record
from .runner import Completed, run

__all__ = [
    "CAUSE_LABELS",
    "END_MARKER",
    "PYSPY_MISSING",
    "SAMPLING_LINE",
    "READY",
    "Completed",
    "Dump",
    "DumpResult",
    "PidDumps",
    "HostCheck",
    "ManyResult",
    "Session",
    "ProcessInfo",
    "RecordResult",
    "RecordSettings",
    "RemoteError",
    "Target",
    "alive_argv",
    "alive_pids",
    "check_host",
    "check_script",
    "check_target",
    "classify",
    "dump",
    "dump_argv",
    "dump_many",
    "dump_many_script",
    "guard",
    "list_processes",
    "parse_ps",
    "prefix_words",
    "ps_argv",
    "record",
    "record_flags",
    "record_many",
    "record_many_script",
    "record_script",
    "run",
    "ssh_argv",
    "wrap",
]
