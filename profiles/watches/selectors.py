"""Reads for the watch pages, the API and the capture and run page panels."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db.models import Case, F, Prefetch, Q, QuerySet, Value, When, Window
from django.db.models.functions import RowNumber

from profiles.models import Capture
from profiles.pyspy.compare import row_label, step_view, tracked_counts
from profiles.watches.judging import SERIES_CAPTURES, TRACKED_FRAMES, watches_for
from profiles.watches.messages import alert_line, row_line
from profiles.watches.models import Alert, Judgement, Watch
from runs.permissions import can_administer_hosts

ALERTS_SHOWN = 50
JUDGEMENTS_SHOWN = 60


class SeriesPoint(TypedDict):
    capture: int
    percent: float
    verdict: str


class WatchSeries(TypedDict):
    """A tracked share across the baseline (first point) and the judged captures."""

    key: str
    label: str
    points: list[SeriesPoint]
    shift: dict[str, Any] | None


def watches() -> QuerySet[Watch]:
    return Watch.objects.select_related("run", "baseline", "process__host").prefetch_related(
        "targets"
    )


def last_judgement(watch: Watch) -> Judgement | None:
    return watch.judgements.select_related("capture").order_by("-judged_at", "-pk").first()


def _judgement_json(judgement: Judgement | None) -> dict[str, Any] | None:
    if judgement is None:
        return None
    return {
        "capture": judgement.capture_id,
        "baseline": judgement.baseline_id,
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "rows_compared": judgement.rows_compared,
        "scope": judgement.options.get("scope", ""),
        "moved": [{**row, "line": row_line(row, judgement.baseline_id)} for row in judgement.moved],
        "snoozed": judgement.snoozed,
        "judged_at": judgement.judged_at,
    }


def _alert_json(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.pk,
        "key": alert.key,
        "label": alert.label,
        "direction": "up" if alert.direction > 0 else "down",
        "source": alert.source,
        "status": alert.status,
        "line": alert_line(alert, alert.judgement.baseline_id if alert.judgement else None),
        "capture": alert.judgement.capture_id if alert.judgement else None,
        "opened_at": alert.opened_at,
        "closed_at": alert.closed_at,
        "deliveries": [
            {
                "target": d.target_name,
                "status": d.status,
                "attempts": d.attempts,
                "error": d.error,
                "sent_at": d.sent_at,
            }
            for d in (alert.judgement.deliveries.all() if alert.judgement else [])
        ],
    }


def watch_alerts(watch: Watch, limit: int = ALERTS_SHOWN) -> list[Alert]:
    return list(
        watch.alerts.select_related("judgement").prefetch_related("judgement__deliveries")[:limit]
    )


def targets_json(watch: Watch, user: Any) -> list[dict[str, str]]:
    """A watch's notification targets as `user` may see them: by name; to host admins
    with the URL masked too (profiles.watches.notify.mask_url), never in full."""
    admin = can_administer_hosts(user)
    return [
        {"name": t.name, **({"url": t.masked_url} if admin else {})} for t in watch.targets.all()
    ]


def watch_json(watch: Watch, *, alerts: bool = False, user: Any = None) -> dict[str, Any]:
    """A watch as the API gives it to `user`; its targets by `targets_json`."""
    body = {
        "id": watch.pk,
        "url": watch.get_absolute_url(),
        "run": {"id": watch.run_id, "name": watch.run.name},
        "role": watch.role,
        "all_roles": watch.all_roles,
        "process": watch.process_id,
        "baseline": watch.baseline_id,
        "min_effect_points": watch.min_effect_points,
        "min_samples": watch.min_samples,
        "notify": targets_json(watch, user),
        "snoozed_until": watch.snoozed_until if watch.snoozed else None,
        "created_at": watch.created_at,
        "last": _judgement_json(last_judgement(watch)),
        "shifts": [s for s in watch.shifts if s.get("significant")],
        "open_alerts": watch.alerts.filter(status=Alert.Status.OPEN).count(),
    }
    if alerts:
        body["alerts"] = [_alert_json(a) for a in watch_alerts(watch)]
    return body


def watch_series(watch: Watch, *, keys: list[str] | None = None) -> list[WatchSeries]:
    """Tracked shares across the current baseline (the first point) and the captures
    judged against it, as the series test saw them; `keys` limits which."""
    judged = list(
        watch.judgements.filter(
            baseline_id=watch.baseline_id,
            verdict__in=[Judgement.Verdict.CHANGED, Judgement.Verdict.UNCHANGED],
        ).order_by("-capture__queued_at", "-capture_id")[:SERIES_CAPTURES]
    )[::-1]
    baseline = Capture.objects.filter(pk=watch.baseline_id).only("pk", "stats").first()
    if not judged or baseline is None:
        return []
    view = step_view(baseline.stats)
    first = tracked_counts(view, view, TRACKED_FRAMES)
    points = [(baseline.pk, first, "baseline")] + [
        (j.capture_id, j.shares, j.verdict) for j in judged
    ]
    shifts = {s["key"]: s for s in watch.shifts}
    wanted = keys if keys is not None else list(first)
    return [
        {
            "key": key,
            "label": row_label(_split(key)),
            "points": [
                {"capture": capture, "percent": _pct(shares[key]), "verdict": verdict}
                for capture, shares, verdict in points
                if key in shares
            ],
            "shift": shifts.get(key),
        }
        for key in wanted
    ]


def _split(key: str) -> dict[str, str]:
    kind, _, name = key.partition(":")
    return {"kind": kind, "name": name}


def _pct(counts: list[int]) -> float:
    return round(100 * counts[0] / counts[1], 2) if counts[1] else 0.0


def headline_key(watch: Watch) -> str | None:
    """The row a watch's sparkline follows: its newest open alert, else its most
    significant shift, else its biggest tracked share."""
    alert = watch.alerts.filter(status=Alert.Status.OPEN).first()
    if alert is not None:
        return alert.key
    if watch.shifts:
        return watch.shifts[0]["key"]
    last = watch.judgements.filter(baseline_id=watch.baseline_id).order_by("-judged_at").first()
    if last is None or not last.shares:
        return None
    return max(last.shares, key=lambda k: (_pct(last.shares[k]), k))


def capture_judgements(capture: Capture) -> list[dict[str, Any]]:
    """Each watch's verdict on this capture, with the lines of the rows that moved."""
    found = capture.judgements.select_related("watch__run").order_by("watch_id")
    return [
        {
            "watch": j.watch,
            "judgement": j,
            "lines": [row_line(row, j.baseline_id) for row in j.moved],
        }
        for j in found
    ]


def watches_of_rank(capture: Capture) -> list[Watch]:
    return list(watches_for(capture).select_related("baseline"))


def run_watch_panel(run_id: int, processes: list[Any]) -> dict[str, Any]:
    """The run page's watches in one query: per rank (a role, or a process without one)
    its watch or the latest done capture that could be its baseline; and the run's
    all-roles watch, if it has one."""
    watches = list(
        Watch.objects.filter(run_id=run_id)
        .select_related("baseline")
        .prefetch_related(Prefetch("judgements", queryset=Judgement.objects.order_by("-judged_at")))
    )
    watched = {
        (w.role, w.process_id if not w.role else None): w for w in watches if not w.all_roles
    }
    ranks: dict[tuple, dict[str, Any]] = {}
    for p in processes:
        key = (p.role, None if p.role else p.pk)
        entry = ranks.setdefault(key, {"role": p.role, "process": p, "pids": []})
        entry["pids"].append(p.pid)
    latest = _latest_done(run_id, list(ranks))
    for key, entry in ranks.items():
        entry["watch"] = watched.get(key)
        entry["latest"] = latest.get(key)
    every_role = next((w for w in watches if w.all_roles), None)
    return {"ranks": list(ranks.values()), "all_roles": every_role}


def _latest_done(run_id: int, keys: list[tuple]) -> dict[tuple, Capture]:
    """Per rank key, (role, None) or ("", process id): its latest done capture (not a
    dump), in one query whatever the number of ranks (a window per rank)."""
    if not keys:
        return {}
    roles = [role for role, _ in keys if role]
    loose = [pk for role, pk in keys if not role]
    rank = Case(When(process__role="", then=F("process_id")), default=Value(None))
    newest = Window(
        RowNumber(),
        partition_by=[F("process__role"), rank],
        order_by=[F("queued_at").desc(), F("pk").desc()],
    )
    rows = (
        Capture.objects.filter(run_id=run_id, status=Capture.Status.DONE)
        .filter(Q(process__role__in=roles) | Q(process__role="", process_id__in=loose))
        .exclude(kind=Capture.Kind.DUMP)
        .only("pk", "queued_at", "process_id")
        .annotate(role=F("process__role"), newest=newest)
        .filter(newest=1)
    )
    return {(c.role, None if c.role else c.process_id): c for c in rows}
