"""Pages for regression watches: the list, one watch, its forms, and the notification
targets host admins configure. Viewers see; operators act; host admins enter URLs.

Ids a form sends (the baseline, an alert) are read by config.params; one that is not
a whole number in range, or not of this watch's rank, is a 400 naming the field (the
pages' own buttons never send one). Other refusals come back as a message."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.form_fields import StrictIntegerFormField
from config.params import parse_float, parse_id
from profiles.models import Capture
from profiles.watches import selectors as watch_selectors
from profiles.watches import services as watches
from profiles.watches.judging import CANNOT_JUDGE
from profiles.watches.models import DEFAULT_MIN_SAMPLES, NotifyTarget, Watch
from runs.permissions import can_administer_hosts, can_launch, host_admin_required, launch_required


class WatchForm(forms.Form):
    baseline = StrictIntegerFormField(min_value=1, label="Baseline capture #")
    targets = forms.ModelMultipleChoiceField(
        NotifyTarget.objects.all(), to_field_name="name", required=False
    )
    min_effect_points = forms.FloatField(min_value=0.1, max_value=100, initial=2.0)
    min_samples = forms.IntegerField(
        min_value=100, max_value=10_000_000, initial=DEFAULT_MIN_SAMPLES
    )
    all_roles = forms.BooleanField(
        required=False, label="All roles (one message per whole-job capture)"
    )

    def clean_baseline(self) -> Capture:
        capture = Capture.objects.select_related("run", "process").filter(
            pk=self.cleaned_data["baseline"]
        )
        if not capture.exists():
            raise ValidationError(f"no capture #{self.cleaned_data['baseline']}")
        return capture.get()


class TargetForm(forms.ModelForm):
    class Meta:
        model = NotifyTarget
        fields = ["name", "url", "description"]
        widgets = {"url": forms.PasswordInput(render_value=False)}


def _settings(form: WatchForm) -> dict:
    """The service arguments a valid WatchForm gives, besides the baseline."""
    data = form.cleaned_data
    return {
        "targets": list(data["targets"]),
        "min_effect_points": data["min_effect_points"],
        "min_samples": data["min_samples"],
    }


def _get_watch_for_user(user, pk: int) -> Watch:
    return get_object_or_404(watch_selectors.watches(), pk=pk)


def _valid(form: WatchForm) -> bool:
    """Whether the form is valid; a bad or unknown baseline id is a 400 (raised)."""
    if form.is_valid():
        return True
    if "baseline" in form.errors:
        raise ValidationError({"baseline": [f"baseline: {e}" for e in form.errors["baseline"]]})
    return False


def _errors(exc: ValidationError | forms.Form) -> str:
    if isinstance(exc, forms.Form):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
    return "; ".join(exc.messages)


def _back(request, fallback: str):
    back = request.POST.get("next", "")
    return redirect(back if back.startswith("/") and not back.startswith("//") else fallback)


@require_GET
def watch_list(request):
    rows = []
    for watch in watch_selectors.watches():
        key = watch_selectors.headline_key(watch)
        series = watch_selectors.watch_series(watch, keys=[key]) if key else []
        rows.append(
            {
                "watch": watch,
                "last": watch_selectors.last_judgement(watch),
                "open_alerts": watch.alerts.filter(status="open").count(),
                "shift": next((s for s in watch.shifts if s.get("significant")), None),
                "series": series[0] if series else None,
            }
        )
    sparklines = {str(r["watch"].pk): r["series"] for r in rows if r["series"]}
    return render(
        request,
        "profiles/watch_list.html",
        {"rows": rows, "sparklines": sparklines, "can_launch": can_launch(request.user)},
    )


@require_GET
def watch_detail(request, pk: int):
    watch = _get_watch_for_user(request.user, pk)
    judged = watch.judgements.select_related("capture").order_by("-judged_at", "-pk")
    latest = judged.first()
    context = {
        "watch": watch,
        # Why the watch cannot judge now, if it cannot: never silent (judging.CANNOT_JUDGE).
        "cannot_judge": latest if latest and latest.verdict in CANNOT_JUDGE else None,
        "alerts": watch_selectors.watch_alerts(watch),
        "judgements": judged[: watch_selectors.JUDGEMENTS_SHOWN],
        "shifts": watch.shifts,
        "series": watch_selectors.watch_series(watch),
        "can_launch": can_launch(request.user),
        "targets": NotifyTarget.objects.all(),
        "form": WatchForm(
            initial={
                "baseline": watch.baseline_id,
                "min_effect_points": watch.min_effect_points,
                "min_samples": watch.min_samples,
            }
        ),
    }
    return render(request, "profiles/watch_detail.html", context)


@require_POST
@launch_required
def watch_create(request):
    """From a capture or run page: watch the baseline capture's rank."""
    form = WatchForm(request.POST)
    if not _valid(form):
        messages.error(request, f"Not watched: {_errors(form)}")
        return _back(request, "/watches/")
    baseline = form.cleaned_data["baseline"]
    if baseline.process_id is None or baseline.run_id is None:
        messages.error(request, "Not watched: that capture is not of a run's process.")
        return _back(request, baseline.get_absolute_url())
    all_roles = form.cleaned_data["all_roles"]
    try:
        watch = watches.watch_create(
            user=request.user,
            baseline=baseline,
            run=baseline.run,
            role="" if all_roles else baseline.process.role,
            process=None if baseline.process.role or all_roles else baseline.process,
            all_roles=all_roles,
            **_settings(form),
        )
    except ValidationError as exc:
        messages.error(request, f"Not watched: {_errors(exc)}")
        return _back(request, baseline.get_absolute_url())
    messages.success(
        request, f"Watching {watch.rank_label} with capture #{baseline.pk} as baseline."
    )
    return redirect(watch.get_absolute_url())


@require_POST
@launch_required
def watch_edit(request, pk: int):
    watch = _get_watch_for_user(request.user, pk)
    form = WatchForm(request.POST)
    if not _valid(form):
        messages.error(request, f"Not saved: {_errors(form)}")
        return _back(request, watch.get_absolute_url())
    try:
        watches.watch_update(watch=watch, baseline=form.cleaned_data["baseline"], **_settings(form))
    except ValidationError as exc:
        if "baseline" in getattr(exc, "error_dict", {}):  # e.g. of another rank: 400
            raise ValidationError({"baseline": [f"baseline: {m}" for m in exc.messages]}) from None
        messages.error(request, f"Not saved: {_errors(exc)}")
    return _back(request, watch.get_absolute_url())


@require_POST
@launch_required
def watch_snooze(request, pk: int):
    watch = _get_watch_for_user(request.user, pk)
    try:
        hours = parse_float(request.POST.get("hours", ""), name="hours", minimum=0, maximum=720)
    except ValidationError:
        messages.error(request, "Snooze for 0 to 720 hours.")
    else:
        watches.watch_snooze(watch=watch, hours=hours)
    return _back(request, watch.get_absolute_url())


@require_POST
@launch_required
def watch_acknowledge(request, pk: int):
    watch = _get_watch_for_user(request.user, pk)
    raw = request.POST.get("alert", "all")
    ids = None if raw == "all" else [parse_id(raw, name="alert")]  # else 400 naming it
    watches.alerts_acknowledge(watch=watch, user=request.user, alert_ids=ids, field="alert")
    return _back(request, watch.get_absolute_url())


@require_POST
@launch_required
def watch_delete(request, pk: int):
    _get_watch_for_user(request.user, pk).delete()
    messages.success(request, "Watch deleted.")
    return redirect("watches:watch_list")


@require_http_methods(["GET", "POST"])
def target_list(request):
    """Everyone sees the names; host admins see masked URLs and add targets."""
    admin = can_administer_hosts(request.user)
    form = TargetForm(request.POST or None)
    if request.method == "POST":
        if not admin:
            raise PermissionDenied(watches.URL_ONLY_FOR_HOST_ADMINS)
        if form.is_valid():
            try:
                watches.target_save(user=request.user, **form.cleaned_data)
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Target {form.cleaned_data['name']} saved.")
                return redirect("watches:target_list")
    context = {"targets": NotifyTarget.objects.all(), "form": form, "is_host_admin": admin}
    return render(request, "profiles/notify_targets.html", context)


@require_POST
@host_admin_required
def target_delete(request, pk: int):
    target = get_object_or_404(NotifyTarget, pk=pk)
    watches.target_delete(user=request.user, target=target)
    messages.success(request, f"Target {target.name} deleted.")
    return redirect("watches:target_list")
