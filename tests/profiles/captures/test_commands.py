"""Shell commands: capture a real process, import a file."""

import pytest
from django.core.management import CommandError, call_command

from profiles.models import Capture

pytestmark = pytest.mark.django_db

DATA = "tests/data/pyspy"


def test_capture_records_a_real_process_here_and_prints_its_shares(running_workload, capsys):
    call_command(
        "capture",
        "--host",
        "local",
        "--pid",
        str(running_workload.pid),
        "--duration",
        "2",
        "--rate",
        "50",
    )
    out = capsys.readouterr().out
    capture = Capture.objects.get()
    assert capture.status == "done" and capture.stats["total_samples"] > 20
    assert f"capture {capture.pk} done: {capture.stats['total_samples']} samples" in out
    assert "sampler:" in out


def test_capture_of_a_dead_pid_fails_with_its_cause():
    with pytest.raises(CommandError, match="no_such_pid"):
        call_command("capture", "--host", "local", "--pid", "999999", "--duration", "1")


def test_capture_queue_leaves_the_work_to_a_worker(monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(
        "profiles.captures.enqueue.capture_enqueue", lambda *, capture: sent.append(capture.pk)
    )
    with django_capture_on_commit_callbacks(execute=True):
        call_command("capture", "--host", "local", "--pid", "4242", "--queue")
    capture = Capture.objects.get()
    assert capture.status == "queued" and sent == [capture.pk]


def test_an_unknown_host_is_refused():
    with pytest.raises(CommandError, match="no host 'nowhere'"):
        call_command("capture", "--host", "nowhere", "--pid", "1")


def test_import_capture_stores_and_analyses_a_file_with_its_log(capsys):
    call_command("import_capture", f"{DATA}/threads.txt", "--log", f"{DATA}/threads.txt.log")
    capture = Capture.objects.get()
    assert capture.status == "done" and capture.stats["lag"] is not None
    assert f"capture {capture.pk} done" in capsys.readouterr().out


def test_import_capture_of_a_missing_file_says_so():
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_capture", "/nonexistent.txt")


@pytest.mark.django_db
@pytest.mark.parametrize("pid", ["0", "٣", "4194305", str(2**63)])
def test_the_capture_command_refuses_pids_outside_linux_range(pid):
    from django.core.management.base import CommandError

    with pytest.raises((CommandError, SystemExit)):
        call_command("capture", "--host", "local", "--pid", pid, "--queue")
    assert not Capture.objects.exists()


@pytest.mark.django_db
def test_the_capture_command_refuses_a_local_host_when_local_hosts_are_off(settings):
    from django.core.management.base import CommandError

    settings.FLAMEDECK_LOCAL_HOST = False
    with pytest.raises(CommandError, match="FLAMEDECK_LOCAL_HOST"):
        call_command("capture", "--host", "local", "--pid", "5", "--queue")
    assert not Capture.objects.exists()
