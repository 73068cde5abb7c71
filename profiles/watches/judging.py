"""The worker side of the watches: judge a done capture against every watch of its
rank, follow the series, open and close alerts, and write the messages to send.

Called by `watch_tasks.judge_capture`; returns the deliveries the task then sends.
Each watch is judged in its own transaction with its row locked, so two captures of
one rank finishing together never open the same alert twice.

A watch judges the step threads (pyspy.comparable.step_view), as the findings do, and
a capture whose py-spy settings move shares (idle, native, gil, threads, subprocesses,
a rate over 2× apart) is stored as not comparable, never judged. An all-roles watch
judges each rank of a later whole-job capture against the baseline group's rank of
the same role, and writes one message once every rank of the group is judged.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from profiles.models import Capture
from profiles.pyspy import compare as comparing
from profiles.pyspy.compare import lag_warnings
from profiles.pyspy.stats import series_shifts
from profiles.watches.messages import (
    cannot_judge_compose,
    group_message_compose,
    message_compose,
)
from profiles.watches.models import Alert, Delivery, Judgement, Watch

log = logging.getLogger(__name__)
SERIES_CAPTURES = 60
TRACKED_FRAMES = 10
SHIFTS_KEPT = 12
Verdict = Judgement.Verdict
CANNOT_JUDGE = (Verdict.TOO_FEW, Verdict.NOT_COMPARABLE, Verdict.NO_BASELINE)
BASELINE_GONE = "the baseline capture was deleted: choose a new baseline on the watch's page"


def judge_options(watch: Watch) -> comparing.JudgeOptions:
    return comparing.JudgeOptions(
        min_effect_points=watch.min_effect_points, min_samples=watch.min_samples
    )


def watches_for(capture: Capture) -> QuerySet[Watch]:
    """The watches of the capture's rank: its process's role (in any launch of the
    run), or the process itself; and the run's all-roles watch for a whole-job capture."""
    if capture.run_id is None or capture.process_id is None:
        return Watch.objects.none()
    role = capture.process.role
    rank = Q(role=role) if role else Q(role="", process_id=capture.process_id)
    rank &= Q(all_roles=False)
    if capture.group_id is not None and capture.kind == Capture.Kind.RECORD:
        rank |= Q(all_roles=True)
    # A watch whose baseline is gone is judged too: it says why it cannot judge.
    return Watch.objects.filter(rank, run_id=capture.run_id)


def capture_settings(capture: Capture) -> dict[str, Any]:
    """The py-spy settings that move shares, as far as they are known: all of them for
    a recording; for an import only what its log or samples say (rate, idle)."""
    if capture.kind == Capture.Kind.RECORD:
        names = (*comparing.SHARE_SETTINGS, "rate")
        return {name: getattr(capture, name) for name in names}
    stats = capture.stats or {}
    known = {"rate": (stats.get("lag") or {}).get("requested_rate")}
    if stats.get("idle_included") is not None:
        known["idle"] = stats["idle_included"]
    return {k: v for k, v in known.items() if v is not None}


def baseline_for(watch: Watch, capture: Capture) -> Capture | None:
    """The watch's baseline; for an all-roles watch the baseline group's done capture of
    the capture's role."""
    if not watch.all_roles:
        return Capture.objects.filter(pk=watch.baseline_id).first()
    group_id = Capture.objects.filter(pk=watch.baseline_id).values_list("group_id", flat=True)
    return (
        Capture.objects.filter(
            group_id__in=group_id, process__role=capture.process.role, status=Capture.Status.DONE
        )
        .exclude(group_id=None)
        .order_by("pk")
        .first()
    )


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
    judged = _judge_pair(watch, capture)
    if judged is None:
        return []
    judgement, alerts = judged
    if judgement.verdict in CANNOT_JUDGE:
        return _cannot_judge_deliveries(watch, judgement)
    if watch.all_roles:
        return _group_deliveries(watch, judgement)
    return _deliveries(watch, judgement, alerts) if alerts else []


def _judge_pair(watch: Watch, capture: Capture) -> tuple[Judgement, list[Alert]] | None:
    """Judge the capture against its baseline: the stored judgement and the alerts it
    opened, or None when the capture is not later than the baseline."""
    if watch.baseline_id is None:
        return _store(watch, capture, None, verdict=Verdict.NO_BASELINE, reason=BASELINE_GONE), []
    baseline = baseline_for(watch, capture)
    if watch.all_roles and baseline is None:
        reason = f"the baseline whole-job capture has no {capture.process.role or 'such rank'}"
        return _store(watch, capture, None, verdict=Verdict.NO_BASELINE, reason=reason), []
    if baseline is None or not _later_than_baseline(capture, baseline):
        return None
    if not (baseline.stats or {}).get("total_samples"):
        reason = "the baseline has no samples"
        return _store(watch, capture, baseline, verdict=Verdict.NO_BASELINE, reason=reason), []
    mismatch = comparing.settings_mismatch(capture_settings(baseline), capture_settings(capture))
    if mismatch:
        return _store(watch, capture, baseline, verdict=Verdict.NOT_COMPARABLE, reason=mismatch), []
    views = comparing.pair_views(baseline.stats, capture.stats)
    result = comparing.judge(*views, judge_options(watch))
    judgement = _store_result(watch, capture, baseline, result, views)
    if result["verdict"] == comparing.TOO_FEW:
        return judgement, []
    aliases, role = _canonical_keys(result["rows"]), capture.process.role
    shifts = [] if watch.all_roles else _series_shifts(watch, baseline)
    _close_returned(watch, result["rows"], aliases, shifts, role)
    if watch.snoozed:
        Judgement.objects.filter(pk=judgement.pk).update(snoozed=True)
        return judgement, []
    series = _series_candidates(shifts, aliases, watch.min_effect_points)
    return judgement, _open_alerts(watch, judgement, result["moved"], series, role)


def _store(watch: Watch, capture: Capture, baseline: Capture | None, **fields: Any) -> Judgement:
    """Store (or replace, on a re-analysis) the watch's judgement of the capture."""
    cleared = {"moved": [], "shares": {}, "rows_compared": 0, "options": {}, "snoozed": False}
    judgement, _ = Judgement.objects.update_or_create(
        watch=watch,
        capture=capture,
        defaults={"baseline": baseline, "judged_at": timezone.now(), **cleared, **fields},
    )
    return judgement


def _store_result(
    watch: Watch,
    capture: Capture,
    baseline: Capture,
    result: comparing.Judgement,
    views: tuple[dict[str, Any], dict[str, Any]],
) -> Judgement:
    lag = [note["side"] for note in lag_warnings(baseline.stats, capture.stats)]
    reason = result["reason"]
    if lag:
        reason += f"; py-spy fell behind on the {' and the '.join(lag)}: shares may be biased"
    verdict = {
        comparing.CHANGED: Verdict.CHANGED,
        comparing.UNCHANGED: Verdict.UNCHANGED,
        comparing.TOO_FEW: Verdict.TOO_FEW,
    }[result["verdict"]]
    return _store(
        watch,
        capture,
        baseline,
        verdict=verdict,
        reason=reason,
        rows_compared=result["rows_compared"],
        moved=result["moved"],
        options={**result["options"], "scope": views[1]["scope"]},
        shares=comparing.tracked_counts(*views, TRACKED_FRAMES),
        snoozed=False,
    )


def _canonical_keys(rows: list[comparing.Row]) -> dict[str, comparing.Row]:
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
    view = comparing.step_view(baseline.stats)
    points = [(baseline.pk, comparing.tracked_counts(view, view))]
    points += [(j.capture_id, _rekeyed(j.shares)) for j in reversed(list(judged))]
    series = {
        key: [100 * shares[key][0] / shares[key][1] for _, shares in points]
        for key in points[0][1]
        if all(key in shares and shares[key][1] for _, shares in points)
    }
    found = series_shifts(
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


def _rekey(key: str) -> str:
    """A stored row key as rows are keyed now (comparing.row_key): judgements and
    alerts stored before frames had one name meet today's rows."""
    kind, _, name = key.partition(":")
    return comparing.row_key(kind, name)


def _rekeyed(shares: dict[str, Any]) -> dict[str, Any]:
    return {_rekey(key): value for key, value in shares.items()}


def _series_candidates(
    shifts: list[dict[str, Any]], aliases: dict[str, comparing.Row], min_effect: float
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
    rows: list[comparing.Row],
    aliases: dict[str, comparing.Row],
    shifts: list[dict[str, Any]],
    role: str,
) -> None:
    """Resolve open alerts whose share came back: the change in the alert's direction
    is under half the minimum effect, and the series no longer flags it."""
    for alert in _open_of(watch, role):
        row = aliases.get(_rekey(alert.key))
        back = row is None or comparing.returned(row, alert.direction, watch.min_effect_points)
        if back and not _flagged(shifts, _rekey(alert.key), alert.direction):
            alert.status, alert.closed_at = Alert.Status.RESOLVED, timezone.now()
            alert.save(update_fields=["status", "closed_at"])


def _open_alerts(
    watch: Watch,
    judgement: Judgement,
    moved: list[comparing.Row],
    series: list[dict[str, Any]],
    role: str,
) -> list[Alert]:
    """One alert per row and direction (per role in an all-roles watch): none while one
    is open for it."""
    open_now = {(_rekey(a.key), a.direction) for a in _open_of(watch, role)}
    candidates = [(r["key"], r, Alert.Source.PAIR) for r in moved]
    candidates += [(s["key"], s, Alert.Source.SERIES) for s in series]
    alerts = []
    for key, row, source in candidates:
        direction = 1 if row["delta_points"] > 0 else -1
        if (key, direction) in open_now:
            continue
        open_now.add((key, direction))
        kind, _, name = key.partition(":")
        label = comparing.row_label({"kind": kind, "name": name})[:300]
        alerts.append(
            Alert.objects.create(
                watch=watch,
                judgement=judgement,
                key=key,
                role=role,
                label=label,
                direction=direction,
                source=source,
                row=dict(row),
            )
        )
    return alerts


def _open_of(watch: Watch, role: str) -> QuerySet[Alert]:
    alerts = watch.alerts.filter(status=Alert.Status.OPEN)
    return alerts.filter(role=role) if watch.all_roles else alerts


def _deliveries(
    watch: Watch, judgement: Judgement, alerts: list[Alert], composed: tuple[str, str] = ()
) -> list[int]:
    title, body = composed or message_compose(watch=watch, judgement=judgement, alerts=alerts)
    return [
        Delivery.objects.create(
            judgement=judgement, target=target, target_name=target.name, title=title, body=body
        ).pk
        for target in watch.targets.all()
    ]


def _cannot_judge_deliveries(watch: Watch, judgement: Judgement) -> list[int]:
    """One message when a watch cannot judge (too few samples, settings that differ, no
    baseline): the first time since it last judged a capture, not at every capture."""
    if watch.snoozed or not watch.targets.exists():
        return []
    last = (
        watch.judgements.filter(verdict__in=[Verdict.CHANGED, Verdict.UNCHANGED])
        .order_by("-judged_at")
        .values_list("judged_at", flat=True)
        .first()
    )
    said = Delivery.objects.filter(judgement__watch=watch, judgement__verdict=judgement.verdict)
    if last is not None:
        said = said.filter(created_at__gt=last)
    if said.exists():
        return []
    composed = cannot_judge_compose(watch=watch, judgement=judgement)
    return _deliveries(watch, judgement, [], composed)


# --- all roles: one message per whole-job capture ----------------------------------------

UNSETTLED = (Capture.Status.QUEUED, Capture.Status.RUNNING, Capture.Status.PARSING)


def _group_deliveries(watch: Watch, judgement: Judgement) -> list[int]:
    """Once every rank of the judgement's whole-job capture is settled and judged, one
    message with the alerts all its ranks opened (none when they opened none, or when
    a message for the group was written already; the watch's row lock orders this)."""
    group_id = judgement.capture.group_id
    ranks = Capture.objects.filter(group_id=group_id, run_id=watch.run_id).exclude(
        kind=Capture.Kind.DUMP
    )
    if ranks.filter(status__in=UNSETTLED).exists():
        return []
    judged = watch.judgements.filter(capture__group_id=group_id)
    due = {
        c.pk
        for c in ranks.filter(status=Capture.Status.DONE).only("pk", "stats")
        if (c.stats or {}).get("total_samples")
    }
    if due - set(judged.values_list("capture_id", flat=True)):
        return []
    if Delivery.objects.filter(judgement__in=judged).exists():
        return []
    alerts = list(
        Alert.objects.filter(watch=watch, judgement__in=judged)
        .select_related("judgement__capture__process")
        .order_by("role", "pk")
    )
    if not alerts:
        return []
    composed = group_message_compose(watch=watch, judgement=judgement, alerts=alerts)
    return _deliveries(watch, judgement, alerts, composed)
