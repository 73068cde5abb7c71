"""A capture's analysis: claim it, run the engine on its stored samples under the
analysis budget (profiles.captures.budget: a child process with a time limit that grows with
the file and a memory limit, heartbeating while it runs), store what it found.

Raw output and log were stored before; a failed analysis keeps them, and its error
names the parser's reason or the limit that stopped it.
"""

import contextlib
import gzip
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from profiles import pyspy
from profiles.captures import budget
from profiles.captures.lifecycle import (
    Status,
    capture_analysis_beat,
    capture_analysis_finish,
    capture_claim_analysis,
)
from profiles.models import Capture, KeywordSet
from profiles.pyspy.formats import load_track, read_text, track_json
from profiles.pyspy.rules import capture_threads, pool, step_threads
from profiles.pyspy.timed import (
    TimedCapture,
    default_bucket,
    design_effects,
    device_findings,
    periodic_stalls,
    with_states,
)
from profiles.signals import capture_analysed
from profiles.storage.files import (
    export_bytes,
    gz,
    local_copy,
    read_log,
    replace_file,
    store_export,
)

log = logging.getLogger(__name__)


def keywords_for(keyword_set: KeywordSet | None) -> tuple[pyspy.Keyword, ...]:
    if keyword_set is None:
        return tuple(pyspy.GPU_KEYWORDS)
    return tuple(pyspy.Keyword(k.keyword, k.category) for k in keyword_set.keywords.all())


def capture_analyze_stored(*, capture_id: int) -> str:
    """Parse a capture whose samples are stored (status parsing); the analysis task.

    A cancelled record keeps its samples and ends cancelled once they are parsed.
    """
    capture = Capture.objects.filter(pk=capture_id, status=Status.PARSING).first()
    if capture is None:
        log.info("capture %s is not waiting for analysis; skipping", capture_id)
        return "skipped"
    final = Status.CANCELLED if capture.cancel_requested else Status.DONE
    return capture_analyze(capture=capture, final=final)


def capture_analyze(*, capture: Capture, final: str = Status.DONE) -> str:
    """Claim the capture's analysis, parse the stored raw file with the engine and store
    stats and the flamegraph tree. Returns the status it ended in, or "skipped".

    The engine runs in a child process under the analysis budget (profiles.captures.budget),
    heartbeating while it runs. Ends in `final` (done, or cancelled for a cancelled
    record), or failed with the parser's reason or the limit that stopped it; the raw
    file and log stay either way. A capture whose analysis another worker holds (a
    second delivery of its message) is skipped.
    """
    stale = timezone.now() - timezone.timedelta(seconds=settings.FLAMEDECK_HEARTBEAT_TIMEOUT_S)
    claim = capture_claim_analysis(capture_id=capture.pk, stale_before=stale)
    if claim is None:
        log.info("capture %s: its analysis is held elsewhere or done; skipping", capture.pk)
        return "skipped"
    try:
        _analyze_and_store(capture, claim)
    except budget.BudgetExceeded as exc:
        cause, reason = exc.cause, str(exc)
    except StateRulesError as exc:
        cause, reason = "parse", str(exc)
    except pyspy.ProfileError as exc:
        cause, reason = "parse", f"Could not parse py-spy's output: {exc}."
    except Exception as exc:  # whatever it is, the capture must not stay in "parsing"
        log.exception("capture %s: analysis failed", capture.pk)
        cause, reason = "parse", _analysis_failure(exc)
    else:
        if capture_analysis_finish(capture_id=capture.pk, claim=claim, to=final):
            capture_analysed.send_robust(sender=Capture, capture_id=capture.pk, status=final)
        return final
    message = f"{reason} The raw file and log are kept."
    failed = {"error": message, "error_cause": cause}
    capture_analysis_finish(capture_id=capture.pk, claim=claim, to=Status.FAILED, **failed)
    return Status.FAILED


def _analysis_failure(exc: Exception) -> str:
    if isinstance(exc, OverflowError) or re.search(r"\b(nan|inf|infinity)\b", str(exc), re.I):
        return (
            "Could not parse py-spy's output: it holds a number that is not finite "
            "(Infinity or NaN), which py-spy never writes."
        )
    return f"Could not analyse py-spy's output ({type(exc).__name__}: {str(exc)[:300]})."


def _analyze_and_store(capture: Capture, claim: Any) -> None:
    if capture.raw_format == "dump":
        stats, tree, tables, export = _analyze_dump(capture), None, None, None
    else:
        stats, tree, tables, export = _analyze_samples(capture, claim)
    # JSON has no NaN or Infinity (PostgreSQL refuses them): a non-finite number from
    # a crafted file is a parse failure here, not a database error later.
    stats_json = json.dumps(stats, allow_nan=False)
    for field, name, data in (
        (capture.flamegraph_file, "flamegraph.json.gz", tree),
        (capture.threads_file, "threads.json.gz", tables),
    ):
        if data is not None:
            replace_file(field, name, gz(json.dumps(data, allow_nan=False).encode()))
        elif field:
            field.delete(save=False)
    store_export(capture, export)
    capture.stats = json.loads(stats_json)
    lag = capture.stats.get("lag") or {}
    if capture.kind == Capture.Kind.IMPORT and lag.get("requested_rate"):
        # An import's settings are only known from its log; say what py-spy was asked.
        capture.rate = lag["requested_rate"]
        capture.duration = lag.get("requested_duration_s") or capture.duration
    fields = ["stats", "flamegraph_file", "threads_file", "export_file", "rate", "duration"]
    fields += ["time_file"]
    capture.save(update_fields=fields)


def analysis_time_limit_s(raw_size: int) -> float:
    """The analysis time limit: a base plus a share per MB of (inflated) samples."""
    per_mb = settings.FLAMEDECK_ANALYSIS_S_PER_MB * raw_size / (1024 * 1024)
    return round(settings.FLAMEDECK_ANALYSIS_TIME_S + per_mb, 1)


def engine_outputs(
    path: str,
    options: pyspy.AnalysisOptions,
    log_text: str | None,
    raw_format: str,
    step_threads: Any = (),
    title: str = "flamedeck profile",
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], bytes]:
    """Stats, flamegraph tree, thread tables and export of one raw file: the engine's
    whole share of an analysis (run in the budget's child process: no database)."""
    profile = pyspy.read_profile(path)
    stats = dict(pyspy.analyze(profile, options, log_text=log_text))
    if step_threads:  # the run says which threads step
        stats["findings"] = pyspy.findings_for_capture(stats, step_threads)
    stats["step_threads"] = stored_step_threads(stats, step_threads)
    tree = stats.pop("flamegraph")
    lag = stats.get("lag")
    tables = dict(pyspy.thread_tables(profile, options.keywords, options=options, lag=lag))
    return stats, tree, tables, export_bytes(profile, raw_format, name=title)


def all_outputs(
    path: str,
    options: pyspy.AnalysisOptions,
    log_text: str | None,
    raw_format: str,
    step_threads: Any,
    title: str,
    track_path: str | None,
    device: Any = None,
) -> tuple[tuple, tuple | None]:
    """engine_outputs, then timed_outputs when there is a track: one child process
    for both (a fork and a wait cost more than the engine on a small capture, and a
    whole job brings a thousand of them)."""
    outputs = engine_outputs(path, options, log_text, raw_format, step_threads, title)
    if track_path is None:
        return outputs, None
    names = outputs[0]["step_threads"]["names"]
    return outputs, timed_outputs(path, track_path, options, names, device=device)


@contextlib.contextmanager
def _track_copy(capture: Capture) -> Iterator[str | None]:
    """A local path of the capture's time track, or None without one."""
    if not capture.time_file:
        yield None
        return
    with local_copy(capture.time_file) as path:
        yield path


def timed_outputs(
    path: str,
    track_path: str,
    options: pyspy.AnalysisOptions,
    step_names: list[str],
    *,
    device: Any = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """A capture's time (run in the budget's child, after engine_outputs): the summary
    stored in stats["time"], its periodic stalls and device findings, and the track with
    each record's state, so timelines and windows never classify again. With `device`
    (the capture's gpu_samples) the summary holds `device` (profiles.pyspy.timed.device),
    which the caller stores as stats["device"]."""
    track = load_track(Path(track_path).read_bytes(), "the time track")
    if not track.exact:
        return time_summary(track), [], track_json(track)
    raw_text = read_text(path)
    track = with_states(track, raw_text, state_rules=options.state_rules, library=options.library)
    timed = TimedCapture(raw_text, track, state_rules=options.state_rules, library=options.library)
    stalls = [dict(f) for f in periodic_stalls(timed, step_thread_names=tuple(step_names))]
    summary = time_summary(track)
    summary["design_effect"] = design_effects(timed, tuple(step_names))
    if device is not None:
        summary["device"], found = device_findings(timed, device, tuple(step_names))
        stalls += found
    return summary, stalls, track_json(track)


def time_summary(track: Any) -> dict[str, Any]:
    """What a page and the API say of a capture's time: whether it has one, why not,
    and its clock (host epoch seconds)."""
    if not track.exact:
        return {"available": False, "reason": track.reason}
    duration = track.end - track.start
    return {
        "available": True,
        "reason": None,
        "start": track.start,
        "end": track.end,
        "rate": track.rate,
        "rounds": track.rounds,
        "bucket_s": default_bucket(duration, track.rate),
        "untimed": [t.name for t in track.untimed()],
    }


NO_TIME = {
    Capture.Kind.IMPORT: "an imported file keeps no time: py-spy's raw format has none",
    Capture.Kind.RECORD: "taken before flamedeck kept time, or the host gave no clock",
}


def stored_step_threads(stats: dict[str, Any], names: Any) -> dict[str, Any]:
    """The threads the findings judged and their states added up, stored so the page
    shows them as the headline (not guessed again when it is viewed)."""
    chosen = step_threads(capture_threads(stats), names)
    pooled = pool(chosen.threads)
    states = [
        {"state": state, "samples": n, "percent": round(100 * n / pooled.samples, 2)}
        for state in pyspy.STATES
        if (n := pooled.states.get(state, 0))
    ]
    return {
        "tids": [str(t["tid"]) for t in chosen.threads],
        "names": [t["name"] or str(t["tid"]) for t in chosen.threads],
        "detected_by": chosen.detected_by,
        "samples": pooled.samples,
        "states": states,
    }


def _options(capture: Capture) -> pyspy.AnalysisOptions:
    return pyspy.AnalysisOptions(
        keywords=keywords_for(capture.keyword_set),
        max_nodes=settings.FLAMEDECK_FLAMEGRAPH_NODES,
        state_rules=state_rules_configured(),
        library=capture.run.library_entries if capture.run_id else (),
        # py-spy's --gil keeps only the GIL holder: blocked threads are missing then too.
        idle=capture.idle and not capture.gil if capture.kind == Capture.Kind.RECORD else None,
    )


def _analyze_samples(
    capture: Capture, claim: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], bytes]:
    if not capture.raw_file:
        raise pyspy.ProfileError("py-spy wrote no samples")
    limits = {
        "time_limit_s": analysis_time_limit_s(capture.raw_size),
        "memory_mb": settings.FLAMEDECK_ANALYSIS_MEMORY_MB,
    }
    steps = capture.run.step_thread_names if capture.run_id else ()
    title = f"capture #{capture.pk} {capture.target_label}"  # speedscope shows it
    log_text = read_log(capture)
    beat = lambda: capture_analysis_beat(capture_id=capture.pk, claim=claim)  # noqa: E731
    options = _options(capture)
    pyspy.prepare_analysis(options)  # once a worker process: each child inherits it
    try:
        with local_copy(capture.raw_file) as path, _track_copy(capture) as track_path:
            args = (path, options, log_text, capture.raw_format, steps, title, track_path,
                    capture.gpu_samples)  # fmt: skip
            (outputs, timed), usage = budget.run_bounded(all_outputs, args, on_tick=beat, **limits)
    except budget.BudgetExceeded:
        _note_usage(capture, {**limits, "stopped": True})
        raise
    _note_usage(capture, {**limits, "seconds": usage.seconds, "peak_mb": usage.peak_mb})
    stats = outputs[0]
    if capture.time_file:
        summary, stalls, track = timed
        if "device" in summary:
            stats["device"] = summary.pop("device")
        stats["time"] = summary
        stats["findings"] = [*stats.get("findings", []), *stalls]
        replace_file(capture.time_file, "time.json.gz", gz(track.encode()))
    else:
        stats["time"] = {
            "available": False,
            "reason": NO_TIME.get(capture.kind, NO_TIME[Capture.Kind.RECORD]),
        }
    return outputs


class StateRulesError(Exception):
    """FLAMEDECK_STATE_RULES names a file the engine cannot use (the message says why)."""


_STATE_RULES: dict[tuple[str, float], pyspy.StateRules] = {}


def state_rules_configured() -> pyspy.StateRules | None:
    """The rules of FLAMEDECK_STATE_RULES (reloaded when the file changes), or None."""
    path = settings.FLAMEDECK_STATE_RULES
    if not path:
        return None
    try:
        key = (path, os.stat(path).st_mtime)
        if key not in _STATE_RULES:
            _STATE_RULES.clear()
            _STATE_RULES[key] = pyspy.load_state_rules(path)
    except OSError as exc:
        reason = f"cannot read it ({exc.strerror})"
        raise StateRulesError(f"FLAMEDECK_STATE_RULES={path}: {reason}.") from None
    except pyspy.ProfileError as exc:
        raise StateRulesError(f"FLAMEDECK_STATE_RULES cannot be used: {exc}.") from None
    return _STATE_RULES[key]


def _note_usage(capture: Capture, usage: dict[str, Any]) -> None:
    """What the analysis used, under `progress.analysis` (the budget's figures)."""
    current = Capture.objects.values_list("progress", flat=True).get(pk=capture.pk) or {}
    Capture.objects.filter(pk=capture.pk).update(progress={**current, "analysis": usage})


def _analyze_dump(capture: Capture) -> dict[str, Any]:
    with capture.raw_file.open("rb") as fh:
        text = gzip.decompress(fh.read()).decode("utf-8", "replace")
    series = pyspy.parse_dump_series(text)
    if series is None:
        return {"format": "dump", "dump_threads": pyspy.parse_dump(text), "total_samples": 0}
    # A whole-job dump's series (profiles.jobs.dumps): the page shows the last dump.
    return {
        "format": "dump",
        "dump_threads": series[-1][1],
        "dump_series": [{"at": at, "threads": threads} for at, threads in series],
        "total_samples": 0,
    }
