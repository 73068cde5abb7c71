"""The pure half of the seam: argv and script builders, and the error classifier."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from runs.remote import (
    READY,
    RecordSettings,
    Target,
    classify,
    dump_argv,
    parse_ps,
    record_flags,
    record_script,
    ssh_argv,
    wrap,
)

SSH = Target(transport="ssh", address="gpu-node-3")
PYSPY_PERMISSION = (
    "Error: Permission Denied: Try running again with elevated permissions by going "
    "'sudo env \"PATH=$PATH\" !!'"
)
PYSPY_DOCKER = (
    "Permission Denied\nIt looks like you are running in a docker container. Please make sure "
    "you started your container with the SYS_PTRACE capability."
)
PYSPY_NO_PID = (
    "Error: Failed to get process executable name. Check that the process is running.\n\n"
    "Caused by:\n    0: No such file or directory (os error 2)\n"
)


def started(text: str) -> str:
    """stderr as the host scripts produce it: their start line, then `text`."""
    return f"{READY}\n{text}"


def test_ssh_argv_refuses_unknown_or_changed_host_keys_whatever_the_config_says():
    argv = ssh_argv(SSH)
    assert argv[:2] == ["ssh", "-T"]
    for option in ("BatchMode=yes", "StrictHostKeyChecking=yes", "ConnectTimeout=10"):
        assert argv[argv.index(option) - 1] == "-o"
    assert "ServerAliveInterval=5" in argv and "ServerAliveCountMax=3" in argv


def test_ssh_argv_ends_with_a_double_dash_and_the_destination():
    assert ssh_argv(SSH)[-2:] == ["--", "gpu-node-3"]


def test_ssh_argv_leaves_port_user_and_files_to_ssh_config_unless_set():
    argv = ssh_argv(SSH)
    assert not {"-p", "-l", "-F"} & set(argv)
    assert not any(word.startswith("UserKnownHostsFile") for word in argv)


def test_ssh_argv_passes_port_user_config_and_known_hosts_when_set():
    target = Target(
        "ssh", "10.0.0.7", port=2222, username="train", ssh_config="/etc/fd/ssh config",
        known_hosts="/etc/fd/known hosts", connect_timeout_s=3,
    )  # fmt: skip
    argv = ssh_argv(target)
    assert argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("-l") + 1] == "train"
    assert argv[argv.index("-F") + 1] == "/etc/fd/ssh config"
    assert 'UserKnownHostsFile="/etc/fd/known hosts"' in argv
    assert "ConnectTimeout=3" in argv


@pytest.mark.parametrize(
    "value", ["-oProxyCommand=touch x", "host name", "host\nname", "a;b", "$(x)", "`x`", "", "a'b"]
)
def test_ssh_argv_refuses_an_address_that_could_be_an_option_or_code(value):
    with pytest.raises(ValueError):
        ssh_argv(Target("ssh", value))


@pytest.mark.parametrize(
    "value", ["-oProxyCommand=x", "root user", "root\t", "r;x", "$(id)", "\x7f"]
)
def test_ssh_argv_refuses_a_username_that_could_be_an_option_or_code(value):
    with pytest.raises(ValueError):
        ssh_argv(Target("ssh", "host", username=value))


@pytest.mark.parametrize("field", ["ssh_config", "known_hosts"])
@pytest.mark.parametrize("value", ['/tmp/a"b', "/tmp/a\nProxyCommand touch x", "/tmp/\x1b"])
def test_ssh_argv_refuses_file_paths_with_quotes_or_control_characters(field, value):
    with pytest.raises(ValueError):
        ssh_argv(Target("ssh", "host", **{field: value}))


@pytest.mark.parametrize("port", [0, 70000, True, -1])
def test_ssh_argv_refuses_a_port_out_of_range(port):
    with pytest.raises(ValueError):
        ssh_argv(Target("ssh", "host", port=port))


def test_wrap_runs_local_commands_as_an_argv_without_a_shell():
    target = Target("local", exec_prefix="docker exec -i 'my trainer'")
    assert wrap(target, ["py-spy", "dump"]) == [
        "docker", "exec", "-i", "my trainer", "py-spy", "dump",
    ]  # fmt: skip


def test_wrap_puts_sudo_n_before_the_exec_prefix():
    target = Target("local", exec_prefix="pct exec 200 --", sudo=True)
    assert wrap(target, ["id"]) == ["sudo", "-n", "--", "pct", "exec", "200", "--", "id"]


def test_wrap_sends_one_remote_string_a_shell_splits_back_into_the_same_words():
    target = Target("ssh", "host", exec_prefix="kubectl exec -i pod-0 --", sudo=True)
    argv = ["sh", "-c", "echo 'a b' $HOME; touch x"]
    wrapped = wrap(target, argv)
    assert wrapped[: len(ssh_argv(target))] == ssh_argv(target)
    assert len(wrapped) == len(ssh_argv(target)) + 1
    assert shlex.split(wrapped[-1]) == [
        "sudo",
        "-n",
        "--",
        "kubectl",
        "exec",
        "-i",
        "pod-0",
        "--",
        *argv,
    ]


def test_wrap_refuses_an_unknown_transport_and_an_unbalanced_prefix():
    with pytest.raises(ValueError):
        wrap(Target("telnet", "host"), ["id"])
    with pytest.raises(ValueError):
        wrap(Target("local", exec_prefix="docker exec 'trainer"), ["id"])


@pytest.mark.parametrize("pid", [0, -5, True, False, "123", 12.0, None])
def test_a_pid_must_be_a_positive_int(pid):
    with pytest.raises(ValueError):
        record_script(Target("local"), pid, RecordSettings())
    with pytest.raises(ValueError):
        dump_argv(Target("local"), pid)


def test_record_flags_ask_for_every_enabled_option_and_the_real_duration():
    settings = RecordSettings(
        duration_s=15, rate=250, native=True, idle=True, gil=True, nonblocking=True,
        subprocesses=True, format="speedscope",
    )  # fmt: skip
    flags = record_flags(settings)
    assert flags[flags.index("--rate") + 1] == "250"
    # The real duration, so py-spy's log reports it truthfully to the lag analysis.
    assert flags[flags.index("--duration") + 1] == "15"
    assert flags[flags.index("--format") + 1] == "speedscope"
    for flag in ("--native", "--threads", "--idle", "--gil", "--nonblocking", "--subprocesses"):
        assert flag in flags


def test_record_flags_leave_out_disabled_options():
    flags = record_flags(RecordSettings(duration_s=1, threads=False))
    assert not {"--native", "--threads", "--idle", "--gil", "--nonblocking"} & set(flags)


@pytest.mark.parametrize(
    "changes",
    [
        {"format": "raw; touch x"},
        {"format": "svg"},
        {"rate": "100"},
        {"rate": 0},
        {"rate": 1.5},
        {"duration_s": "2"},
        {"duration_s": 0},
        {"duration_s": True},
        {"native": "yes"},
        {"idle": 1},
    ],
)
def test_record_flags_refuse_settings_of_the_wrong_type_or_value(changes):
    with pytest.raises(ValueError):
        record_flags(RecordSettings(**changes))


def test_record_script_is_valid_posix_sh_with_the_pid_and_quoted_pyspy_path():
    script = record_script(Target("local", py_spy="/opt/py spy/bin/py-spy"), 4242, RecordSettings())
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0
    assert "PYSPY='/opt/py spy/bin/py-spy'" in script
    assert "record --pid 4242 " in script


def test_dump_argv_asks_for_native_and_json_only_when_asked():
    plain = dump_argv(Target("local"), 7, native=False)
    rich = dump_argv(Target("local"), 7, native=True, json=True)
    assert plain[:2] == ["sh", "-c"] and "dump --pid 7\n" in plain[2]
    assert "dump --pid 7 --native --json" in rich[2]


@pytest.mark.parametrize(
    "text",
    [
        PYSPY_PERMISSION,
        PYSPY_DOCKER,
        "Error: Operation not permitted (os error 1)",
        "Error: Failed to get process executable name. Check that the process is running.\n"
        "Caused by:\n    0: Permission denied (os error 13)",
        "Error: Failed to attach to process: ptrace(PTRACE_SEIZE) failed",
    ],
)
def test_classify_maps_pyspy_permission_texts_to_permission_with_the_fix(text):
    error = classify(1, started(text), "")
    assert error.cause == "permission" and not error.transient
    assert "SYS_PTRACE" in error.message and "ptrace_scope" in error.message


def test_classify_maps_a_missing_process_to_no_such_pid():
    assert classify(1, started(PYSPY_NO_PID), "").cause == "no_such_pid"


def test_classify_treats_a_zero_exit_as_success():
    assert classify(0, started("py-spy> 1.5s behind in sampling"), "") is None


@pytest.mark.parametrize(
    ("stderr", "cause"),
    [
        ("ssh: connect to host 10.1.1.1 port 22: Connection refused", "unreachable"),
        ("ssh: connect to host 10.1.1.1 port 22: Connection timed out", "unreachable"),
        ("ssh: connect to host 10.1.1.1 port 22: No route to host", "unreachable"),
        ("ssh: Could not resolve hostname gpu-99: Name or service not known", "unreachable"),
        ("kex_exchange_identification: Connection closed by remote host", "unreachable"),
        ("root@10.1.1.1: Permission denied (publickey).", "auth"),
        (
            "No ED25519 host key is known for [127.0.0.1]:2299 and you have requested strict "
            "checking.\r\nHost key verification failed.",
            "hostkey_unknown",
        ),
        (
            "@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
            "Host key verification failed.",
            "hostkey_changed",
        ),
    ],
)
def test_classify_maps_ssh_failures_to_their_cause(stderr, cause):
    error = classify(255, stderr, "")
    assert error.cause == cause
    assert error.transient is (cause == "unreachable")
    assert error.detail.endswith(stderr.splitlines()[-1].strip())


@pytest.mark.parametrize(
    "stderr",
    [
        "Error response from daemon: No such container: trainer",
        "Error: No such container: trainer",
        'Error from server (NotFound): pods "trainer-0" not found',
        "container '200' not running!",
        "sh: 1: pct: not found",
    ],
)
def test_classify_names_the_exec_prefix_when_the_host_script_never_started(stderr):
    error = classify(1 if "Error" in stderr else 127, stderr, "")
    assert error.cause == "exec_prefix"
    assert "container" in error.message


@pytest.mark.parametrize(
    "stderr",
    [
        "Connection to 127.0.0.1 closed by remote host.",
        "client_loop: send disconnect: Broken pipe",
        "Timeout, server gpu-3 not responding.",
        "Read from remote host gpu-3: Connection reset by peer",
    ],
)
def test_classify_names_a_session_that_died_under_a_running_capture(stderr):
    error = classify(255, started(stderr), "py-spy> Sampling process 100 times a second")
    assert error.cause == "connection_lost" and error.transient
    assert "connection dropped" in error.message
    # The same words before the host script ran mean the host was never reached.
    assert classify(255, stderr, "").cause != "connection_lost"


def test_classify_explains_a_sudo_that_wants_a_password():
    error = classify(1, "sudo: a password is required", "")
    assert error.cause == "permission" and "passwordless sudo" in error.message


def test_classify_names_a_py_spy_that_died_by_a_crash_signal_once_started():
    error = classify(
        139, started("WARN py_spy] Failed to get stack trace from 9: No such process"), ""
    )
    assert error.cause == "pyspy_crashed" and error.signal == "SIGSEGV" and not error.transient
    assert "crashed with SIGSEGV (exit 139)" in error.message and "upgrade py-spy" in error.message
    assert classify(134, started(""), "").signal == "SIGABRT"
    # A stop flamedeck sent (SIGINT, SIGKILL) is no crash; nor is a prefix that never ran.
    assert {classify(code, started(""), "").cause for code in (130, 137)} == {"unknown"}
    assert classify(139, "", "").cause == "exec_prefix"


def test_classify_falls_back_to_unknown_with_the_last_stderr_line():
    error = classify(3, started("something odd\nthe real reason"), "")
    assert error.cause == "unknown" and "the real reason" in error.message
    assert READY not in error.detail


def test_parse_ps_keeps_python_processes_with_threads_and_cpu():
    text = (
        "  101     0 root      0.0   1 /sbin/init\n"
        "  202   303 train   398.5  87 /opt/venv/bin/python3.11 train.py --cfg a b\n"
        "  303   101 train     1.0   4 python -m torch.distributed.run x\n"
        "  404     1 root      0.0   1 ps -eo pid=,user=,pcpu=,nlwp=,args=\n"
    )
    found = parse_ps(text)
    assert [(p.pid, p.ppid, p.user, p.cpu_percent, p.threads) for p in found] == [
        (202, 303, "train", 398.5, 87), (303, 101, "train", 1.0, 4),
    ]  # fmt: skip
    assert found[0].command == "/opt/venv/bin/python3.11 train.py --cfg a b"


def test_host_check_turns_into_a_json_ready_dict():
    from runs.remote import HostCheck, ProcessInfo

    check = HostCheck(ssh_ok=True, processes=[ProcessInfo(1, "root", 0.5, 3, "python x")])
    assert json.loads(json.dumps(check.as_dict()))["processes"][0]["threads"] == 3


def test_a_pyspy_path_under_home_expands_on_the_host_but_nothing_else_does(tmp_path):
    target = Target("local", py_spy="~/bin dir/py-spy $(x)")
    script = record_script(target, 1, RecordSettings())
    assert "PYSPY=\"$HOME\"/'bin dir/py-spy $(x)'" in script
    shown = subprocess.run(
        ["sh", "-c", script.split("if ! command")[0] + 'printf %s "$PYSPY"'],
        capture_output=True, text=True, env={"HOME": str(tmp_path)},
    )  # fmt: skip
    assert shown.stdout == f"{tmp_path}/bin dir/py-spy $(x)"
