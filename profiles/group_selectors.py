"""Reads for the group page and `GET /api/groups/<id>/live/`: one row per process
(live while it runs), the process whose mix differs most (only beyond noise), and
waiting versus computing per rank when every rank sampled the same window.

Everything comes from stored stats, progress and flamegraph trees; nothing re-reads
raw samples. "Beyond noise" reuses the compare page's maths (profiles.pyspy.compare).
"""

from __future__ import annotations

from typing import Any

from profiles.pyspy import compare
from profiles.pyspy.waiting import WAIT_CATEGORIES, wait_split

from . import jobs, pipeline, selectors
from .models import Capture, CaptureGroup

MIN_TO_CROWN = 3  # "differs most" needs at least this many processes with samples
SAME_WINDOW_S = 1.0  # start skew within which ranks sampled the same moments


def group_page(group: CaptureGroup) -> dict[str, Any]:
    """Everything the group page draws, as JSON-ready data."""
    captures = selectors.group_captures(group=group)
    summary = jobs.group_summary(group)
    rows = [process_row(c) for c in captures]
    # Categories no process has samples in would be columns of zeros.
    categories = sorted({name for row in rows for name, share in row["shares"].items() if share})
    final = all(row["final"] for row in rows)
    # No verdict on a job still running: a rank that ended early would be judged
    # against ranks whose numbers are not in yet.
    differs = differs_most(captures, rows) if final else {"id": None, "state": "pending"}
    return {
        "group": group.pk,
        "run": group.run_id,
        "status": summary["status"],
        "start_skew_s": summary["start_skew_s"],
        "final": final,
        "categories": categories,
        "rows": rows,
        "differs_most": differs,
        "waiting": waiting_by_rank(captures, summary) if final else {"shown": False,
                                                                      "reason": "pending"},
        "skipped": skipped_processes(group, captures),
        # GPU timelines, once every process has ended (they arrive with the samples)
        "processes": [{"id": c.pk, "label": c.target_label, "gpu": c.gpu_samples}
                      for c in captures] if final else [],
    }  # fmt: skip


def _samples(capture: Capture) -> int:
    return int((capture.stats or {}).get("total_samples") or 0)


def process_row(capture: Capture) -> dict[str, Any]:
    """Status, elapsed, lag and samples of one process; None where there is no number."""
    progress, stats = capture.progress or {}, capture.stats or {}
    lag = stats.get("lag") or {}
    running = capture.status == Capture.Status.RUNNING
    failed = capture.status == Capture.Status.FAILED
    samples = _samples(capture) if capture.stats else None
    # Claimed, but py-spy has not said it samples yet (ssh, py-spy's attach): no
    # elapsed, lag or rounds to show, only that it is attaching.
    attaching = running and capture.sampling_started_at is None
    return {
        "id": capture.pk,
        "url": capture.get_absolute_url(),
        "label": capture.target_label,
        "role": capture.process.role if capture.process_id else "",
        "status": capture.status,
        "final": capture.is_final,
        # A failed process has no numbers, only its cause (shown on a row of its own).
        "elapsed_s": None if failed else _sampled(capture, progress, running),
        "duration_s": capture.duration,
        "behind_s": None
        if failed
        else (progress.get("behind_s") if running else lag.get("max_behind_s")),
        "samples": None if failed else samples,
        "samples_estimated": progress.get("expected_samples") if running else None,
        "attaching": attaching,
        # The live count was py-spy's rounds; the result counts samples (one per thread
        # per round, idle threads left out without --idle): the page explains a gap.
        "rounds_estimated": None if running or failed else progress.get("expected_samples"),
        "verdict": lag.get("verdict"),
        "shares": {} if failed else _shares(capture),
        "has_samples": not failed and bool(samples),
        "error": capture.error if failed else "",
        "error_cause": capture.error_cause if failed else "",
        "note": capture.note,
        "python_only": bool(progress.get("python_only")),
    }


def _shares(capture: Capture) -> dict[str, float]:
    return {c["category"]: c["percent"] for c in (capture.stats or {}).get("categories", [])}


def _counts(capture: Capture) -> dict[str, int]:
    return {c["category"]: int(c["samples"]) for c in (capture.stats or {}).get("categories", [])}


def differs_most(captures: list[Capture], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The process whose category mix differs most from the others, named only when
    that is beyond noise: in some category its share is outside every other process's
    range AND the 95% Newcombe interval of (its share - the others' pooled share)
    excludes zero. Needs MIN_TO_CROWN processes with samples."""
    data = [(c, row) for c, row in zip(captures, rows, strict=True) if row["has_samples"]]
    if len(data) < MIN_TO_CROWN:
        return {"id": None, "state": "too_few", "with_samples": len(data)}
    shares = [row["shares"] for _, row in data]
    names = sorted({name for share in shares for name in share})
    distances = [_distance(i, shares, names) for i in range(len(data))]
    best = max(range(len(data)), key=lambda i: distances[i])
    reasons = [r for name in names if (r := _beyond_noise(best, data, name)) is not None]
    reasons.sort(key=lambda r: -abs(r["delta_points"]))
    label = data[best][1]["label"]
    if not reasons:
        return {"id": None, "state": "within_noise", "closest": label,
                "distance": round(distances[best], 1), "with_samples": len(data)}  # fmt: skip
    return {"id": data[best][0].pk, "state": "differs", "label": label,
            "distance": round(distances[best], 1), "reasons": reasons[:3],
            "with_samples": len(data)}  # fmt: skip


def _distance(index: int, shares: list[dict[str, float]], names: list[str]) -> float:
    others = [s for i, s in enumerate(shares) if i != index]
    mean = {n: sum(o.get(n, 0.0) for o in others) / len(others) for n in names}
    return sum(abs(shares[index].get(n, 0.0) - mean[n]) for n in names)


def _beyond_noise(best: int, data: list, name: str) -> dict[str, Any] | None:
    counts = [(_counts(c).get(name, 0), _samples(c)) for c, _ in data]
    own, others = counts[best], [x for i, x in enumerate(counts) if i != best]
    other_shares = [s / t for s, t in others]
    share = own[0] / own[1]
    if min(other_shares) <= share <= max(other_shares):
        return None
    pooled = (sum(s for s, _ in others), sum(t for _, t in others))
    if compare.change_verdict(pooled, own) != compare.REAL_CHANGE:
        return None
    low, high = compare.newcombe_interval(pooled, own)
    return {"category": name, "percent": round(100 * share, 1),
            "others_percent": round(100 * pooled[0] / pooled[1], 1),
            "delta_points": round(100 * (share - pooled[0] / pooled[1]), 1),
            "delta_low": round(100 * low, 1), "delta_high": round(100 * high, 1)}  # fmt: skip


def same_window(skew_s: float) -> bool:
    """Whether the ranks sampled the same moments: every py-spy said it samples within
    SAME_WINDOW_S of the others, by its host's clock (group_pipeline), whatever the
    duration (a longer capture does not make a late start the same window)."""
    return skew_s <= SAME_WINDOW_S


def waiting_by_rank(captures: list[Capture], summary: dict[str, Any]) -> dict[str, Any]:
    """Per rank with samples: the share waiting (sync, comm, wait, ...) next to the
    share computing, most computing first; the rank the others wait for is marked
    when its wait share is below every other rank's and beyond noise."""
    with_data = [c for c in captures if _samples(c) and c.status != Capture.Status.FAILED]
    if len(with_data) < 2:
        return {"shown": False, "reason": "too_few", "with_samples": len(with_data)}
    skew = float(summary.get("start_skew_s") or 0.0)
    if not same_window(skew):
        return {"shown": False, "reason": "skew", "start_skew_s": skew}
    ranks = [r for c in with_data if (r := _wait_row(c)) is not None]
    ranks.sort(key=lambda r: (-r["compute_percent"], r["label"]))
    return {"shown": True, "categories": sorted(WAIT_CATEGORIES), "ranks": ranks,
            "straggler": _straggler(ranks)}  # fmt: skip


def _wait_row(capture: Capture) -> dict[str, Any] | None:
    tree = pipeline.read_flamegraph(capture)
    if tree is None:
        return None
    # The rules the analysis used, in their order (the first matching keyword claims a
    # frame); the stats' keyword list is sorted by samples and would lose that order.
    keywords = [(k.keyword, k.category) for k in pipeline.keywords_for(capture.keyword_set)]
    split = wait_split(tree, keywords)
    total = split["total"] or 1
    top_wait = max(
        ((n, v) for n, v in _counts(capture).items() if n in WAIT_CATEGORIES),
        key=lambda item: item[1],
        default=(None, 0),
    )
    return {
        "id": capture.pk,
        "label": capture.target_label,
        "url": capture.get_absolute_url(),
        **split,
        "wait_percent": round(100 * split["waiting"] / total, 1),
        "compute_percent": round(100 * split["computing"] / total, 1),
        "unknown_percent": round(100 * split["unknown"] / total, 1),
        "main_wait": top_wait[0] if top_wait[1] else None,
    }


def _straggler(ranks: list[dict[str, Any]]) -> int | None:
    if len(ranks) < 2:
        return None
    first, others = ranks[0], ranks[1:]
    # Against the closest other rank, not the others pooled: one peer that waits as
    # little means nobody is the straggler, however much the rest wait.
    closest = min(others, key=lambda r: r["wait_percent"])
    if first["wait_percent"] >= closest["wait_percent"]:
        return None
    verdict = compare.change_verdict(
        (closest["waiting"], closest["total"]), (first["waiting"], first["total"])
    )
    return first["id"] if verdict == compare.REAL_CHANGE else None


def skipped_processes(group: CaptureGroup, captures: list[Capture]) -> list[dict[str, Any]]:
    """Processes of the run, attached before the group, that it did not capture
    because their last check found them exited."""
    captured = {c.process_id for c in captures}
    rows = group.run.processes.select_related("host").filter(
        created_at__lte=group.created_at, alive=False
    )
    return [{"label": str(p), "checked_at": p.checked_at} for p in rows if p.pk not in captured]


def _sampled(capture: Capture, progress: dict[str, Any], running: bool) -> float | None:
    """Seconds sampled: live from py-spy's first sample, then py-spy's own span (the
    claim-to-finish time only for captures recorded before spans were kept)."""
    if running:
        return progress.get("elapsed_s")
    return progress.get("sampled_s", capture.wall_s)
