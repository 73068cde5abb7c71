"""py-spy's failure modes, routed around, end to end: a capture of a real process
through the real sshd on loopback, with the host's py-spy swapped for a stand-in that
shows one failure (tests/support/pyspy_faults.py). Each test says what it injected and
checks what the capture says; `-s` prints both (docs/troubleshooting.md quotes them).
"""

import threading
import time

import pytest
from django.db import connection

from profiles.captures import enqueue, pipeline, services
from profiles.jobs import pipeline as group_pipeline
from profiles.jobs import services as jobs
from profiles.models import Capture
from profiles.storage import files as capture_files
from runs import remote
from runs.models import Host, Run, RunProcess
from runs.services import host_target
from tests.support.procs import alive, wait_until
from tests.support.pyspy_faults import REAL, fault_pyspy
from tests.support.sshd import ALIAS
from tests.support.workload import start_workload

pytestmark = [pytest.mark.sshd, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def ssh_host(sshd, settings, tmp_path):
    """host(kind) -> a host reached over the loopback sshd whose py-spy is `kind`."""
    settings.FLAMEDECK_SSH_CONFIG = str(sshd.config)

    def host(kind: str | None = None) -> Host:
        py_spy = fault_pyspy(tmp_path, kind) if kind else REAL
        return Host.objects.create(name=f"node-{kind}", transport="ssh", address=ALIAS,
                                   py_spy=py_spy)  # fmt: skip

    return host


@pytest.fixture
def target():
    with start_workload(threads=2) as workload:
        yield workload


def _capture(host: Host, pid: int, **settings) -> Capture:
    fields = {"duration": 2, "rate": 50, "native": True, "idle": True, **settings}
    capture = services.capture_create(user=None, host=host, pid=pid, enqueue=False, **fields)
    status = pipeline.capture_execute(capture_id=capture.pk)
    capture.refresh_from_db()
    assert status == capture.status
    return capture


def _frames(capture: Capture) -> set[str]:
    names, stack = set(), [capture_files.read_flamegraph(capture)]
    while stack:
        node = stack.pop()
        names.add(node["name"])
        stack.extend(node.get("children") or [])
    return names


def _report(injected: str, capture: Capture) -> None:
    said = capture.note or f"{capture.error_cause}: {capture.error}"
    print(f"\n[{injected}] -> capture #{capture.pk} {capture.status}: {said}")


def test_the_host_check_knows_py_spys_version_and_whether_it_unwinds_native(ssh_host):
    real = remote.check_host(host_target(ssh_host()))
    assert real.py_spy_version.startswith("py-spy 0.4") and real.py_spy_native is True
    unbuilt = remote.check_host(host_target(ssh_host("unbuilt")))
    assert unbuilt.py_spy_native is False and unbuilt.can_attach


def test_a_py_spy_built_without_native_unwinding_records_python_only_and_says_why(ssh_host, target):
    capture = _capture(ssh_host("unbuilt"), target.pid)
    _report("py-spy built without native unwinding", capture)
    assert capture.status == "done" and capture.stats["total_samples"] > 0
    assert "--native was dropped: this py-spy (0.4" in capture.note
    assert "built without native unwinding" in capture.note
    assert capture.progress["python_only"]["reason"] == "native_unavailable"
    assert capture.progress["pyspy"] == {"version": REAL_VERSION(), "python": PYTHON(),
                                         "native_built": False}  # fmt: skip


def test_a_py_spy_too_old_for_the_targets_python_drops_native_and_says_why(ssh_host, target):
    capture = _capture(ssh_host("old"), target.pid)
    _report("py-spy that says it is 0.3.14", capture)
    assert capture.status == "done" and capture.stats["total_samples"] > 0
    assert (
        f"py-spy 0.3.14 cannot merge native frames of Python {PYTHON()} (py-spy 0.4.0 or later"
        in capture.note
    )


def test_a_native_record_whose_every_sample_fails_is_recorded_again_python_only(
    ssh_host, target, client, owner
):
    capture = _capture(ssh_host("merge_fails"), target.pid)
    _report("--native failing every sample (Failed to merge native and python frames)", capture)
    assert capture.status == "done", capture.error
    failed = capture.progress["python_only"]
    assert failed["reason"] == "native_failed" and failed["samples"] == 0
    assert failed["errors"] >= 0.5 * failed["rounds"]
    assert "Native unwinding failed: py-spy lost" in capture.note
    assert "recorded again without --native: these are Python-only stacks" in capture.note
    assert capture.stats["total_samples"] > 0
    frames = _frames(capture)
    assert any("workload.py" in f for f in frames)
    assert not any("(libc" in f or ".so" in f for f in frames)  # Python-only
    client.force_login(owner)
    page = client.get(capture.get_absolute_url()).content.decode()
    assert 'id="python-only"' in page and "Python-only stacks" in page


def _two_ranks(ssh_host, monkeypatch, kind: str, **settings) -> list[Capture]:
    """A two-rank job on a host whose py-spy is `kind`, recorded as the worker does it
    (one host session) and analysed; its captures."""
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    host = ssh_host(kind)
    run = Run.objects.create(name="job")
    with start_workload(threads=1) as one, start_workload(threads=1) as two:
        for rank, workload in enumerate((one, two)):
            RunProcess.objects.create(run=run, host=host, pid=workload.pid, role=f"rank-{rank}")
        group = jobs.capture_group_create(user=None, run=run, duration=2, rate=50, **settings)
        ids = list(group.captures.values_list("pk", flat=True))
        parsing = group_pipeline.host_captures_execute(
            group_id=group.pk, host_id=host.pk, capture_ids=ids
        )
    assert sorted(parsing) == sorted(ids)
    for capture_id in ids:
        pipeline.capture_analyze_stored(capture_id=capture_id)
    return list(Capture.objects.filter(pk__in=ids))


def test_a_whole_job_rank_whose_native_fails_is_recorded_again_python_only(ssh_host, monkeypatch):
    for capture in _two_ranks(ssh_host, monkeypatch, "merge_fails", native=True):
        _report("whole-job rank, --native failing every sample", capture)
        assert capture.status == "done" and capture.stats["total_samples"] > 0
        assert capture.progress["python_only"]["reason"] == "native_failed"
        assert "right after the job's window" in capture.note


def test_a_whole_job_rank_whose_py_spy_crashes_with_subprocesses_is_recorded_again_without(
    ssh_host, monkeypatch
):
    for capture in _two_ranks(ssh_host, monkeypatch, "crashes_with_subprocesses"):
        _report("whole-job rank, py-spy segfaulting with --subprocesses", capture)
        assert capture.subprocesses and capture.status == "done", capture.error
        assert capture.stats["total_samples"] > 0
        crashed = capture.progress["without_subprocesses"]
        assert crashed["reason"] == "pyspy_crashed" and crashed["signal"] == "SIGSEGV"
        assert "py-spy crashed (SIGSEGV) while sampling the rank's child processes" in (
            capture.note
        )
        assert "again without --subprocesses: its workers are not in this capture" in capture.note
        assert "right after the job's window" in capture.note


def test_a_target_py_spy_leaves_stopped_is_resumed_and_the_capture_says_so(ssh_host, target):
    capture = _capture(ssh_host("stops_target"), target.pid, native=False)
    _report("target left stopped (SIGSTOP) after py-spy", capture)
    assert capture.status == "done"
    assert "py-spy left the process stopped (state T); flamedeck sent it SIGCONT" in capture.note
    assert capture.progress["target_continued"] is True
    state = open(f"/proc/{target.pid}/stat").read().rsplit(")", 1)[1].split()[0]
    assert state != "T" and alive(target.pid)


def test_a_target_gone_gets_the_exit_note_even_when_py_spy_misses_it(ssh_host):
    with start_workload(threads=2) as workload:
        host = ssh_host("misses_exit")
        fields = dict(duration=6, rate=50, native=False, idle=True)
        capture = services.capture_create(
            user=None, host=host, pid=workload.pid, enqueue=False, **fields
        )

        def kill_once_sampling() -> None:
            try:
                sampling = wait_until(
                    lambda: (Capture.objects.get(pk=capture.pk).progress or {}).get("sampling"),
                    60,
                )
                if sampling:
                    time.sleep(1.0)
                    workload.proc.kill()
            finally:
                connection.close()  # this thread's own connection

        killer = threading.Thread(target=kill_once_sampling, daemon=True)
        killer.start()
        pipeline.capture_execute(capture_id=capture.pk)
        killer.join(5)
    capture.refresh_from_db()
    _report("py-spy's exit line hidden, target killed 1 s into sampling", capture)
    assert capture.status == "done" and capture.stats["total_samples"] > 0
    assert "Stopped sampling because process exited" not in capture_files.read_log(capture)
    assert "The process was gone when py-spy stopped, though py-spy did not say it" in (
        capture.note
    )


def test_a_python_py_spy_cannot_read_fails_naming_both_versions(ssh_host, target):
    capture = _capture(ssh_host("python_unsupported"), target.pid)
    _report("py-spy refusing the target's Python (Unsupported version of Python)", capture)
    assert capture.status == "failed" and capture.error_cause == "python_unsupported"
    assert f"the target runs Python {PYTHON()}, py-spy is {REAL_VERSION()}" in capture.error
    assert "upgrade py-spy on the host" in capture.error


def PYTHON() -> str:  # noqa: N802 — read like the constants they stand for
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def REAL_VERSION() -> str:  # noqa: N802
    import subprocess

    return subprocess.run([REAL, "--version"], capture_output=True, text=True).stdout.split()[-1]
