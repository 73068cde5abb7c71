"""Pages for runs (history, detail, edit, processes) and hosts (list, detail, edit).

Everyone logged in sees these pages; creating and editing needs the launch
permission (operators). Captures are launched from the pages through the JSON API.
"""

from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.params import query_id, query_page
from profiles.forms import ImportForm
from profiles.models import Capture
from profiles.selectors import capture_rows, lag_history
from profiles.sparklines import spark_series

from . import selectors, services
from .forms import AttachTreeForm, HostForm, RunForm, RunProcessForm
from .models import Host, Run, RunProcess
from .permissions import can_administer_hosts, can_launch, redact_check

RUNS_PER_PAGE = 25
CAPTURES_PER_PAGE = 50
HOST_CAPTURES = 20
SPARK_CATEGORIES = 3
LATEST_FIELDS = ("pk", "status", "queued_at", "verdict")
CAPTURE_DEFAULTS = {
    "duration": 30,
    "rate": 20,
    "native": True,
    "threads": True,
    "idle": False,
    "gil": False,
    "nonblocking": False,
    "subprocesses": False,
    "kind": "record",
}


def launch_required(view):
    """403 for users without the launch permission (the API does the same)."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not can_launch(request.user):
            raise PermissionDenied("You need the launch permission (operators group).")
        return view(request, *args, **kwargs)

    return wrapper


def host_admin_required(view):
    """403 for users who may not create hosts or change how they are reached."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not can_administer_hosts(request.user):
            raise PermissionDenied("Creating hosts is for host admins.")
        return view(request, *args, **kwargs)

    return wrapper


def _get_run_for_user(user, pk: int) -> Run:
    # Every logged-in user may see every run; the helper is where a rule would go.
    return get_object_or_404(
        Run.objects.select_related("created_by").prefetch_related("tags"), pk=pk
    )


def _get_host_for_user(user, pk: int) -> Host:
    return get_object_or_404(Host, pk=pk)


def launch_context(user, run: Run | None, condition: Q) -> dict[str, Any]:
    return {
        "canLaunch": can_launch(user),
        "run": run.pk if run else None,
        "defaults": CAPTURE_DEFAULTS,
        "maxDuration": settings.FLAMEDECK_MAX_DURATION_S,
        "lagHistory": lag_history(condition) if can_launch(user) else [],
    }


# --- runs --------------------------------------------------------------------------


def _filtered_runs(params) -> QuerySet[Run]:
    runs = Run.objects.prefetch_related("tags").order_by("-created_at")
    if q := params.get("q", "").strip():
        runs = runs.filter(
            Q(name__icontains=q) | Q(tags__name__iexact=q) | Q(description__icontains=q)
        )
    if params.get("status") in Run.Status.values:
        runs = runs.filter(status=params["status"])
    if (host := query_id(params, "host")) is not None:
        runs = runs.filter(Q(processes__host_id=host) | Q(captures__host_id=host))
    count = (
        Capture.objects.filter(run=OuterRef("pk")).values("run").annotate(c=Count("pk")).values("c")
    )
    newest = Capture.objects.filter(run=OuterRef("pk")).order_by("-queued_at")
    newest = newest.annotate(verdict=KT("stats__lag__verdict"))
    latest = {f"latest_{f}": Subquery(newest.values(f)[:1]) for f in LATEST_FIELDS}
    return runs.distinct().annotate(capture_count=Subquery(count), **latest)


def _latest(run: Run) -> dict | None:
    """The run's newest capture, whatever its status (annotated by _filtered_runs)."""
    if run.latest_pk is None:
        return None
    return {f: getattr(run, f"latest_{f}") for f in LATEST_FIELDS}


def sparkline(
    series: tuple[str, list[dict[str, float]]] | None, width: int = 120, height: int = 26
) -> dict | None:
    """Polylines of the main categories' shares in one series (the whole job's, or one
    rank's: never a line through two ranks), oldest to newest."""
    if not series:
        return None
    name, points = series
    main = sorted({c for p in points for c in p}, key=lambda c: -sum(p.get(c, 0) for p in points))
    main = main[:SPARK_CATEGORIES]
    top = max([point.get(c, 0) for point in points for c in main] + [1])
    step = width / max(len(points) - 1, 1)
    lines = []
    for category in main:
        xy = [
            f"{i * step:.1f},{height - 2 - point.get(category, 0) / top * (height - 4):.1f}"
            for i, point in enumerate(points)
        ]
        last = points[-1].get(category, 0)
        lines.append({"category": category, "points": " ".join(xy), "last": last})
    return {"series": name, "lines": lines, "count": len(points)}


@require_GET
def run_list(request):
    page = Paginator(_filtered_runs(request.GET), RUNS_PER_PAGE).get_page(query_page(request.GET))
    run_ids = [run.pk for run in page.object_list]
    recent = spark_series(run_ids)
    rows = [
        {"run": run, "latest": _latest(run), "spark": sparkline(recent.get(run.pk))}
        for run in page.object_list
    ]
    context = {
        "page": page,
        "rows": rows,
        "statuses": Run.Status.choices,
        "hosts": Host.objects.only("pk", "name"),
        "params": request.GET,
        "can_launch": can_launch(request.user),
    }
    return render(request, "runs/run_list.html", context)


def _recent_groups(run) -> list[dict]:
    from profiles.jobs import group_summary

    groups = run.capture_groups.prefetch_related("captures")[:5]
    return [{"group": g, **group_summary(g)} for g in groups]


@require_GET
def run_detail(request, pk: int):
    run = _get_run_for_user(request.user, pk)
    processes = list(run.processes.select_related("host"))
    captures = capture_rows(Capture.objects.filter(run=run))
    if tag := request.GET.get("tag"):
        captures = captures.filter(tags__name=tag)
    page = Paginator(captures.order_by("-queued_at"), CAPTURES_PER_PAGE).get_page(
        query_page(request.GET)
    )
    pairs = Q(process__run=run)
    for p in processes:
        pairs |= Q(host_id=p.host_id, pid=p.pid)
    context = {
        "run": run,
        "processes": processes,
        "capture_all": selectors.capture_all_dialog(
            run=run, processes=processes, defaults=CAPTURE_DEFAULTS
        )
        if can_launch(request.user)
        else None,
        "page": page,
        "tag": tag,
        "process_form": RunProcessForm(),
        "import_form": ImportForm(initial={"run": run}),
        "launch": launch_context(request.user, run, pairs),
        "can_launch": can_launch(request.user),
        "groups": _recent_groups(run),
        "run_tags": sorted({t.name for c in page.object_list for t in c.tags.all()}),
        # Page 1 takes new captures in as they come (capture_rows.js).
        "rows_query": urlencode({"run": run.pk, "tag": tag or ""}) if page.number == 1 else "",
    }
    return render(request, "runs/run_detail.html", context)


def _save_run(form: RunForm, user) -> Run:
    data = form.cleaned_data
    with transaction.atomic():
        if form.instance.pk is not None:
            run = form.save()
            run.tags.set(services.tags_from_text(data["tags_text"]))
            return run
        run = services.run_create(
            user=user,
            name=data["name"],
            description=data["description"],
            tags=data["tags_text"],
            status=data["status"],
        )
        for field in (
            "started_at",
            "ended_at",
            "schedule_every_min",
            "library_paths",
            "step_threads",
        ):
            if data.get(field) is not None:  # keep run_create's start time unless one was given
                setattr(run, field, data[field])
        run.save()
    return run


@require_http_methods(["GET", "POST"])
@launch_required
def run_create(request):
    form = RunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        run = _save_run(form, request.user)
        messages.success(request, f"Run “{run.name}” created. Attach its processes below.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "run": None})


@require_http_methods(["GET", "POST"])
@launch_required
def run_edit(request, pk: int):
    run = _get_run_for_user(request.user, pk)
    form = RunForm(request.POST or None, instance=run)
    if request.method == "POST" and form.is_valid():
        _save_run(form, request.user)
        messages.success(request, "Run saved.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "run": run})


@require_POST
@launch_required
def run_process_add(request, pk: int):
    run = _get_run_for_user(request.user, pk)
    form = RunProcessForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Could not attach the process — {_form_errors(form)}")
        return redirect(run)
    data = form.cleaned_data
    try:
        attached = services.run_process_attach(
            run=run, host=data["host"], pid=data["pid"], role=data["role"]
        )
    except ValidationError as exc:
        messages.error(request, f"Could not attach the process — {' '.join(exc.messages)}")
        return redirect(run)
    _report_attached(request, [attached])
    return redirect(run)


def _form_errors(form) -> str:
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())


def _report_attached(request, attached: list[services.Attached]) -> None:
    new = [a.process for a in attached if a.created]
    known = [a.process for a in attached if not a.created]
    if new:
        messages.success(request, f"Attached {', '.join(map(str, new))}.")
    if known:
        messages.info(request, f"Already attached: {', '.join(map(str, known))}.")
    for warning in dict.fromkeys(a.warning for a in attached if a.warning):
        messages.warning(request, f"Attached without checking: {warning}.")


@require_POST
@launch_required
def run_process_remove(request, pk: int, process_pk: int):
    process = get_object_or_404(RunProcess, pk=process_pk, run_id=pk)
    process.delete()
    messages.success(request, f"Detached {process.host.name}:{process.pid}.")
    return redirect("runs:run_detail", pk=pk)


# --- hosts -------------------------------------------------------------------------


@require_POST
@launch_required
def host_attach(request, pk: int):
    """Attach several processes of one host (a launcher's tree) to a run, new or existing."""
    host = _get_host_for_user(request.user, pk)
    form = AttachTreeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Could not attach — {_form_errors(form)}")
        return redirect(host)
    data = form.cleaned_data
    pairs = [(pid, request.POST.get(f"role_{pid}", "")) for pid in data["pids"]]
    try:
        with transaction.atomic():
            run = data["run"] or services.run_create(user=request.user, name=data["new_run"])
            attached = services.run_processes_attach(run=run, host=host, processes=pairs)
    except ValidationError as exc:
        messages.error(request, f"Could not attach — {' '.join(exc.messages)}")
        return redirect(host)
    _report_attached(request, attached)
    return redirect(run)


@require_GET
def host_list(request):
    count = (
        Capture.objects.filter(host=OuterRef("pk"))
        .values("host")
        .annotate(c=Count("pk"))
        .values("c")
    )
    hosts = Host.objects.annotate(capture_count=Subquery(count)).order_by("name")
    context = {
        "hosts": hosts,
        "can_launch": can_launch(request.user),
        "can_administer_hosts": can_administer_hosts(request.user),
    }
    return render(request, "runs/host_list.html", context)


@require_GET
def host_detail(request, pk: int):
    host = _get_host_for_user(request.user, pk)
    captures = capture_rows(Capture.objects.filter(host=host)).order_by("-queued_at")
    captures = captures[:HOST_CAPTURES]
    context = {
        "host": host,
        "captures": captures,
        "check": redact_check(host.last_check, local=host.is_local, user=request.user),
        "changes": host.changes.select_related("changed_by")[:50],
        "launch": launch_context(request.user, None, Q(host=host)),
        "can_launch": can_launch(request.user),
        "attach_runs": _attachable_runs() if can_launch(request.user) else [],
        "can_administer_hosts": can_administer_hosts(request.user),
        "rows_query": urlencode({"host": host.pk, "show_run": 1}),
        "rows_limit": HOST_CAPTURES,
    }
    return render(request, "runs/host_detail.html", context)


def _attachable_runs() -> QuerySet[Run]:
    active = [Run.Status.RUNNING, Run.Status.PLANNED]
    return Run.objects.filter(status__in=active).only("pk", "name", "status")[:200]


def _host_form_page(request, host: Host | None):
    form = HostForm(request.POST or None, instance=host, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.host_save(host=form.instance, user=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Host {saved.name} saved. Test the connection below.")
            return redirect(saved)
    return render(request, "runs/host_form.html", {"form": form, "host": host})


@require_http_methods(["GET", "POST"])
@host_admin_required
def host_create(request):
    return _host_form_page(request, None)


@require_http_methods(["GET", "POST"])
@launch_required
def host_edit(request, pk: int):
    return _host_form_page(request, _get_host_for_user(request.user, pk))
