"""record, dump and check_host against a real workload, locally and over a real sshd."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace

import pytest

from runs.remote import RecordSettings, Target, check_host, dump, list_processes, record
from tests.support.sshd import ALIAS, SSHServer
from tests.support.workload import pyspy_running

from .conftest import PY_SPY

QUICK = RecordSettings(duration_s=2, rate=100)


def assert_real_capture(result, workload, duration_s: float = 2) -> None:
    raw = result.raw.decode()
    assert "thread (" in raw and "target-0" in raw and "target-1" in raw
    assert "matmul_like (" in raw and "forward (" in raw
    assert "Wrote raw flamegraph data" in result.log
    assert result.exit_code == 0 and result.stopped_by == "duration"
    # py-spy may end by itself after duration x rate samples, a little before the
    # wall-clock stop that flamedeck would send at the duration.
    assert duration_s - 0.5 <= result.elapsed_s < duration_s + 3
    assert not result.process_exited
    assert not pyspy_running(workload.pid)


def test_it_records_a_real_workload_locally(local_target, workload):
    assert_real_capture(record(local_target, workload.pid, QUICK), workload)


@pytest.mark.sshd
def test_it_records_a_real_workload_over_ssh_through_a_config_alias(ssh_target, workload):
    assert_real_capture(record(ssh_target, workload.pid, QUICK), workload)


@pytest.mark.sshd
def test_it_records_over_ssh_with_address_port_user_and_known_hosts(sshd: SSHServer, workload):
    target = Target(
        "ssh", "127.0.0.1", port=sshd.port, username="root", py_spy=PY_SPY,
        ssh_config=str(sshd.config), known_hosts=str(sshd.known_hosts),
    )  # fmt: skip
    assert_real_capture(record(target, workload.pid, QUICK), workload)


@pytest.mark.sshd
def test_it_reaches_a_host_through_a_proxyjump_in_the_users_ssh_config(
    sshd: SSHServer, own_sshd: SSHServer, workload, tmp_path
):
    """`own_sshd` is the jump host; the capture host is only named behind it."""
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts.read_text() + own_sshd.known_hosts.read_text())
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {own_sshd.port}\n"
        f"Host gpu-behind-jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  ProxyJump jump\n"
        f"Host *\n  User root\n  IdentityFile {sshd.client_key}\n"
        f"  IdentityFile {own_sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
    )
    jumped_before = own_sshd.log.read_text().count("Accepted publickey")
    target = Target("ssh", "gpu-behind-jump", py_spy=PY_SPY, ssh_config=str(config))
    assert_real_capture(record(target, workload.pid, QUICK), workload)
    assert own_sshd.log.read_text().count("Accepted publickey") == jumped_before + 1


def test_it_streams_pyspy_log_lines_while_sampling(local_target, workload):
    lines: list[tuple[str, float]] = []
    result = record(local_target, workload.pid, QUICK, on_progress=lambda *a: lines.append(a))
    first = next(at for line, at in lines if line.startswith("py-spy> Sampling process"))
    assert first < 1.5, "the first log line came only at the end"
    assert any("Wrote raw flamegraph data" in line for line, _ in lines)
    assert not any("@@flamedeck" in line or "thread (" in line for line, _ in lines)
    assert result.log.startswith("py-spy> Sampling process")


def test_it_records_a_speedscope_timeline(local_target, workload):
    settings = replace(QUICK, duration_s=1, format="speedscope")
    result = record(local_target, workload.pid, settings)
    profiles = json.loads(result.raw)["profiles"]
    assert any("target-0" in profile["name"] for profile in profiles)


def _write_wrapper(tmp_path):
    """An exec prefix like `pct exec 200 --`, in a path with a space, that logs each use."""
    folder = tmp_path / "exec prefix"
    folder.mkdir()
    wrapper, log = folder / "enter.sh", folder / "invoked.log"
    wrapper.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> \'{log}\'\n[ "$1" = -- ] && shift\n'
        'FLAMEDECK_WRAPPED=1 exec "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, log


def test_it_records_through_an_exec_prefix(local_target, workload, tmp_path):
    wrapper, log = _write_wrapper(tmp_path)
    target = replace(local_target, exec_prefix=f"nice -n 0 '{wrapper}' --")
    result = record(target, workload.pid, replace(QUICK, duration_s=1))
    assert "target-0" in result.raw.decode()
    assert log.read_text().startswith("-- sh -c ")


@pytest.mark.sshd
def test_it_records_over_ssh_through_an_exec_prefix(ssh_target, workload, tmp_path):
    wrapper, log = _write_wrapper(tmp_path)
    target = replace(ssh_target, exec_prefix=f"env FLAMEDECK_PREFIX=1 '{wrapper}' --")
    result = record(target, workload.pid, replace(QUICK, duration_s=1))
    assert "target-0" in result.raw.decode()
    assert log.read_text().count("-- sh -c ") == 1


def test_it_runs_under_sudo_n_when_asked(local_target, workload, tmp_path, monkeypatch):
    # No sudo on this machine: a stand-in on PATH proves the argv it would receive.
    bin_dir, log = tmp_path / "bin", tmp_path / "sudo.log"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(
        f'#!/bin/sh\necho "$1 $2" > \'{log}\'\nshift 2\nexec "$@"\n'
    )  # fmt: skip
    (bin_dir / "sudo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = dump(replace(local_target, sudo=True), workload.pid)
    assert "target-0" in result.text and log.read_text() == "-n --\n"


def test_the_wall_clock_bound_holds_when_pyspys_duration_would_run_long(local_target, workload):
    # py-spy counts 2 x 100 samples, which a lagging --native sampler takes longer than
    # 2 s to collect; flamedeck stops it at 2 s of wall-clock.
    settings = RecordSettings(duration_s=2, rate=100, native=True)
    result = record(local_target, workload.pid, settings, margin_s=5)
    assert "for 2 seconds" in result.log
    assert result.elapsed_s < 2 + 5
    assert "target-0" in result.raw.decode()


def test_a_process_exiting_mid_capture_keeps_its_samples(local_target):
    from tests.support.workload import start_workload

    sampling = threading.Event()

    def on_progress(line: str, elapsed_s: float) -> None:
        if line.startswith("py-spy> Sampling process"):
            sampling.set()

    # --nonblocking: see the fault matrix's exit case (py-spy 0.4.3 and a process
    # killed while it holds the process stopped).
    settings = RecordSettings(duration_s=3, rate=100, native=False, nonblocking=True)
    with start_workload().exit_once_sampled(1.0, sampling) as short:
        result = record(local_target, short.pid, settings, on_progress=on_progress)
    assert result.process_exited
    assert "target-0" in result.raw.decode()
    assert result.elapsed_s < 3


def test_dump_prints_every_threads_stack_locally(local_target, workload):
    result = dump(local_target, workload.pid)
    assert '"target-0"' in result.text and '"waiter"' in result.text
    assert result.stderr == ""


@pytest.mark.sshd
def test_dump_prints_every_threads_stack_over_ssh(ssh_target, workload):
    assert '"target-1"' in dump(ssh_target, workload.pid, native=False).text


@pytest.mark.parametrize("transport", ["local", pytest.param("ssh", marks=pytest.mark.sshd)])
def test_check_host_lists_the_workload_with_its_thread_count(transport, request, workload):
    target = request.getfixturevalue(f"{transport}_target")
    check = check_host(target)
    assert check.ssh_ok and check.can_attach and check.error is None
    assert check.py_spy_path == PY_SPY and check.py_spy_version.startswith("py-spy 0.")
    assert check.uid == os.getuid()
    mine = [p for p in check.processes if p.pid == workload.pid]
    assert len(mine) == 1 and mine[0].threads == workload.threads
    assert "workload.py" in mine[0].command and mine[0].user == "root"


def test_check_host_reports_a_missing_pyspy_with_the_install_hint(local_target):
    check = check_host(replace(local_target, py_spy="/nowhere/py-spy"))
    assert check.ssh_ok and check.py_spy_path is None and not check.can_attach
    assert check.install_hint == "pip install py-spy"


@pytest.mark.sshd
def test_check_host_reports_an_unreachable_host_without_raising(own_sshd):
    own_sshd.stop()
    target = Target("ssh", ALIAS, ssh_config=str(own_sshd.config))
    check = check_host(target)
    assert not check.ssh_ok and check.cause == "unreachable" and check.processes == []


def test_list_processes_finds_the_workload(local_target, workload):
    assert workload.pid in [p.pid for p in list_processes(local_target)]
