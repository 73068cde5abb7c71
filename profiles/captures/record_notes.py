"""What a finished record's note says, and what it keeps in `progress`: the span py-spy
sampled, a process that exited, and what the record script's guard learnt around
py-spy (runs.remote.guard): py-spy's version and the target's Python, `--native`
dropped before the start or failed during it (a Python-only capture), py-spy crashed
with `--subprocesses` (recorded again without it), a target left stopped and sent
SIGCONT.
"""

from typing import Any

from profiles.models import Capture
from runs import remote


def native_failure(
    capture: Capture, result: "remote.RecordResult", span: dict[str, float]
) -> dict[str, Any] | None:
    """How `--native` failed in this record (py-spy lost most rounds to errors), or None
    when it was not asked, was dropped before the start, or worked."""
    if not capture.native or result.facts.get("native_dropped") or result.stopped_by == "cancel":
        return None
    start = span.get("start")
    sampled = span.get("stop", result.elapsed_s) - start if start is not None else None
    found = remote.guard.native_failure(result.log, rate=capture.rate, sampled_s=sampled)
    if found is not None:
        found["log_tail"] = result.log.strip().splitlines()[-3:]
    return found


def record_again(
    capture: Capture, first: Any, span: dict[str, float]
) -> tuple[dict[str, bool], dict[str, Any]] | None:
    """Whether `capture`'s first record (a RecordResult, or the RemoteError it ended in)
    is to be taken again with one setting changed, as (the change, why: kept in
    `progress`), else None: `--native` failed (again without it: `python_only`), or
    py-spy crashed sampling with `--subprocesses` (again without it:
    `without_subprocesses`)."""
    if isinstance(first, remote.RemoteError):
        if first.cause != "pyspy_crashed" or not capture.subprocesses:
            return None
        tail = first.detail.strip().splitlines()[-3:]
        return {"subprocesses": False}, {"reason": first.cause, "signal": first.signal,
                                         "log_tail": tail}  # fmt: skip
    failed = native_failure(capture, first, span)
    return ({"native": False}, {"reason": "native_failed", **failed}) if failed else None


def again_failed(error: "remote.RemoteError", why: dict[str, Any]) -> "remote.RemoteError":
    """The failure of a record whose py-spy crashed (`error`) and whose record again
    without `--subprocesses` (`why`, from `record_again`) failed too, naming both. (A
    record whose `--native` failed keeps its samples when its retry fails.)"""
    message = f"{error.message}; recording again without --subprocesses failed too: "
    message += why["retry_error"]
    return remote.RemoteError(
        error.cause, message, detail=error.detail, transient=False, signal=error.signal
    )


def record_note(
    result: Any, capture: Capture, span: dict[str, float], again: dict | None = None
) -> str:
    """The record's note; also keeps in `progress` the seconds py-spy sampled
    (`sampled_s`: a whole-job rank's own span, not its host session's time), for a
    process that exited mid-capture how much of the asked duration that covers, and
    what py-spy's guard found (`pyspy`, `python_only`, `without_subprocesses`: see
    runs.remote.guard and `record_again`)."""
    notes, spans = [], guard_notes(result, capture, again)
    if "start" in span:
        stop = span.get("stop", result.elapsed_s)  # its own notice, or its command's end
        spans["sampled_s"] = round(max(0.0, stop - span["start"]), 1)
    facts = getattr(result, "facts", None) or {}
    missed = facts.get("target") == "gone" and "process exited" not in (result.log or "")
    if getattr(result, "process_exited", False) and not missed:
        covered = spans.get("sampled_s", result.elapsed_s)
        spans["covered_s"] = round(min(covered, capture.duration), 1)
        notes.append("The process exited during the capture; the samples taken before are kept.")
    elif getattr(result, "process_exited", False):
        notes.append(
            "The process was gone when py-spy stopped, though py-spy did not say it exited; "
            "the samples taken before are kept."
        )
    notes += spans.pop("notes", [])
    if spans:
        current = Capture.objects.values_list("progress", flat=True).get(pk=capture.pk)
        Capture.objects.filter(pk=capture.pk).update(progress={**(current or {}), **spans})
    if result.stopped_by == "cancel":
        notes.append("Cancelled by a user; the samples taken until then are kept.")
    return " ".join(notes)


def guard_notes(result: Any, capture: Capture, again: dict | None) -> dict[str, Any]:
    """`progress` entries and notes (under "notes") from what the record script learnt
    around py-spy: its version and the target's Python, `--native` dropped or failed
    (a Python-only capture), a record taken again without `--subprocesses` (`again`,
    from `record_again`), a target left stopped and sent SIGCONT."""
    facts: dict[str, str] = getattr(result, "facts", None) or {}
    out: dict[str, Any] = {"notes": []}
    if facts:
        built = {"1": True, "0": False}.get(facts.get("native_built", ""))
        out["pyspy"] = {"version": facts.get("py_spy") or None,
                        "python": facts.get("python") or None, "native_built": built}  # fmt: skip
    if capture.native and (why := remote.guard.native_dropped(facts)):
        out["python_only"] = {"reason": "native_unavailable", "why": why}
        out["notes"].append(f"--native was dropped: {why}. These are Python-only stacks.")
    if again and again["reason"] == "native_failed":
        out["python_only"] = again
        out["notes"].append(_native_failed_note(again, capture))
    elif again and again["reason"] == "pyspy_crashed":
        out["without_subprocesses"] = again
        out["notes"].append(_crashed_note(again, capture))
    if facts.get("target") == "continued":
        out["target_continued"] = True
        out["notes"].append(
            "py-spy left the process stopped (state T); flamedeck sent it SIGCONT, so it runs on."
        )
    return out


def _native_failed_note(failed: dict[str, Any], capture: Capture) -> str:
    lost = (
        f"Native unwinding failed: py-spy lost {failed['errors']} of about "
        f"{failed['rounds']} sampling rounds to errors (py-spy's usual reason: "
        "“Failed to merge native and python frames”)"
    )
    if failed.get("retry_error"):
        return f"{lost}, and recording again without --native failed: {failed['retry_error']}"
    return (
        f"{lost}, so flamedeck recorded again without --native: these are Python-only "
        f"stacks of the {capture.duration} s right after {_after(capture, 'the native attempt')}."
    )


def _crashed_note(crashed: dict[str, Any], capture: Capture) -> str:
    what = "rank" if capture.group_id else "process"
    return (
        f"py-spy crashed ({crashed['signal'] or 'by a signal'}) while sampling the {what}'s "
        f"child processes (--subprocesses), so flamedeck recorded the {what} again without "
        f"--subprocesses: its workers are not in this capture, which covers the "
        f"{capture.duration} s right after {_after(capture, 'the crashed attempt')}."
    )


def _after(capture: Capture, single: str) -> str:
    """What a record taken again follows: the job's window, or a single capture's
    first attempt (`single`)."""
    if capture.group_id:
        return "the job's window (not the same moments as the other ranks)"
    return single
