"""What the pipeline hands the engine for thread states: the run's library paths, the
capture's --idle setting and the deployment's FLAMEDECK_STATE_RULES file."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from profiles.captures import enqueue, pipeline, selectors, services
from profiles.models import Capture
from runs import remote
from runs import services as run_services
from runs.models import Host

pytestmark = pytest.mark.django_db

RAW = (
    b"thread (11): trainer;main (train.py:10);step (vendor/lib.py:20);"
    b"cuLaunchKernel (libcuda.so.1) 6\n"
    b"thread (12): loader;main (train.py:30);Queue.get (queue.py:171);"
    b"Condition.wait (threading.py:331);lock_PyThread_acquire_lock (libpython3.11.so.1.0) 6\n"
)
LOG = (
    "py-spy> Sampling process 100 times a second for 5 seconds. Press Control-C to exit.\n"
    "py-spy> Wrote raw flamegraph data to '/tmp/x/out'. Samples: 12 Errors: 0\n"
)


@pytest.fixture
def record(monkeypatch):
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)
    result = remote.RecordResult(
        raw=RAW, log=LOG, stderr="", exit_code=0, stopped_by="duration", elapsed_s=5.1
    )
    monkeypatch.setattr(remote, "record", lambda *args, **kwargs: result)

    def run_capture(library_paths="", **settings):
        run = run_services.run_create(user=None, name="job")
        run.library_paths = library_paths
        run.save()
        capture = services.capture_create(
            user=None, host=Host.objects.get(name="local"), pid=4321, run=run, **settings
        )
        pipeline.capture_execute(capture_id=capture.pk)
        return Capture.objects.get(pk=capture.pk)

    return run_capture


def _state(stats, name):
    return next(s for s in stats["states"] if s["state"] == name)


def _callers(row):
    return [c["frame"] for c in row["user_callers"]]


def test_the_runs_library_paths_move_user_callers_past_vendored_code(record):
    plain = record(duration=5, rate=100)
    assert _callers(_state(plain.stats, "gpu_launch")) == ["step (vendor/lib.py:20)"]
    vendored = record(library_paths="vendor/\n", duration=5, rate=100)
    assert _callers(_state(vendored.stats, "gpu_launch")) == ["main (train.py:10)"]
    assert _callers(_state(vendored.stats, "data_wait")) == ["main (train.py:30)"]


def test_a_record_with_idle_says_waits_are_visible_and_measures_active_share(record):
    capture = record(duration=5, rate=100, idle=True)
    stats = capture.stats
    assert stats["idle_included"] is True and stats["rounds"] == 499  # R*D - 1
    assert {t["name"]: t["active_percent"] for t in stats["threads"]} == {
        "trainer": 1.2,
        "loader": 1.2,
    }
    filtered = selectors.capture_stats(capture=capture, threads=["loader"])
    assert filtered["rounds"] == 499 and _state(filtered, "data_wait")["samples"] == 6


def test_a_record_without_idle_or_with_gil_says_waits_are_not_visible(record):
    assert record(duration=5, rate=100).stats["idle_included"] is False
    assert record(duration=5, rate=100, idle=True, gil=True).stats["idle_included"] is False


def test_the_deployments_state_rules_come_first(record, settings, tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("collective: step in vendor/lib.py\n", encoding="utf-8")
    settings.FLAMEDECK_STATE_RULES = str(rules)
    capture = record(duration=5, rate=100)
    assert _state(capture.stats, "collective")["samples"] == 6  # cuLaunchKernel is a primitive
    assert _state(capture.stats, "gpu_launch")["samples"] == 0


def test_an_unusable_state_rules_file_fails_the_analysis_naming_the_setting(
    record, settings, tmp_path
):
    rules = tmp_path / "rules.txt"
    rules.write_text("waiting: step\n", encoding="utf-8")
    settings.FLAMEDECK_STATE_RULES = str(rules)
    capture = record(duration=5, rate=100)
    assert capture.status == Capture.Status.FAILED
    assert "FLAMEDECK_STATE_RULES" in capture.error and "unknown state 'waiting'" in capture.error
    assert capture.raw_file  # nothing lost: a fixed file and a re-analysis recover it
    settings.FLAMEDECK_STATE_RULES = str(tmp_path / "missing.txt")
    capture = record(duration=5, rate=100)
    assert capture.status == Capture.Status.FAILED and "cannot read it" in capture.error


def test_manage_check_names_an_unusable_state_rules_file(settings, tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("data_wait: Prefetcher.next in loader.py\n", encoding="utf-8")
    settings.FLAMEDECK_STATE_RULES = str(rules)
    call_command("check")
    rules.write_text("stalled: Prefetcher.next\n", encoding="utf-8")
    with pytest.raises(SystemCheckError, match="flamedeck.E001.*unknown state 'stalled'"):
        call_command("check")
