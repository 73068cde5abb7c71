"""The worker-side pipeline with the remote seam swapped: states, storage, failures.

The seam itself (ssh, py-spy) is tested for real in tests/runs/test_remote*.py and
end to end in tests/profiles/captures/test_capture_e2e.py.
"""

import gzip

import pytest

from profiles.captures import enqueue, pipeline, services
from profiles.models import Capture
from profiles.storage import files as capture_files
from runs import remote
from runs.models import Host

pytestmark = pytest.mark.django_db

RAW = (
    b"thread (11): target-0;main (train.py:10);step (train.py:20);cuLaunchKernel (libcuda.so.1) 6\n"
    b"thread (12): target-1;main (train.py:10);cudaStreamSynchronize (libcudart.so) 4\n"
)
LOG = (
    "py-spy> Sampling process 100 times a second for 5 seconds. Press Control-C to exit.\n"
    "py-spy> 1.20s behind in sampling, results may be inaccurate. Try reducing the sampling rate\n"
    "py-spy> Wrote raw flamegraph data to '/tmp/x/out'. Samples: 10 Errors: 0\n"
)


@pytest.fixture
def capture(monkeypatch):
    monkeypatch.setattr(enqueue, "capture_enqueue", lambda *, capture: None)
    return services.capture_create(
        user=None, host=Host.objects.get(name="local"), pid=4321, duration=5, rate=100
    )


def _result(**overrides):
    values = dict(raw=RAW, log=LOG, stderr="", exit_code=0, stopped_by="duration", elapsed_s=5.1)
    values.update(overrides)
    return remote.RecordResult(**values)


def _swap_record(monkeypatch, outcome, lines=()):
    """Swap remote.record for one that says `lines` ((text, elapsed_s)) and ends so."""
    calls = []

    def fake_record(target, pid, settings, **kwargs):
        calls.append((target, pid, settings, kwargs))
        for text, elapsed_s in lines:
            kwargs["on_progress"](text, elapsed_s)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(remote, "record", fake_record)
    return calls


def test_a_record_stores_raw_and_log_gzipped_and_ends_done_with_stats(monkeypatch, capture):
    calls = _swap_record(monkeypatch, _result())
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    capture.refresh_from_db()
    target, pid, settings, _ = calls[0]
    assert (target.transport, pid, settings.rate, settings.duration_s) == ("local", 4321, 100, 5)
    with capture.raw_file.open("rb") as fh:
        assert gzip.decompress(fh.read()) == RAW
    assert capture_files.read_log(capture) == LOG
    assert capture.stats["total_samples"] == 10
    assert capture.stats["lag"]["max_behind_s"] == pytest.approx(1.2)
    assert {t["name"] for t in capture.stats["threads"]} == {"target-0", "target-1"}
    assert capture_files.read_flamegraph(capture)["value"] == 10
    assert capture.started_at <= capture.finished_at and capture.worker


def test_a_redelivered_message_never_starts_a_second_sampler(monkeypatch, capture):
    calls = _swap_record(monkeypatch, _result())
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    assert pipeline.capture_execute(capture_id=capture.pk) == "skipped"
    assert len(calls) == 1


def test_a_parse_failure_keeps_the_raw_file_and_log(monkeypatch, capture):
    _swap_record(monkeypatch, _result(raw=b"<svg></svg>\n"))
    assert pipeline.capture_execute(capture_id=capture.pk) == "failed"
    capture.refresh_from_db()
    assert capture.error_cause == "parse"
    assert "raw file and log are kept" in capture.error
    assert capture.raw_file and capture_files.read_log(capture) == LOG


def test_a_process_that_exits_mid_capture_is_done_with_a_note(monkeypatch, capture):
    _swap_record(monkeypatch, _result(process_exited=True))
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    capture.refresh_from_db()
    assert "exited during the capture" in capture.note
    assert capture.stats["total_samples"] == 10


@pytest.mark.parametrize(
    ("said", "exited", "sampled_s"),
    [
        # py-spy's own stop notice ends the span...
        ([("py-spy> Stopped sampling because process exited", 3.3)], True, 2.5),
        # ...or, when it ends on its own count (no notice), its command's end (5.1 s).
        ([], False, 4.3),
    ],
)
def test_the_span_pyspy_sampled_is_kept_from_its_first_sample_to_its_stop(
    monkeypatch, capture, said, exited, sampled_s
):
    lines = [(LOG.splitlines()[0], 0.8), *said]  # sampling from 0.8 s: connect, attach
    _swap_record(monkeypatch, _result(process_exited=exited), lines=lines)
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    capture.refresh_from_db()
    assert capture.progress["sampled_s"] == sampled_s
    # Only a process that exited gets "covers N s of the asked", from the same span.
    assert capture.progress.get("covered_s") == (sampled_s if exited else None)


def test_a_permanent_failure_fails_at_once_with_its_cause(monkeypatch, capture):
    _swap_record(monkeypatch, remote.RemoteError("no_such_pid"))
    assert pipeline.capture_execute(capture_id=capture.pk) == "failed"
    capture.refresh_from_db()
    assert capture.error_cause == "no_such_pid"
    assert "pick a running process" in capture.error


CRASHED = remote.RemoteError("pyspy_crashed", "py-spy itself crashed", signal="SIGSEGV")


@pytest.mark.parametrize(
    ("then", "status"), [(_result(), "done"), (remote.RemoteError("no_such_pid"), "failed")]
)
def test_a_py_spy_crash_with_subprocesses_is_recorded_again_without_or_fails_naming_both(
    monkeypatch, capture, then, status
):
    Capture.objects.filter(pk=capture.pk).update(subprocesses=True)
    outcomes, asked = [CRASHED, then], []

    def fake_record(target, pid, settings, **kwargs):
        asked.append(settings.subprocesses)
        if isinstance(outcome := outcomes.pop(0), Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(remote, "record", fake_record)
    assert pipeline.capture_execute(capture_id=capture.pk) == status
    capture.refresh_from_db()
    assert asked == [True, False]
    if status == "done":
        assert capture.progress["without_subprocesses"]["signal"] == "SIGSEGV"
        assert "recorded the process again without --subprocesses" in capture.note
        assert "right after the crashed attempt" in capture.note
    else:
        assert capture.error_cause == "pyspy_crashed"
        assert "without --subprocesses failed too: no process with that PID" in capture.error


def test_a_transient_failure_goes_back_to_queued_for_a_retry(monkeypatch, capture):
    _swap_record(monkeypatch, remote.RemoteError("unreachable"))
    with pytest.raises(remote.RemoteError):
        pipeline.capture_execute(capture_id=capture.pk)
    capture.refresh_from_db()
    assert capture.status == "queued"
    assert "cannot reach the host" in capture.error


def test_a_cancelled_record_keeps_and_analyses_its_samples(monkeypatch, capture):
    Capture.objects.filter(pk=capture.pk).update(cancel_requested=True)
    _swap_record(monkeypatch, _result(stopped_by="cancel"))
    # cancel_requested before the claim: the capture never starts.
    assert pipeline.capture_execute(capture_id=capture.pk) == "skipped"
    Capture.objects.filter(pk=capture.pk).update(cancel_requested=False)
    assert pipeline.capture_execute(capture_id=capture.pk) == "cancelled"
    capture.refresh_from_db()
    assert capture.stats["total_samples"] == 10 and "Cancelled by a user" in capture.note


def test_progress_heartbeats_and_sees_a_cancel_request(monkeypatch, capture):
    services.capture_claim(capture_id=capture.pk, worker="w")
    progress = pipeline._Progress(Capture.objects.get(pk=capture.pk))
    progress.on_line(LOG.splitlines()[0], 0.4)
    progress.sampling_since -= 3.0  # three seconds into the sampling
    progress.on_line(LOG.splitlines()[1], 3.4)
    capture.refresh_from_db()
    assert capture.progress["behind_s"] == pytest.approx(1.2)
    # 3 s at 100 Hz, less the 1.2 s the sampler is behind: about 180 samples so far.
    assert 175 <= capture.progress["expected_samples"] <= 185
    assert capture.heartbeat_at is not None
    Capture.objects.filter(pk=capture.pk).update(cancel_requested=True)
    progress.last_beat = 0
    assert progress.should_cancel() is True


def test_progress_counts_from_pyspys_first_sample_not_from_the_workers_start(capture):
    # SSH and py-spy's attach can take seconds on a busy host: until py-spy says it
    # samples, the page must not show seconds (or rounds) sampled.
    services.capture_claim(capture_id=capture.pk, worker="w")
    progress = pipeline._Progress(Capture.objects.get(pk=capture.pk))
    progress.beat(force=True)
    capture.refresh_from_db()
    assert capture.progress["sampling"] is False
    assert (capture.progress["elapsed_s"], capture.progress["expected_samples"]) == (0, 0)
    progress.on_line(LOG.splitlines()[0], 2.5)  # written at once, not a beat later
    capture.refresh_from_db()
    assert capture.progress["sampling"] is True and capture.progress["elapsed_s"] < 0.5
    progress.sampling_since -= 2.0
    progress.beat(force=True)
    capture.refresh_from_db()
    assert capture.progress["elapsed_s"] == pytest.approx(2.0, abs=0.2)
    assert 190 <= capture.progress["expected_samples"] <= 220


def test_illegal_transitions_are_refused(capture):
    assert services.capture_transition(capture_id=capture.pk, to="done") is False
    assert services.capture_transition(capture_id=capture.pk, to="running") is True
    assert services.capture_transition(capture_id=capture.pk, to="running") is False
    with pytest.raises(services.IllegalTransition):
        services.capture_transition(capture_id=capture.pk, to="nonsense")


def test_a_capture_without_heartbeat_is_reaped_as_worker_lost(capture):
    from django.utils import timezone

    services.capture_claim(capture_id=capture.pk, worker="w")
    old = timezone.now() - timezone.timedelta(seconds=120)
    Capture.objects.filter(pk=capture.pk).update(heartbeat_at=old)
    assert services.reap_lost_captures(timeout_s=60) == 1
    capture.refresh_from_db()
    assert capture.status == "failed" and capture.error_cause == "worker_lost"


def test_gpu_samples_taken_beside_py_spy_are_stored_with_the_capture(monkeypatch, capture):
    csv = "2026/11/29 10:00:00.000, 0, 91, 100, 200\n2026/11/29 10:00:00.250, 0, [N/A], 120, 200\n"
    _swap_record(monkeypatch, _result(gpu_csv=csv))
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    capture.refresh_from_db()
    points = capture.gpu_samples["gpus"][0]["points"]
    assert [(p["t"], p["util"]) for p in points] == [(0.0, 91.0), (0.25, None)]


def test_a_host_without_nvidia_smi_stores_no_gpu_timeline(monkeypatch, capture):
    _swap_record(monkeypatch, _result())
    pipeline.capture_execute(capture_id=capture.pk)
    capture.refresh_from_db()
    assert capture.gpu_samples is None


# py-spy, stopped before its first sample, writes no file, or (seen in the suite on a
# workload that had only just woken) an empty one: either is a cancel, not a failure.
@pytest.mark.parametrize("raw", [None, b"", b"\n"])
def test_a_cancel_before_pyspy_wrote_anything_ends_cancelled_not_failed(monkeypatch, capture, raw):
    _swap_record(monkeypatch, _result(raw=raw, log="", exit_code=130, stopped_by="cancel"))
    assert pipeline.capture_execute(capture_id=capture.pk) == "cancelled"
    capture.refresh_from_db()
    assert capture.status == "cancelled" and "before py-spy" in capture.error


def test_a_stale_parsing_capture_is_sent_to_analysis_again_not_failed(
    monkeypatch, capture, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    sent = []
    monkeypatch.setattr(enqueue, "analysis_enqueue", lambda *, capture_id: sent.append(capture_id))
    old = timezone.now() - timezone.timedelta(seconds=120)
    Capture.objects.filter(pk=capture.pk).update(status="parsing", heartbeat_at=old)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.reap_lost_captures(timeout_s=60) == 0
        assert services.reap_lost_captures(timeout_s=60) == 0  # re-sent once per timeout
    capture.refresh_from_db()
    assert capture.status == "parsing" and sent == [capture.pk]
