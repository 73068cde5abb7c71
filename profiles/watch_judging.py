"""The worker side of the watches: judge a done capture against every watch of its
rank, follow the series, open and close alerts, and write the messages to send.

Called by `watch_tasks.judge_capture`; returns the deliveries the task then sends.
Each watch is judged in its own transaction with its row locked, so two captures of
one rank finishing together never open the same alert twice.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from .models import Capture
from .pyspy import changepoint, regression
from .pyspy.compare import lag_warnings
from .watch_messages import message_compose
from .watch_models import Alert, Delivery, Judgement, Watch

log = logging.getLogger(__name__)
SERIES_CAPTURES = 60
TRACKED_FRAMES = 10
SHIFTS_KEPT = 12
Verdict = Judgement.Verdict


def judge_options(watch: Watch) -> regression.JudgeOptions:
    return regression.JudgeOptions(
        min_effect_points=watch.min_effect_points, min_samples=watch.min_samples
    )


def watches_for(capture: Capture) -> QuerySet[Watch]:
    """The watches of the capture's rank: its process's role, or the process itself."""
    if capture.run_id is None or capture.process_id is None:
        return Watch.objects.none()
    role = capture.process.role
    rank = Q(role=role) if role else Q(role="", process_id=capture.process_id)
    return Watch.objects.filter(rank, run_id=capture.run_id, baseline__isnull=False)


def capture_judge(*, capture_id: int) -> list[int]:
    """Judge a done capture against each watch of its rank; the deliveries to send."""
    capture = (
        Capture.objects.select_related("run", "process")
        .filter(pk=capture_id, status=Capture.Status.DONE)
        .first()
    )
    if capture is None or not (capture.stats or {}).get("total_samples"):
        log.info("capture %s is not a done capture with samples; nothing to judge", capture_id)
        return []
    deliveries: list[int] = []
    for watch_id in watches_for(capture).values_list("pk", flat=True):
        with transaction.atomic():
            watch = Watch.objects.select_for_update().get(pk=watch_id)
            deliveries += _judge(watch, capture)
    return deliveries


def _later_than_baseline(capture: Capture, baseline: Capture) -> bool:
    return (capture.queued_at, capture.pk) > (baseline.queued_at, baseline.pk)


def _judge(watch: Watch, capture: Capture) -> list[int]:
    baseline = Capture.objects.filter(pk=watch.baseline_id).first()
    if baseline is None or not _later_than_baseline(capture, baseline):
        return []
    if not (baseline.stats or {}).get("total_samples"):
        _store(
            watch,
            capture,
            baseline,
            verdict=Verdict.NO_BASELINE,
            reason="the baseline has no samples",
        )
        return []
    result = regression.judge(baseline.stats, capture.stats, judge_options(watch))
    judgement = _store_result(watch, capture, baseline, result)
    if result["verdict"] == regression.TOO_FEW:
        return []
    aliases = _canonical_keys(result["rows"])
    shifts = _series_shifts(watch, baseline)
    _close_returned(watch, result["rows"], aliases, shifts)
    if watch.snoozed:
        Judgement.objects.filter(pk=judgement.pk).update(snoozed=True)
        return []
    series = _series_candidates(shifts, aliases, watch.min_effect_points)
    alerts = _open_alerts(watch, judgement, result["moved"], series)
    return _deliveries(watch, judgement, alerts) if alerts else []


def _store(watch: Watch, capture: Capture, baseline: Capture, **fields: Any) -> Judgement:
    judgement, _ = Judgement.objects.update_or_create(
        watch=watch,
        capture=capture,
        defaults={"baseline": baseline, "judged_at": timezone.now(), **fields},
    )
    return judgement


def _store_result(
    watch: Watch, capture: Capture, baseline: Capture, result: regression.Judgement
) -> Judgement:
    lag = [note["side"] for note in lag_warnings(baseline.stats, capture.stats)]
    reason = result["reason"]
    if lag:
        reason += f"; py-spy fell behind on the {' and the '.join(lag)}: shares may be biased"
    verdict = {
        regression.CHANGED: Verdict.CHANGED,
        regression.UNCHANGED: Verdict.UNCHANGED,
        regression.TOO_FEW: Verdict.TOO_FEW,
    }[result["verdict"]]
    return _store(
        watch,
        capture,
        baseline,
        verdict=verdict,
        reason=reason,
        rows_compared=result["rows_compared"],
        moved=result["moved"],
        options=result["options"],
        shares=regression.tracked_counts(baseline.stats, capture.stats, TRACKED_FRAMES),
        snoozed=False,
    )


def _canonical_keys(rows: list[regression.Row]) -> dict[str, regression.Row]:
    """Every key a row answers to (its own and its aliases) → the row."""
    return {key: row for row in rows for key in (row["key"], *row["aliases"])}


# --- the series -------------------------------------------------------------------------


def _series_shifts(watch: Watch, baseline: Capture) -> list[dict[str, Any]]:
    """Run the change-point test over the baseline and the watch's judged captures
    since it (the latest SERIES_CAPTURES), and keep the result on the watch."""
    judged = (
        watch.judgements.filter(baseline=baseline, verdict__in=[Verdict.CHANGED, Verdict.UNCHANGED])
        .select_related("capture")
        .order_by("-capture__queued_at", "-capture_id")[:SERIES_CAPTURES]
    )
    points = [(baseline.pk, regression.tracked_counts(baseline.stats, baseline.stats))]
    points += [(j.capture_id, j.shares) for j in reversed(list(judged))]
    series = {
        key: [100 * shares[key][0] / shares[key][1] for _, shares in points]
        for key in points[0][1]
        if all(key in shares and shares[key][1] for _, shares in points)
    }
    found = changepoint.series_shifts(
        series,
        min_effect_points=watch.min_effect_points,
        false_discovery_rate=judge_options(watch).false_discovery_rate,
        seed=watch.pk,
    )
    shifts = [
        {**s, "capture": points[s["index"]][0], "baseline_percent": round(series[s["key"]][0], 2)}
        for s in found[:SHIFTS_KEPT]
    ]
    Watch.objects.filter(pk=watch.pk).update(shifts=shifts)
    watch.shifts = shifts
    return shifts


def _series_candidates(
    shifts: list[dict[str, Any]], aliases: dict[str, regression.Row], min_effect: float
) -> list[dict[str, Any]]:
    """Significant shifts whose latest level is still the minimum effect away from the
    baseline in the shift's direction (a share that came back is no news)."""
    found = []
    for shift in shifts:
        direction = 1 if shift["delta_points"] > 0 else -1
        away = direction * (shift["after_mean"] - shift["baseline_percent"])
        if shift["significant"] and away >= min_effect:
            row = aliases.get(shift["key"])
            found.append({**shift, "key": row["key"] if row else shift["key"]})
    return found


def _flagged(shifts: list[dict[str, Any]], key: str, direction: int) -> bool:
    return any(
        s["significant"] and s["key"] == key and direction * s["delta_points"] > 0 for s in shifts
    )


# --- alerts -----------------------------------------------------------------------------


def _close_returned(
    watch: Watch,
    rows: list[regression.Row],
    aliases: dict[str, regression.Row],
    shifts: list[dict[str, Any]],
) -> None:
    """Resolve open alerts whose share came back: the change in the alert's direction
    is under half the minimum effect, and the series no longer flags it."""
    for alert in watch.alerts.filter(status=Alert.Status.OPEN):
        row = aliases.get(alert.key)
        back = row is None or regression.returned(row, alert.direction, watch.min_effect_points)
        if back and not _flagged(shifts, alert.key, alert.direction):
            alert.status, alert.closed_at = Alert.Status.RESOLVED, timezone.now()
            alert.save(update_fields=["status", "closed_at"])


def _open_alerts(
    watch: Watch,
    judgement: Judgement,
    moved: list[regression.Row],
    series: list[dict[str, Any]],
) -> list[Alert]:
    """One alert per row and direction: none while one is open for it."""
    open_now = {(a.key, a.direction) for a in watch.alerts.filter(status=Alert.Status.OPEN)}
    candidates = [(r["key"], r, Alert.Source.PAIR) for r in moved]
    candidates += [(s["key"], s, Alert.Source.SERIES) for s in series]
    alerts = []
    for key, row, source in candidates:
        direction = 1 if row["delta_points"] > 0 else -1
        if (key, direction) in open_now:
            continue
        open_now.add((key, direction))
        kind, _, name = key.partition(":")
        label = regression.row_label({"kind": kind, "name": name})[:300]
        alerts.append(
            Alert.objects.create(
                watch=watch,
                judgement=judgement,
                key=key,
                label=label,
                direction=direction,
                source=source,
                row=dict(row),
            )
        )
    return alerts


def _deliveries(watch: Watch, judgement: Judgement, alerts: list[Alert]) -> list[int]:
    title, body = message_compose(watch=watch, judgement=judgement, alerts=alerts)
    return [
        Delivery.objects.create(
            judgement=judgement, target=target, target_name=target.name, title=title, body=body
        ).pk
        for target in watch.targets.all()
    ]
