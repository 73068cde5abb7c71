"""What a watch says, and its delivery: the message text (pages show the same lines)
and one send through Apprise with the outcome recorded on the Delivery row."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from profiles.pyspy.compare import row_label
from profiles.watches import notify
from profiles.watches.models import Alert, Delivery, Judgement, Watch

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NAME_CHARS = 200
GROUP_LINES = 40
"""Alert lines in one whole-job message (64 ranks could open hundreds); the watch page
lists them all."""


def _text(value: object) -> str:
    """Frame and run names are untrusted: no control characters, bounded length."""
    text = _CONTROL.sub(" ", str(value))
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def _side(side: dict[str, Any], bounded: bool) -> str:
    if bounded:
        return f"below {side['percent']:.1f}%"
    return f"{side['percent']:.1f}% [{side['low']:.1f}–{side['high']:.1f}]"


def row_name(row: dict[str, Any]) -> str:
    """What moved in the user's words: `host sync at step (train.py:88)` (a state and its
    top user caller), `step (train.py:80)` (a function of their code and its line)."""
    label, where = row_label(row), row.get("where") or ""
    if row.get("kind") == "function" and where:
        return _text(where)
    return _text(f"{label} at {where}" if where else label)


def row_line(row: dict[str, Any], baseline_id: int | None) -> str:
    """`host sync at step (train.py:88) 3.1% [2.5–3.8] → 11.4% [10.2–12.7] since
    baseline #41: real change (+8.3 pts [+6.9, +9.7])` for a moved row (percent [95%
    interval])."""
    before = _side(row["before"], row.get("bound") == "before below")
    after = _side(row["after"], row.get("bound") == "after below")
    return (
        f"{row_name(row)} {before} → {after} since baseline #{baseline_id}: "
        f"real change ({row['delta_points']:+.1f} pts [{row['delta_low']:+.1f}, "
        f"{row['delta_high']:+.1f}])"
    )


def shift_line(shift: dict[str, Any]) -> str:
    kind, _, name = shift["key"].partition(":")
    return (
        f"{_text(row_label({'kind': kind, 'name': name}))} shifted from "
        f"{shift['before_mean']:.1f}% to {shift['after_mean']:.1f}% at capture "
        f"#{shift['capture']} (series of captures, permutation p = {shift['p_value']:.4f}; "
        f"baseline {shift['baseline_percent']:.1f}%)"
    )


def alert_line(alert: Alert, baseline_id: int | None) -> str:
    if alert.source == Alert.Source.SERIES and "before_mean" in alert.row:
        return shift_line(alert.row)
    if "before" in alert.row:
        return row_line(alert.row, baseline_id)
    return f"{_text(alert.label)} {'up' if alert.direction > 0 else 'down'}"


def absolute(path: str) -> str:
    return f"{settings.FLAMEDECK_BASE_URL}{path}"


def _scope(judgement: Judgement) -> str:
    return f"on the {judgement.options.get('scope') or 'step threads'}"


def _group_compare(baseline_group: int | None, group: int | None) -> list[str]:
    if not baseline_group or not group:
        return []
    path = f"{reverse('compare:compare_groups')}?a={baseline_group}&b={group}"
    return [f"Compare the whole job: {absolute(path)}"]


def message_compose(*, watch: Watch, judgement: Judgement, alerts: list[Alert]) -> tuple[str, str]:
    """(title, body) of the message for the alerts one judgement opened."""
    capture, baseline = judgement.capture, judgement.baseline
    baseline_id = judgement.baseline_id
    run, rank = _text(watch.run.name), _text(watch.rank_label)
    title = f"flamedeck: {run} {rank} changed (capture #{capture.pk} vs baseline #{baseline_id})"
    when = f"{(capture.finished_at or capture.queued_at):%Y-%m-%d %H:%M} UTC"
    compare = f"{reverse('compare:compare')}?a={baseline_id}&b={capture.pk}"
    lines = [
        f"Run {run}, rank {rank}: capture #{capture.pk} ({when}) judged against baseline "
        f"#{baseline_id}, {_scope(judgement)}.",
        *(f"- {alert_line(alert, baseline_id)}" for alert in alerts),
        f"{judgement.reason}. {judgement.options.get('correction', '')} across all rows "
        f"compared, minimum effect {watch.min_effect_points:g} pts.",
        *_group_compare(baseline.group_id if baseline else None, capture.group_id),
        f"Compare: {absolute(compare)}",
        f"Capture: {absolute(capture.get_absolute_url())}",
        f"Watch: {absolute(watch.get_absolute_url())}",
    ]
    return title[:300], "\n".join(lines)


CANNOT_JUDGE_ADVICE = {
    Judgement.Verdict.TOO_FEW: "Capture longer or at a higher rate, or lower the watch's "
    "minimum samples a side (now {min_samples}).",
    Judgement.Verdict.NOT_COMPARABLE: "Capture with the baseline's settings, or choose a "
    "baseline taken with this capture's.",
    Judgement.Verdict.NO_BASELINE: "Choose a new baseline on the watch's page.",
}


def cannot_judge_compose(*, watch: Watch, judgement: Judgement) -> tuple[str, str]:
    """(title, body) of the one message a watch sends when it cannot judge: why, and
    what makes it judge again. No other such message follows until it judges again."""
    capture = judgement.capture
    run, rank = _text(watch.run.name), _text(watch.rank_label)
    title = f"flamedeck: {run} {rank} cannot be judged ({judgement.get_verdict_display()})"
    advice = CANNOT_JUDGE_ADVICE.get(judgement.verdict, "")
    lines = [
        f"Run {run}, rank {rank}: capture #{capture.pk} was not judged: "
        f"{_CONTROL.sub(' ', judgement.reason)}.",
        advice.format(min_samples=watch.min_samples),
        "The watch says nothing more of this until it judges a capture again.",
        f"Capture: {absolute(capture.get_absolute_url())}",
        f"Watch: {absolute(watch.get_absolute_url())}",
    ]
    return title[:300], "\n".join(line for line in lines if line)


def group_message_compose(
    *, watch: Watch, judgement: Judgement, alerts: list[Alert]
) -> tuple[str, str]:
    """(title, body) of an all-roles watch's one message for a whole-job capture: the
    alerts its ranks opened, by role, and the whole-job compare."""
    group = judgement.capture.group
    baseline_group = judgement.baseline.group_id if judgement.baseline else None
    run = _text(watch.run.name)
    roles = ", ".join(dict.fromkeys(_text(a.role or "?") for a in alerts))
    title = (
        f"flamedeck: {run} changed on {roles} (whole-job capture #{group.pk} vs #{baseline_group})"
    )
    when = f"{group.created_at:%Y-%m-%d %H:%M} UTC"
    lines = [
        f"Run {run}: whole-job capture #{group.pk} ({when}) judged rank by rank against "
        f"whole-job capture #{baseline_group}, {_scope(judgement)}.",
        *(
            f"- {_text(a.role)}: {alert_line(a, a.judgement.baseline_id if a.judgement else None)}"
            for a in alerts[:GROUP_LINES]
        ),
        *(
            [f"- … and {len(alerts) - GROUP_LINES} more on the watch's page"]
            if len(alerts) > GROUP_LINES
            else []
        ),
        f"Minimum effect {watch.min_effect_points:g} pts, "
        f"{judgement.options.get('correction', '')} across the rows of each rank.",
        *_group_compare(baseline_group, group.pk),
        f"Whole-job capture: {absolute(group.get_absolute_url())}",
        f"Watch: {absolute(watch.get_absolute_url())}",
    ]
    return title[:300], "\n".join(lines)


# --- delivery ---------------------------------------------------------------------------


class Outcome(NamedTuple):
    status: str
    attempts: int

    @property
    def retry(self) -> bool:
        return self.status == Delivery.Status.RETRYING


def delivery_send(*, delivery_id: int) -> Outcome:
    """Claim one delivery (a conditional UPDATE: a second task for it does nothing),
    send it, and record sent, retrying (with the masked reason) or failed."""
    claimed = Delivery.objects.filter(
        pk=delivery_id, status__in=[Delivery.Status.PENDING, Delivery.Status.RETRYING]
    ).update(status=Delivery.Status.SENDING, attempts=F("attempts") + 1)
    if not claimed:
        return Outcome("skipped", 0)
    delivery = Delivery.objects.select_related("target").get(pk=delivery_id)
    if delivery.target is None:
        return _record(delivery, Delivery.Status.FAILED, "the target was deleted")
    sent = notify.send(delivery.target.url, title=delivery.title, body=delivery.body)
    if sent.ok:
        return _record(delivery, Delivery.Status.SENT, "")
    last = delivery.attempts >= settings.FLAMEDECK_NOTIFY_ATTEMPTS
    status = Delivery.Status.FAILED if last else Delivery.Status.RETRYING
    return _record(delivery, status, f"attempt {delivery.attempts}: {sent.error}")


def _record(delivery: Delivery, status: str, error: str) -> Outcome:
    fields: dict[str, Any] = {"status": status, "error": error}
    if status == Delivery.Status.SENT:
        fields["sent_at"] = timezone.now()
    Delivery.objects.filter(pk=delivery.pk).update(**fields)
    return Outcome(status, delivery.attempts)
