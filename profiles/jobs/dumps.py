"""The worker side of a whole-job dump ("Dump all ranks"), one host at a time.

One task per host (the same `run_host_captures` as a whole-job record) runs one session
(`runs.remote.dump_many`) that dumps each of the host's ranks `dump_repeat` times,
`dump_interval_s` apart. A rank's dumps are stored as its raw file (a JSON list of
{"at", "native", "dump"}, py-spy's own output inside), its stderr as the log, and the
rank is analysed at once, in this task: parsing a dump is cheap, and the verdict of a
hung job should not wait behind the analysis queue. The group's report is asked for
once the host's ranks have all ended, not once a rank. Each rank keeps, in
`progress.dump_lead_s`, how long after the request its session could dump: the next
dump's instant is learned from it (profiles.jobs.schedule). A rank with no dump fails with
its cause (exited, not Python, ptrace denied); one that exited between dumps keeps the
dumps it has, with a note. The group's `stacks` follow when the last rank has ended
(group_report).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from profiles.captures.analysis import capture_analyze_stored
from profiles.captures.lifecycle import Status, capture_mark_failed, capture_transition
from profiles.jobs import report as group_report
from profiles.models import Capture, CaptureGroup
from profiles.storage.files import capture_store_outputs
from runs import remote
from runs.services import host_target

log = logging.getLogger(__name__)


def host_dumps_execute(group: CaptureGroup, captures: list[Capture]) -> list[int]:
    """Dump the host's claimed captures; returns [] (each rank is analysed here)."""
    with group_report.group_report_deferred(group.pk):
        _dump_host(group, captures)
    return []


def _dump_host(group: CaptureGroup, captures: list[Capture]) -> None:
    host = captures[0].host
    if host is None:
        _fail_all(captures, "host", "The host was deleted.")
        return
    try:
        remote.check_target(host_target(host))
        found = remote.dump_many(
            host_target(host),
            [c.pid for c in captures],
            repeat=group.dump_repeat,
            interval_s=group.dump_interval_s,
            native=captures[0].native,
            start_at=group.start_by.timestamp() if group.start_by else None,
        )
    except remote.RemoteError as exc:
        _fail_all(captures, exc.cause, exc.message, detail=exc.detail)
        return
    except ValueError as exc:  # a stored host field the command builder refuses
        _fail_all(captures, "host", f"The host's settings are unusable: {exc}")
        return
    requested_at = group.created_at.timestamp()
    for capture in captures:
        _finish(capture, found[capture.pid], group.dump_repeat, requested_at)


def _finish(capture: Capture, dumps: remote.PidDumps, repeat: int, requested_at: float) -> None:
    error = dumps.error
    if not dumps.dumps:
        error = error or remote.RemoteError("unknown", "py-spy dump printed nothing")
        capture_store_outputs(capture=capture, raw=None, log=dumps.stderr or None)
        capture_mark_failed(
            capture_id=capture.pk,
            cause=error.cause,
            message=error.message,
            error_detail=dumps.stderr,
        )
        return
    series = [{"at": d.at, "native": d.native, "dump": _json(d.output)} for d in dumps.dumps]
    raw = json.dumps(series, ensure_ascii=False).encode()
    capture_store_outputs(capture=capture, raw=raw, log=dumps.stderr)
    fields: dict[str, Any] = {}
    if dumps.ready_at is not None:  # on the host's clock, as NTP keeps it
        lead = round(max(0.0, dumps.ready_at - requested_at), 3)
        fields["progress"] = {**(capture.progress or {}), "dump_lead_s": lead}
    if len(series) < repeat:
        cause = f" ({error.message})" if error else ""
        fields["note"] = f"{len(series)} of {repeat} dumps: the next one failed{cause}."
    if not all(d.native for d in dumps.dumps) and capture.native:
        fields["note"] = (fields.get("note", "") + " Dumped without --native: py-spy could "
                          "not unwind this process's native frames.").strip()  # fmt: skip
    if capture_transition(capture_id=capture.pk, to=Status.PARSING, **fields):
        capture_analyze_stored(capture_id=capture.pk)


def _json(output: str) -> Any:
    """py-spy's JSON as data; text it could not parse is kept as text (the analysis
    then fails this rank with the parser's reason, and the raw file keeps it)."""
    try:
        return json.loads(output)
    except ValueError:
        return output


def _fail_all(captures: list[Capture], cause: str, message: str, detail: str = "") -> None:
    for capture in captures:
        capture_mark_failed(
            capture_id=capture.pk, cause=cause, message=message, error_detail=detail
        )
