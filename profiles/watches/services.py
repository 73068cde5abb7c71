"""Writes for the regression watches: watches, notification targets, alerts.

Who may do what (docs/watches.md): operators create and change watches and
acknowledge alerts; only host admins enter notification URLs (a URL is a request the
server makes), as named targets that operators then attach by name.

Every write here is one transaction: a change that fails in any part saves nothing.
A baseline must be a done capture of the watch's own rank (its run, and its role or
process; for an all-roles watch a rank of one of the run's whole-job captures), and
alert ids must be the watch's own: anything else is a ValidationError naming the field.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from profiles.captures.enqueue import judge_enqueue_on_commit
from profiles.models import Capture
from profiles.watches import notify
from profiles.watches.models import DEFAULT_MIN_SAMPLES, Alert, NotifyTarget, Watch
from runs.models import Run, RunProcess
from runs.permissions import can_administer_hosts

URL_ONLY_FOR_HOST_ADMINS = (
    "Only host admins enter notification URLs (a URL is a request the server makes); "
    "name a target they configured instead"
)
MAX_TARGETS = 20


def capture_analysed_received(sender: Any, *, capture_id: int, status: str, **_: Any) -> None:
    """On a capture's analysis ending done, queue its judging if its run is watched."""
    if status == Capture.Status.DONE and Watch.objects.filter(run__captures=capture_id).exists():
        judge_enqueue_on_commit(capture_id=capture_id)


# --- targets ----------------------------------------------------------------------------


def _require_host_admin(user: AbstractBaseUser | None) -> None:
    if not can_administer_hosts(user):
        raise PermissionDenied(URL_ONLY_FOR_HOST_ADMINS)


def _checked_url(url: str) -> str:
    url = url.strip()
    problem = notify.url_problem(url)
    if problem:
        raise ValidationError({"url": problem})
    return url


def target_save(
    *,
    user: AbstractBaseUser,
    name: str,
    url: str,
    description: str = "",
    target: NotifyTarget | None = None,
) -> NotifyTarget:
    """Create a target, or change one (an empty `url` keeps the stored one)."""
    _require_host_admin(user)
    target = target or NotifyTarget(created_by=user)
    target.name, target.description = name, description
    if url or not target.pk:
        target.url = _checked_url(url)
    target.full_clean()
    target.save()
    return target


def target_delete(*, user: AbstractBaseUser, target: NotifyTarget) -> None:
    _require_host_admin(user)
    target.delete()


def target_for_url(*, user: AbstractBaseUser, url: str) -> NotifyTarget:
    """A host admin's URL given with a watch: the target holding it, made if needed
    (named after the service and a hash of the URL, so the URL itself never shows)."""
    _require_host_admin(user)
    url = _checked_url(url)
    existing = NotifyTarget.objects.filter(url=url).first()
    if existing is not None:
        return existing
    scheme = "".join(c for c in url.partition("://")[0].lower() if c.isalnum())[:20]
    name = f"{scheme or 'url'}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"
    return target_save(user=user, name=name, url=url, description="entered with a watch")


def targets_resolve(*, user: AbstractBaseUser, notify_items: list[str]) -> list[NotifyTarget]:
    """`notify`: names of configured targets (anyone who may edit the watch) or Apprise
    URLs (host admins only)."""
    if len(notify_items) > MAX_TARGETS:
        raise ValidationError({"notify": f"at most {MAX_TARGETS} targets"})
    targets = []
    for item in notify_items:
        if "://" in item:
            targets.append(target_for_url(user=user, url=item))
            continue
        target = NotifyTarget.objects.filter(name=item).first()
        if target is None:
            known = ", ".join(NotifyTarget.objects.values_list("name", flat=True)[:20])
            raise ValidationError(
                {"notify": f"no notification target named {item[:60]!r} (known: {known or 'none'})"}
            )
        targets.append(target)
    return list(dict.fromkeys(targets))


# --- watches ----------------------------------------------------------------------------


def _rank(
    run: Run | None, role: str, process: RunProcess | None, all_roles: bool = False
) -> tuple[Run, str]:
    if all_roles:
        if run is None or role or process is not None:
            raise ValidationError({"all_roles": "give the run alone (no role or process)"})
        return run, ""
    if process is not None:
        return process.run, process.role
    if run is None or not role:
        raise ValidationError({"role": "give run and role, or a process"})
    return run, role


def _check_baseline(
    baseline: Capture,
    *,
    run: Run,
    role: str,
    process: RunProcess | None,
    all_roles: bool = False,
) -> None:
    """A done capture with samples, of this rank: judging a rank against another run's
    (or another rank's) profile would alert on differences that are no change. An
    all-roles watch's baseline is a rank of a whole-job capture (its group is the
    baseline of every role)."""
    if baseline.status != Capture.Status.DONE or not (baseline.stats or {}).get("total_samples"):
        raise ValidationError(
            {"baseline": f"capture #{baseline.pk} is not a done capture with samples"}
        )
    if baseline.run_id != run.pk:
        raise ValidationError(
            {"baseline": f"capture #{baseline.pk} is not of run #{run.pk} ({run.name[:60]})"}
        )
    if all_roles and baseline.group_id is None:
        raise ValidationError(
            {"baseline": f"capture #{baseline.pk} is not a rank of a whole-job capture"}
        )
    if role and (baseline.process is None or baseline.process.role != role):
        raise ValidationError({"baseline": f"capture #{baseline.pk} is not of {role[:60]!r}"})
    if not role and process is not None and baseline.process_id != process.pk:
        raise ValidationError(
            {"baseline": f"capture #{baseline.pk} is not of process #{process.pk}"}
        )


def watch_create(
    *,
    user: AbstractBaseUser,
    baseline: Capture,
    run: Run | None = None,
    role: str = "",
    process: RunProcess | None = None,
    targets: list[NotifyTarget] = (),
    min_effect_points: float = 2.0,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    all_roles: bool = False,
) -> Watch:
    """Watch one rank (run + role, or one process) with `baseline`; or, `all_roles`,
    every role of the run's whole-job captures with the baseline's whole-job capture."""
    run, role = _rank(run, role, process, all_roles)
    process = process if not role and not all_roles else None
    _check_baseline(baseline, run=run, role=role, process=process, all_roles=all_roles)
    same = Watch.objects.filter(run=run, role=role, all_roles=all_roles)
    same = same.filter(process=process) if not role and not all_roles else same
    if same.exists():
        watched = "all roles" if all_roles else role or process
        raise ValidationError(
            {
                "role": f"{watched} of {run.name} is already watched (#{same.first().pk}): "
                "change that watch's baseline instead"
            }
        )
    watch = Watch(
        run=run,
        role=role,
        all_roles=all_roles,
        process=process,
        baseline=baseline,
        min_effect_points=min_effect_points,
        min_samples=min_samples,
        created_by=user,
    )
    watch.full_clean()
    with transaction.atomic():
        watch.save()
        watch.targets.set(targets)
    return watch


def watch_update(
    *,
    watch: Watch,
    baseline: Capture | None = None,
    targets: list[NotifyTarget] | None = None,
    min_effect_points: float | None = None,
    min_samples: int | None = None,
    snoozed_until: datetime | None | bool = False,
) -> Watch:
    """Change a watch; a new baseline closes its alerts and starts a new series.
    `snoozed_until`: False leaves it, None ends a snooze."""
    with transaction.atomic():
        if baseline is not None and baseline.pk != watch.baseline_id:
            _check_baseline(
                baseline,
                run=watch.run,
                role=watch.role,
                process=watch.process,
                all_roles=watch.all_roles,
            )
            watch.baseline, watch.shifts = baseline, []
            watch.alerts.filter(status__in=[Alert.Status.OPEN, Alert.Status.ACKNOWLEDGED]).update(
                status=Alert.Status.REBASELINED, closed_at=timezone.now()
            )
        if min_effect_points is not None:
            watch.min_effect_points = min_effect_points
        if min_samples is not None:
            watch.min_samples = min_samples
        if snoozed_until is not False:
            watch.snoozed_until = snoozed_until
        watch.full_clean()
        watch.save()
        if targets is not None:
            watch.targets.set(targets)
    return watch


def watch_snooze(*, watch: Watch, hours: float) -> Watch:
    """Hold the watch's alerts for `hours` (0 ends a snooze): captures are still judged
    and stored; an alert that still holds afterwards opens then."""
    until = timezone.now() + timezone.timedelta(hours=hours) if hours > 0 else None
    return watch_update(watch=watch, snoozed_until=until)


def alerts_acknowledge(
    *,
    watch: Watch,
    user: AbstractBaseUser,
    alert_ids: list[int] | None = None,
    field: str = "acknowledge",
) -> int:
    """Acknowledge open alerts (all when `alert_ids` is None); returns how many.
    An id that is not one of this watch's alerts is a ValidationError naming `field`.

    An acknowledged alert no longer holds back the next one of its row: if a later
    capture still shows the change, the watch says so once more."""
    alerts = watch.alerts.filter(status=Alert.Status.OPEN)
    if alert_ids is not None:
        _check_own_alerts(watch, alert_ids, field)
        alerts = alerts.filter(pk__in=alert_ids)
    return alerts.update(
        status=Alert.Status.ACKNOWLEDGED, acknowledged_by=user, closed_at=timezone.now()
    )


def _check_own_alerts(watch: Watch, alert_ids: list[int], field: str) -> None:
    own = set(watch.alerts.filter(pk__in=alert_ids).values_list("pk", flat=True))
    foreign = sorted(set(alert_ids) - own)
    if foreign:
        shown = ", ".join(str(i) for i in foreign[:5])
        raise ValidationError({field: f"no alert {shown} on watch #{watch.pk}"})


def watch_change(
    *,
    watch: Watch,
    user: AbstractBaseUser,
    baseline: Capture | None = None,
    targets: list[NotifyTarget] | None = None,
    min_effect_points: float | None = None,
    min_samples: int | None = None,
    snooze_hours: float | None = None,
    acknowledge: list[int] | None | bool = False,
) -> Watch:
    """All of one request's changes to a watch, or none of them: settings, a snooze
    (`snooze_hours`, 0 ends one) and acknowledged alerts (`acknowledge`: ids, None for
    all, False for none)."""
    with transaction.atomic():
        watch_update(
            watch=watch,
            baseline=baseline,
            targets=targets,
            min_effect_points=min_effect_points,
            min_samples=min_samples,
        )
        if snooze_hours is not None:
            watch_snooze(watch=watch, hours=snooze_hours)
        if acknowledge is not False:
            alerts_acknowledge(watch=watch, user=user, alert_ids=acknowledge)
    return watch
