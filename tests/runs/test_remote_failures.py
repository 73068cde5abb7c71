"""Every failure cause, produced for real, comes back as a RemoteError naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runs.remote import RecordSettings, RemoteError, Target, check_host, dump, record
from tests.support.sshd import ALIAS, SSHServer
from tests.support.workload import start_workload

from .conftest import PY_SPY

SHORT = RecordSettings(duration_s=1, rate=50)
TRANSPORTS = ["local", pytest.param("ssh", marks=pytest.mark.sshd)]


def failure(call, *args, **kwargs) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        call(*args, **kwargs)
    return caught.value


def own_target(server: SSHServer, **changes) -> Target:
    target = Target("ssh", ALIAS, py_spy=PY_SPY, ssh_config=str(server.config), connect_timeout_s=5)
    return replace(target, **changes)


@pytest.mark.sshd
def test_a_stopped_sshd_is_unreachable_and_worth_retrying(own_sshd):
    own_sshd.stop()
    error = failure(record, own_target(own_sshd), 1, SHORT)
    assert error.cause == "unreachable" and error.transient
    assert "Connection refused" in error.detail


@pytest.mark.sshd
def test_a_key_the_host_does_not_know_is_an_auth_failure(own_sshd, tmp_path):
    from tests.support.sshd import _keygen

    stranger = tmp_path / "stranger_ed25519"
    _keygen(stranger)
    config = own_sshd.write_client_config(tmp_path / "ssh_config", identity=stranger)
    error = failure(dump, own_target(own_sshd, ssh_config=str(config)), 1)
    assert error.cause == "auth" and not error.transient
    assert "authorized_keys" in error.message


@pytest.mark.sshd
def test_a_host_missing_from_known_hosts_is_refused_as_unknown(own_sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    error = failure(dump, own_target(own_sshd, known_hosts=str(empty)), 1)
    assert error.cause == "hostkey_unknown" and "ssh-keyscan" in error.message
    assert empty.read_text() == "", "ssh must not have learned the key"


@pytest.mark.sshd
def test_a_changed_host_key_is_refused_as_changed(own_sshd):
    own_sshd.regenerate_host_key()
    error = failure(record, own_target(own_sshd), 1, SHORT)
    assert error.cause == "hostkey_changed" and "ssh-keygen -R" in error.message


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_missing_pyspy_is_named_with_the_install_command(transport, request, workload):
    target = replace(request.getfixturevalue(f"{transport}_target"), py_spy="/nowhere/py-spy")
    for error in (
        failure(record, target, workload.pid, SHORT),
        failure(dump, target, workload.pid),
    ):
        assert error.cause == "pyspy_missing" and "pip install py-spy" in error.message


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_dead_pid_is_no_such_pid(transport, request):
    target = request.getfixturevalue(f"{transport}_target")
    with start_workload(exit_after=0) as gone:
        gone.wait_exit(10)
    for error in (failure(record, target, gone.pid, SHORT), failure(dump, target, gone.pid)):
        assert error.cause == "no_such_pid" and not error.transient
        assert "Failed to get process executable name" in error.detail


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("prefix", ["no-such-wrapper exec 200 --", "false --"])
def test_a_failing_exec_prefix_is_named(transport, prefix, request, workload):
    target = replace(request.getfixturevalue(f"{transport}_target"), exec_prefix=prefix)
    error = failure(record, target, workload.pid, SHORT)
    assert error.cause == "exec_prefix" and "container" in error.message
    assert check_host(target).cause == "exec_prefix"
