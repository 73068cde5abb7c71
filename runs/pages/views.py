"""The pages of runs and hosts that show their captures: the runs list, a run, the
hosts list, a host. They live here, not in `runs`, because they read captures, and
profiles imports runs, never the reverse; their URLs keep the `runs:` names
(config/urls.py). Runs' own forms (create, edit, attach) are in runs/views.py.
"""

from django.core.paginator import Paginator
from django.db.models import Count, JSONField, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT, KeyTransform
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from config.params import query_id, query_page
from profiles.captures.selectors import (
    capture_rows,
    launch_context,
    launch_groups,
    row_states,
    with_row_states,
)
from profiles.compare.sparklines import spark_series, sparkline
from profiles.jobs.services import group_summary
from profiles.models import Capture
from profiles.web.forms import ImportForm
from runs import selectors as run_selectors
from runs.forms import RunProcessForm
from runs.launches import launch_timeline
from runs.models import Host, Run
from runs.permissions import can_administer_hosts, can_launch, redact_check

RUNS_PER_PAGE = 25
CAPTURES_PER_PAGE = 50
HOST_CAPTURES = 20
LATEST_FIELDS = ("pk", "status", "queued_at", "verdict")


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
    groups = run.capture_groups.prefetch_related("captures")[:5]
    return [{"group": g, **group_summary(g), "states": _job_states(g)} for g in groups]


def _job_states(group) -> dict | None:
    """A whole-job capture's step-thread states, the mean of its ranks' as its stored
    report has them (the words of its page's "What the job says"); None before the
    report is stored, and for a whole-job dump."""
    ranks = [r for r in (group.job_report or {}).get("ranks") or [] if r.get("samples")]
    if not ranks:
        return None
    mean: dict[str, float] = {}
    for rank in ranks:
        for s in rank.get("states") or []:
            mean[s["state"]] = mean.get(s["state"], 0.0) + s["percent"] / len(ranks)
    states = [{"state": state, "percent": round(p, 2)} for state, p in mean.items() if p > 0]
    found = row_states({"states": states})
    if found:
        found["who"] = f"step threads, mean of {len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
    return found


def _with_latest(processes: QuerySet) -> QuerySet:
    """Processes with their latest done capture (not a dump): its id and what its
    states are read from, in the processes' own query (subqueries, no query more)."""
    newest = (
        Capture.objects.filter(process=OuterRef("pk"), status=Capture.Status.DONE)
        .exclude(kind=Capture.Kind.DUMP)
        .order_by("-queued_at", "-pk")
    )

    def stored(key: str) -> Subquery:
        value = newest.annotate(value=KeyTransform(key, "stats")).values("value")[:1]
        return Subquery(value, output_field=JSONField())

    return processes.annotate(
        latest_pk=Subquery(newest.values("pk")[:1]),
        latest_step_threads=stored("step_threads"),
        latest_states=stored("states"),
    )


def _latest_capture(process) -> dict | None:
    """The process's latest done capture and its states (row_states), for its row."""
    if process.latest_pk is None:
        return None
    states = row_states(process.latest_step_threads, process.latest_states)
    return {"pk": process.latest_pk, "states": states}


@require_GET
def run_detail(request, pk: int):
    run = run_selectors.run_for_user(user=request.user, pk=pk)
    # The current process of each role first; replaced ones (earlier launches) after.
    processes = sorted(
        _with_latest(run.processes.select_related("host", "launch", "replaced_by")),
        key=lambda p: (p.replaced, p.role, p.pid),
    )
    for p in processes:
        p.latest = _latest_capture(p)
    captures = capture_rows(Capture.objects.filter(run=run))
    if tag := request.GET.get("tag"):
        captures = captures.filter(tags__name=tag)
    page = Paginator(captures.order_by("-queued_at"), CAPTURES_PER_PAGE).get_page(
        query_page(request.GET)
    )
    page.object_list = with_row_states(page.object_list)
    pairs = Q(process__run=run)
    for p in processes:
        pairs |= Q(host_id=p.host_id, pid=p.pid)
    context = {
        "run": run,
        "processes": processes,
        "capture_all": run_selectors.capture_all_dialog(run=run, processes=processes)
        if can_launch(request.user)
        else None,
        "page": page,
        "tag": tag,
        "process_form": RunProcessForm(),
        "import_form": ImportForm(initial={"run": run}),
        "launch": launch_context(request.user, run, pairs),
        "can_launch": can_launch(request.user),
        "groups": _recent_groups(run),
        "launches": (launches := launch_groups(run=run, rows=launch_timeline(run=run))),
        "launch_height": 24 * len(launches),  # px: one row per launch
        "run_tags": sorted({t.name for c in page.object_list for t in c.tags.all()}),
        # Page 1 takes new captures in as they come (capture_rows.js).
        "rows_query": urlencode({"run": run.pk, "tag": tag or ""}) if page.number == 1 else "",
    }
    return render(request, "runs/run_detail.html", context)


# --- hosts -------------------------------------------------------------------------


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
    host = run_selectors.host_for_user(user=request.user, pk=pk)
    captures = capture_rows(Capture.objects.filter(host=host)).order_by("-queued_at")
    captures = with_row_states(captures[:HOST_CAPTURES])
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
