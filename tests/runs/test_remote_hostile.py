"""Hostile values in every Target field and setting reach no shell as code.

Each value tries to create a canary file. The built commands are run for real:
locally as an argv, through `sh -c` exactly as a remote login shell parses the ssh
command string, and over the loopback sshd. A ValueError (refused before anything
runs) is as good as a harmless run; a created canary is the only failure.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from runs.remote import (
    READY,
    RecordSettings,
    RemoteError,
    Target,
    check_script,
    record,
    record_script,
    run,
    ssh_argv,
    wrap,
)
from runs.remote.model import PID_MAX

HOSTILE = [
    "; touch {c}",
    "$(touch {c})",
    "`touch {c}`",
    "\ntouch {c}\n",
    "' ; touch {c} ; '",
    '" ; touch {c} ; "',
    "&& touch {c} #",
    "x'$(touch {c})'y",
    "\\'; touch {c}; echo \\'",
]


@pytest.fixture(params=range(len(HOSTILE)), ids=lambda i: f"hostile{i}")
def hostile(request, tmp_path) -> tuple[str, Path]:
    canary = tmp_path / "canary"
    return HOSTILE[request.param].format(c=canary), canary


def run_check(target: Target, how: str) -> str:
    """Run the check script the way `how` says; return its stderr ("" if refused)."""
    try:
        argv = wrap(target, ["sh", "-c", check_script(target)])
    except ValueError:
        return ""
    if how == "sh":  # what the remote login shell does with ssh's command string
        ssh_target = replace(target, transport="ssh", address="h")
        argv = ["sh", "-c", wrap(ssh_target, ["sh", "-c", check_script(target)])[-1]]
    try:
        return run(argv, stdin_open=False, timeout_s=20).stderr
    except FileNotFoundError:  # a local prefix word that is no program: nothing ran
        return ""


HOW = ["local", "sh", pytest.param("ssh", marks=pytest.mark.sshd)]


def target_for(how: str, request) -> Target:
    return request.getfixturevalue("ssh_target" if how == "ssh" else "local_target")


@pytest.mark.parametrize("how", HOW)
def test_a_hostile_exec_prefix_runs_no_code(hostile, how, request):
    value, canary = hostile
    run_check(replace(target_for(how, request), exec_prefix=value), how)
    assert not canary.exists()


@pytest.mark.parametrize("how", HOW)
def test_a_hostile_value_quoted_inside_the_exec_prefix_travels_as_plain_data(hostile, how, request):
    value, canary = hostile
    prefix = f"env 'FLAMEDECK_WRAPPED={value.replace(chr(39), '')}'"
    stderr = run_check(replace(target_for(how, request), exec_prefix=prefix), how)
    assert READY in stderr, "the wrapped script did not run"
    assert not canary.exists()


@pytest.mark.parametrize("how", HOW)
def test_a_hostile_pyspy_path_runs_no_code(hostile, how, request):
    value, canary = hostile
    stderr = run_check(replace(target_for(how, request), py_spy=value), how)
    assert READY in stderr
    assert not canary.exists()


@pytest.mark.parametrize("transport", ["local", pytest.param("ssh", marks=pytest.mark.sshd)])
def test_a_hostile_pyspy_path_fails_a_record_as_pyspy_missing(hostile, transport, request):
    value, canary = hostile
    target = replace(request.getfixturevalue(f"{transport}_target"), py_spy=value)
    with pytest.raises(RemoteError) as caught:
        record(target, 1, RecordSettings(duration_s=1, rate=50))
    assert caught.value.cause == "pyspy_missing"
    assert not canary.exists()


@pytest.mark.parametrize("field", ["address", "username"])
def test_a_hostile_address_or_username_is_refused_before_anything_runs(hostile, field):
    value, canary = hostile
    target = replace(Target("ssh", "host"), **{field: value})
    with pytest.raises(ValueError):
        ssh_argv(target)
    with pytest.raises(ValueError):
        wrap(target, ["true"])
    assert not canary.exists()


@pytest.mark.sshd
@pytest.mark.parametrize("field", ["ssh_config", "known_hosts"])
def test_a_hostile_ssh_file_path_runs_no_code(hostile, field, ssh_target, tmp_path):
    value, canary = hostile
    target = replace(ssh_target, **{field: str(tmp_path / value)})
    try:
        done = run(wrap(target, ["sh", "-c", check_script(target)]), stdin_open=False, timeout_s=20)
    except ValueError:
        return
    assert done.returncode == 255
    assert not canary.exists()


@pytest.mark.parametrize(
    "field", ["format", "rate", "duration_s", "native", "threads", "idle", "gil", "nonblocking"]
)
def test_hostile_record_settings_are_refused(hostile, field):
    value, canary = hostile
    settings = replace(RecordSettings(), **{field: value})
    with pytest.raises(ValueError):
        record_script(Target("local"), 1, settings)
    assert not canary.exists()


def test_hostile_settings_never_reach_a_shell_even_as_numbers(tmp_path):
    # The only free-form numbers are written by Python; sh -n proves the script parses.
    script = record_script(Target("local"), PID_MAX, RecordSettings(duration_s=1e6, rate=10**6))
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0


@pytest.mark.parametrize("pid", [0, -1, PID_MAX + 1, 2**31 - 1, 2**63, True, "5"])
def test_a_pid_outside_linux_pid_range_is_refused_before_anything_runs(pid):
    # py-spy panics on PIDs past pid_max; nothing of the kind reaches a host.
    with pytest.raises(ValueError):
        record_script(Target("local"), pid, RecordSettings(duration_s=1, rate=10))


def test_the_canary_would_catch_a_value_that_reached_a_shell_unquoted(tmp_path):
    canary = tmp_path / "canary"
    subprocess.run(["sh", "-c", "echo " + HOSTILE[0].format(c=canary)], capture_output=True)
    assert canary.exists(), "the hostile values above would not have shown an injection"
