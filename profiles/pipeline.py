"""The worker side of a capture: run py-spy through the remote seam, keep its raw
output and log, then analyse them with the engine.

Raw output and log are stored before parsing, so a parse failure loses nothing.
"""

import gzip
import json
import logging
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.utils import timezone

from profiles import pyspy
from runs import gpu, remote
from runs.services import host_target

from .models import Capture, KeywordSet
from .services import Status, capture_claim, capture_mark_failed, capture_transition

log = logging.getLogger(__name__)
HEARTBEAT_EVERY_S = 1.0


def worker_name() -> str:
    return socket.gethostname()


def keywords_for(keyword_set: KeywordSet | None) -> tuple[pyspy.Keyword, ...]:
    if keyword_set is None:
        return tuple(pyspy.GPU_KEYWORDS)
    return tuple(pyspy.Keyword(k.keyword, k.category) for k in keyword_set.keywords.all())


def _gz(data: bytes) -> ContentFile:
    return ContentFile(gzip.compress(data, compresslevel=6))


def capture_store_outputs(*, capture: Capture, raw: bytes | None, log: str | None) -> None:
    """Keep py-spy's raw output and its full log (gzip) before anything parses them."""
    fields = []
    if raw is not None:
        fmt = "speedscope" if raw.lstrip()[:1] == b"{" else "raw"
        name = {"speedscope": "samples.speedscope.json.gz"}.get(fmt, "samples.txt.gz")
        if capture.kind == Capture.Kind.DUMP:
            fmt, name = "dump", "dump.txt.gz"
        _replace(capture.raw_file, name, _gz(raw))
        capture.raw_format, capture.raw_size = fmt, len(raw)
        fields += ["raw_file", "raw_format", "raw_size"]
    if log is not None:
        _replace(capture.log_file, "py-spy.log.gz", _gz(log.encode()))
        fields.append("log_file")
    if fields:
        capture.save(update_fields=fields)


def _replace(field: Any, name: str, content: ContentFile) -> None:
    """Store `content` in `field`, deleting what it held (a retry or re-analysis
    replaces its files instead of leaving orphans beside them)."""
    if field:
        field.delete(save=False)
    field.save(name, content, save=False)


def read_log(capture: Capture) -> str | None:
    if not capture.log_file:
        return None
    with capture.log_file.open("rb") as fh:
        return gzip.decompress(fh.read()).decode("utf-8", "replace")


def read_flamegraph(capture: Capture) -> dict[str, Any] | None:
    return _read_json(capture.flamegraph_file)


def read_thread_tables(capture: Capture) -> dict[str, Any] | None:
    return _read_json(capture.threads_file)


def _read_json(field: Any) -> dict[str, Any] | None:
    if not field:
        return None
    with field.open("rb") as fh:
        return json.loads(gzip.decompress(fh.read()))


def capture_analyze(*, capture: Capture, final: str = Status.DONE) -> None:
    """Parse the stored raw file with the engine; store stats and the flamegraph tree.

    Ends in `final` (done, or cancelled for a cancelled record), or failed with the
    parser's reason; the raw file and log stay either way.
    """
    Capture.objects.filter(pk=capture.pk).update(heartbeat_at=timezone.now())
    try:
        if capture.raw_format == "dump":
            stats, tree, tables = _analyze_dump(capture), None, None
        else:
            stats, tree, tables = _analyze_samples(capture)
    except pyspy.ProfileError as exc:
        capture_mark_failed(
            capture_id=capture.pk,
            cause="parse",
            message=f"Could not parse py-spy's output: {exc}. The raw file and log are kept.",
        )
        return
    for field, name, data in (
        (capture.flamegraph_file, "flamegraph.json.gz", tree),
        (capture.threads_file, "threads.json.gz", tables),
    ):
        if data is not None:
            _replace(field, name, _gz(json.dumps(data).encode()))
        elif field:
            field.delete(save=False)
    capture.stats = stats
    capture.save(update_fields=["stats", "flamegraph_file", "threads_file"])
    capture_transition(capture_id=capture.pk, to=final)


def _analyze_samples(capture: Capture) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    if not capture.raw_file:
        raise pyspy.ProfileError("py-spy wrote no samples")
    keywords = keywords_for(capture.keyword_set)
    options = pyspy.AnalysisOptions(
        keywords=keywords, max_nodes=settings.FLAMEDECK_FLAMEGRAPH_NODES
    )
    with local_copy(capture.raw_file) as path:
        profile = pyspy.read_profile(path)
    stats = dict(pyspy.analyze(profile, options, log_text=read_log(capture)))
    tree = stats.pop("flamegraph")
    return stats, tree, dict(pyspy.thread_tables(profile, keywords))


def _analyze_dump(capture: Capture) -> dict[str, Any]:
    with capture.raw_file.open("rb") as fh:
        text = gzip.decompress(fh.read()).decode("utf-8", "replace")
    threads = pyspy.parse_dump(text)
    return {"format": "dump", "dump_threads": threads, "total_samples": 0}


class local_copy:
    """A path to a stored file (storage may not be the local disk)."""

    def __init__(self, field: Any) -> None:
        self.field = field

    def __enter__(self) -> str:
        try:
            return self.field.path
        except NotImplementedError:
            self.tmp = tempfile.NamedTemporaryFile(suffix=Path(self.field.name).name)
            with self.field.open("rb") as fh:
                self.tmp.write(fh.read())
            self.tmp.flush()
            return self.tmp.name

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "tmp"):
            self.tmp.close()


class _Progress:
    """Heartbeat, live progress and cancel polling for one running capture."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.started = time.monotonic()
        self.last_beat = 0.0
        self.behind_s = 0.0
        self.cancelled = False
        self.lines: list[str] = []

    def on_line(self, line: str, elapsed_s: float | None = None) -> None:
        self.lines.append(line)
        if "behind in sampling" in line:
            lag = pyspy.analyze_lag("\n".join(self.lines))
            self.behind_s = lag["max_behind_s"] if lag else self.behind_s
            self.beat(force=True)

    def should_cancel(self) -> bool:
        return self.beat()

    def beat(self, force: bool = False) -> bool:
        now = time.monotonic()
        if not force and now - self.last_beat < HEARTBEAT_EVERY_S:
            return self.cancelled
        self.last_beat = now
        elapsed = now - self.started
        progress = {
            "elapsed_s": round(elapsed, 1),
            "duration_s": self.capture.duration,
            "behind_s": self.behind_s,
            # py-spy reports its count only at the end; a sampler that is `behind_s`
            # late has taken about that much time's worth of samples fewer.
            "expected_samples": int(
                max(0.0, min(elapsed, self.capture.duration) - self.behind_s) * self.capture.rate
            ),
        }
        Capture.objects.filter(pk=self.capture.pk).update(
            heartbeat_at=timezone.now(), progress=progress
        )
        self.cancelled = Capture.objects.filter(pk=self.capture.pk, cancel_requested=True).exists()
        return self.cancelled


def capture_execute(*, capture_id: int) -> str:
    """Claim, run and analyse one capture. Returns the final status (or "skipped")."""
    if not capture_claim(capture_id=capture_id, worker=worker_name()):
        log.info("capture %s already claimed or cancelled; skipping", capture_id)
        return "skipped"
    capture = Capture.objects.select_related("host").get(pk=capture_id)
    if capture.host is None:
        capture_mark_failed(capture_id=capture_id, cause="host", message="The host was deleted.")
        return Status.FAILED
    try:
        if capture.kind == Capture.Kind.DUMP:
            return _execute_dump(capture)
        return _execute_record(capture)
    except remote.RemoteError as exc:
        if exc.transient:
            # Back to queued so the retried task can claim it again.
            capture_transition(capture_id=capture_id, to=Status.QUEUED, error=exc.message)
            raise
        capture_mark_failed(capture_id=capture_id, cause=exc.cause, message=exc.message)
        return Status.FAILED


def _record_settings(capture: Capture) -> "remote.RecordSettings":
    return remote.RecordSettings(
        duration_s=capture.duration,
        rate=capture.rate,
        native=capture.native,
        threads=capture.threads,
        idle=capture.idle,
        gil=capture.gil,
        nonblocking=capture.nonblocking,
        subprocesses=capture.subprocesses,
    )


def _execute_record(capture: Capture) -> str:
    progress = _Progress(capture)
    try:
        result = remote.record(
            host_target(capture.host),
            capture.pid,
            _record_settings(capture),
            margin_s=settings.FLAMEDECK_CAPTURE_MARGIN_S,
            on_progress=progress.on_line,
            should_cancel=progress.should_cancel,
        )
    except remote.RemoteError:
        # What py-spy said before the failure (a lost connection, say) is evidence too.
        if progress.lines:
            capture_store_outputs(capture=capture, raw=None, log="\n".join(progress.lines))
        raise
    capture_store_outputs(capture=capture, raw=result.raw, log=result.log)
    if result.gpu_csv:
        capture.gpu_samples = gpu.parse_nvidia_smi(result.gpu_csv)
        capture.save(update_fields=["gpu_samples"])
    if result.raw is None:
        failure = remote.classify(result.exit_code, result.stderr, result.log)
        cause = failure.cause if failure else "no_output"
        message = failure.message if failure else _no_output_message(result)
        capture_mark_failed(capture_id=capture.pk, cause=cause, message=message)
        return Status.FAILED
    note = _record_note(result)
    if result.stopped_by == "cancel":
        capture_transition(capture_id=capture.pk, to=Status.PARSING, note=note)
        capture_analyze(capture=Capture.objects.get(pk=capture.pk), final=Status.CANCELLED)
        return Capture.objects.get(pk=capture.pk).status
    if not capture_transition(capture_id=capture.pk, to=Status.PARSING, note=note):
        return Capture.objects.get(pk=capture.pk).status
    capture_analyze(capture=Capture.objects.get(pk=capture.pk))
    return Capture.objects.get(pk=capture.pk).status


def _record_note(result: Any) -> str:
    notes = []
    if getattr(result, "process_exited", False):
        notes.append("The process exited during the capture; the samples taken before are kept.")
    if result.stopped_by == "cancel":
        notes.append("Cancelled by a user; the samples taken until then are kept.")
    return " ".join(notes)


def _no_output_message(result: Any) -> str:
    tail = (result.stderr or result.log or "").strip().splitlines()[-1:] or ["no output"]
    return f"py-spy exited with code {result.exit_code} and wrote no samples: {tail[0]}"


def _execute_dump(capture: Capture) -> str:
    result = remote.dump(host_target(capture.host), capture.pid, native=capture.native)
    if not result.text.strip():
        failure = remote.classify(1, result.stderr, "")
        capture_store_outputs(capture=capture, raw=None, log=result.stderr)
        cause = failure.cause if failure else "no_output"
        message = failure.message if failure else f"py-spy dump printed nothing: {result.stderr}"
        capture_mark_failed(capture_id=capture.pk, cause=cause, message=message)
        return Status.FAILED
    capture_store_outputs(capture=capture, raw=result.text.encode(), log=result.stderr)
    capture_transition(capture_id=capture.pk, to=Status.PARSING)
    capture_analyze(capture=Capture.objects.get(pk=capture.pk))
    return Capture.objects.get(pk=capture.pk).status
