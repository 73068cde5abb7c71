"""A capture's files, read and written through artifact storage (FLAMEDECK_ARTIFACTS):
raw samples and py-spy's log (gzip, stored before anything parses them), the flamegraph
tree, per-thread tables and the export in the other download format.

Uploads stream from disk into storage block by block, never whole into memory
(profiles.storage.uploads bounds what they inflate to).
"""

import gzip
import io
import itertools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.core.files.base import ContentFile, File

from profiles import pyspy
from profiles.models import Capture
from profiles.storage.uploads import PreparedUpload


def gz(data: bytes) -> ContentFile:
    return ContentFile(gzip.compress(data, compresslevel=6))


CHUNK = 1024 * 1024
# py-spy writes a line a second at most: a real log is a few KB. A crafted one is
# read this far and no further, never inflated whole.
LOG_READ_BYTES = 16 * 1024 * 1024


def _sample_format(head: bytes, kind: str) -> tuple[str, str]:
    """Stored format and file name, from the first bytes of the (uncompressed) samples."""
    if kind == Capture.Kind.DUMP:
        return "dump", "dump.txt.gz"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{":
        return "speedscope", "samples.speedscope.json.gz"
    return "raw", "samples.txt.gz"


def capture_store_upload(
    *, capture: Capture, samples: PreparedUpload, log: PreparedUpload | None = None
) -> None:
    """Keep uploaded samples (and log), prepared by `uploads.upload_prepare`."""
    with samples.file as stored:
        fmt, name = _sample_format(samples.head, capture.kind)
        replace_file(capture.raw_file, name, File(stored, name=name))
    capture.raw_format, capture.raw_size = fmt, samples.size
    fields = ["raw_file", "raw_format", "raw_size"]
    if log is not None:
        with log.file as stored_log:
            replace_file(capture.log_file, "py-spy.log.gz", File(stored_log, name="py-spy.log.gz"))
        fields.append("log_file")
    capture.save(update_fields=fields)


def capture_store_outputs(
    *, capture: Capture, raw: bytes | None, log: str | None, track: str | None = None
) -> None:
    """Keep py-spy's raw output and its full log (gzip) before anything parses them, and
    the time track split from them (profiles.captures.timekeeping), when there is one."""
    fields = []
    if track is not None:
        replace_file(capture.time_file, "time.json.gz", gz(track.encode()))
        fields.append("time_file")
    if raw is not None:
        fmt, name = _sample_format(raw[:4096], capture.kind)
        replace_file(capture.raw_file, name, gz(raw))
        capture.raw_format, capture.raw_size = fmt, len(raw)
        fields += ["raw_file", "raw_format", "raw_size"]
    if log is not None:
        replace_file(capture.log_file, "py-spy.log.gz", gz(log.encode()))
        fields.append("log_file")
    if fields:
        capture.save(update_fields=fields)


def replace_file(field: Any, name: str, content: File) -> None:
    """Store `content` in `field`, deleting what it held (a retry or re-analysis
    replaces its files instead of leaving orphans beside them)."""
    if field:
        field.delete(save=False)
    field.save(name, content, save=False)


def capture_delete_files(*, capture: Capture) -> None:
    """Delete every file a capture stored (raw, log, flamegraph, thread tables, export,
    time track)."""
    for field in (
        capture.raw_file,
        capture.log_file,
        capture.flamegraph_file,
        capture.threads_file,
        capture.export_file,
        capture.time_file,
    ):
        if field:
            field.delete(save=False)


def read_log(capture: Capture) -> str | None:
    """py-spy's log as text: its first LOG_READ_BYTES at most."""
    if not capture.log_file:
        return None
    with capture.log_file.open("rb") as fh, gzip.GzipFile(fileobj=fh) as log:
        return log.read(LOG_READ_BYTES).decode("utf-8", "replace")


def read_flamegraph(capture: Capture) -> dict[str, Any] | None:
    return _read_json(capture.flamegraph_file)


def read_thread_tables(capture: Capture) -> dict[str, Any] | None:
    return _read_json(capture.threads_file)


def _read_json(field: Any) -> dict[str, Any] | None:
    if not field:
        return None
    with field.open("rb") as fh:
        return json.loads(gzip.decompress(fh.read()))


EXPORT_NAMES = {"raw": "export.speedscope.json.gz", "speedscope": "export.folded.txt.gz"}


def store_export(capture: Capture, export: bytes | None) -> None:
    """The samples in the other download format (gzip, from export_bytes), made once
    here instead of per request."""
    if export is None:
        if capture.export_file:
            capture.export_file.delete(save=False)
        return
    replace_file(capture.export_file, EXPORT_NAMES[capture.raw_format], ContentFile(export))


def export_bytes(profile: Any, raw_format: str, name: str = "flamedeck profile") -> bytes:
    """The export, gzip-compressed as it is stored; a speedscope export carries `name`
    (speedscope's title). The folded text of a speedscope import is several times the
    file (112 MB for a 30 MB one): it is compressed a batch of lines at a time, never
    held whole."""
    if raw_format != "speedscope":
        doc = pyspy.to_speedscope(profile, name=name)
        return gzip.compress(json.dumps(doc).encode(), compresslevel=6)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as gz_out:
        lines = pyspy.to_folded(profile)
        while batch := list(itertools.islice(lines, 512)):
            gz_out.write(("\n".join(batch) + "\n").encode())
    return out.getvalue()


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
                shutil.copyfileobj(fh, self.tmp, CHUNK)
            self.tmp.flush()
            return self.tmp.name

    def __exit__(self, *exc: object) -> None:
        if hasattr(self, "tmp"):
            self.tmp.close()
