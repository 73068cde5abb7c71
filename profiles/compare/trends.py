"""Share trends: a run's captures over time (`/runs/<id>/trends.json`) and one
state's, category's or keyword's share across runs (`/trends/`, `/trends.json`).

States (of the step threads, as each capture's analysis stored them) are what a chart
plots unless the user picks a keyword lens (a set's categories or keywords), which is
then labelled as such, naming the sets (profiles/compare/lens.py).

No line joins two ranks (profiles/compare/series.py): the run chart draws one state (or
category) with a line per rank (a role keeps its line across the run's launches, whose
starts are marked) and one for the whole job, or one rank with a line per state (or
category); across runs, "latest" draws each rank's latest capture per run and the run's
latest whole-job capture, "mean" one point per run.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from config.params import query_int
from profiles.compare import series as sr
from profiles.compare.lens import keyword_lens
from profiles.models import Capture, Keyword
from profiles.pyspy import GPU_KEYWORDS, STATES
from runs.launches import launch_starts
from runs.models import Run

TREND_CAPTURES = 1000
TREND_RUNS_DEFAULT = 20
TREND_RUNS_MAX = 200
SINGLE = "single"
SINGLE_NAME = "the only process (runs without roles)"


# --- one run ----------------------------------------------------------------------------


STATES_LABEL = "Thread states of the step threads"
KINDS = ("state", "category", "keyword")


@require_GET
def run_trends(request: HttpRequest, pk: int) -> JsonResponse:
    """`?measure=state` (the default: the step threads' states) or `?measure=category`
    (the keyword lens), then `?name=NAME` (a line per rank and the whole job) or
    `?series=KEY` (a line per state or category of that rank); with neither, the largest
    when the run has several ranks, else its one rank."""
    run = get_object_or_404(Run, pk=pk)
    measure = "category" if request.GET.get("measure") == "category" else "state"
    latest = Capture.objects.filter(run=run).order_by("-queued_at")
    captures = sr.measured_captures(latest, kind=measure, limit=TREND_CAPTURES)[::-1]
    names = sr.measure_names(captures)
    ranks = sr.series_names(captures)
    view = _run_view(request.GET, names, ranks)
    if view["by"] == "rank":
        series = sr.rank_series(captures, measure, view["name"] or "")
    else:
        series = sr.measure_series(captures, view["series"] or "", measure)
    lens = _run_lens(run)
    return JsonResponse(
        {
            "run": {"id": run.pk, "name": run.name},
            "measure": measure,
            # What the select offers: states first, the keyword lens labelled as one.
            "measures": [
                {"value": "state", "label": STATES_LABEL},
                {"value": "category", "label": f"{lens} · categories"},
            ],
            "label": STATES_LABEL if measure == "state" else f"{lens} · categories",
            "view": view,
            "names": names,
            "ranks": [{"key": key, "name": name} for key, name in ranks.items()],
            "series": series,
            # One line per role across launches (series keys are roles); the chart marks
            # where each launch began.
            "launches": launch_starts(run=run),
        }
    )


def _run_lens(run: Run) -> str:
    """The keyword lens of the run's captures, naming every set they were analysed with."""
    sets = (
        Capture.objects.filter(run=run, status=Capture.Status.DONE)
        .exclude(kind=Capture.Kind.DUMP)
        .values_list("keyword_set__name", "keyword_set__is_default")
        .distinct()
    )
    return keyword_lens(sets)


def _run_view(params: Any, names: list[str], ranks: dict[str, str]) -> dict[str, Any]:
    if params.get("series"):
        return {"by": "name", "name": None, "series": params["series"]}
    if params.get("name") or len(ranks) > 1:
        name = params.get("name") or (names[0] if names else None)
        return {"by": "rank", "name": name, "series": None}
    return {"by": "name", "name": None, "series": next(iter(ranks), None)}


# --- across runs ------------------------------------------------------------------------


def _keywords() -> list[tuple[str, str, str, bool]]:
    return list(
        Keyword.objects.values_list(
            "keyword", "category", "keyword_set__name", "keyword_set__is_default"
        )
    )


def _trend_names(keywords: list[tuple[str, str, str, bool]]) -> dict[str, list[str]]:
    return {
        "state": list(STATES),
        "category": sorted({c for _, c, *_ in keywords} | {k.category for k in GPU_KEYWORDS}),
        "keyword": sorted({k for k, *_ in keywords} | {k.keyword for k in GPU_KEYWORDS}),
    }


def _label(kind: str, name: str, keywords: list[tuple[str, str, str, bool]]) -> str:
    """What the chart plots: a state, or a keyword lens naming the sets that have `name`."""
    if kind == "state":
        return f"{STATES_LABEL} · {name}"
    column = 1 if kind == "category" else 0
    sets = {(row[2], row[3]) for row in keywords if row[column] == name}
    return f"{keyword_lens(sets)} · {kind} {name}"


@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    """`/trends/`: one state's (or, through a keyword lens, one category's or keyword's)
    share over the last N runs."""
    options = _trend_options(request)
    keywords = _keywords()
    names = _trend_names(keywords)
    page = {**options, "dataUrl": reverse("compare:trends_data")}
    context = {
        "options": options,
        "names": names,
        "page": page,
        "label": _label(options["kind"], options["name"], keywords),
        "unknown": options["name"] not in names[options["kind"]],
    }
    return render(request, "profiles/trends.html", context)


DEFAULT_NAMES = {"state": "compute", "category": "sync", "keyword": "cuStreamSynchronize"}


def _trend_options(request: HttpRequest) -> dict[str, Any]:
    kind = request.GET.get("kind") if request.GET.get("kind") in KINDS else "state"
    mode = "mean" if request.GET.get("mode") == "mean" else "latest"
    runs = query_int(request.GET, "runs")
    runs = TREND_RUNS_DEFAULT if runs is None else runs
    name = request.GET.get("name") or DEFAULT_NAMES[kind]
    return {"kind": kind, "name": name, "mode": mode, "runs": min(max(runs, 1), TREND_RUNS_MAX)}


@require_GET
def trends_data(request: HttpRequest) -> JsonResponse:
    """Per run (x = its start): each rank's latest capture and the latest whole-job
    capture, or in "mean" mode one point, the mean over the run's captures."""
    options = _trend_options(request)
    runs = list(Run.objects.order_by("-created_at")[: options["runs"]])[::-1]
    qs = Capture.objects.filter(run__in=runs).order_by("-finished_at", "-queued_at")
    by_run: dict[int, list[sr.Measured]] = {}
    for capture in sr.measured_captures(qs, kind=options["kind"]):
        by_run.setdefault(capture.run_id, []).append(capture)
    kind, name = options["kind"], options["name"]
    if options["mode"] == "mean":
        series = _mean_series(runs, by_run, kind, name)
    else:
        series = _latest_series(runs, by_run, kind, name)
    keywords = _keywords()
    unknown = name not in _trend_names(keywords)[kind]
    label = _label(kind, name, keywords)
    return JsonResponse({**options, "label": label, "unknown": unknown, "series": series})


def _run_at(run: Run) -> str:
    return (run.started_at or run.created_at).isoformat()


def _mean_series(
    runs: list[Run], by_run: dict[int, list[sr.Measured]], kind: str, name: str
) -> list[sr.TrendSeries]:
    """One point per run: the mean over its units, a whole-job capture weighing as one
    capture however many ranks it has; the band is their range, not an interval."""
    series = sr.new_series("mean", f"{name} (mean per run)", "job")
    for run in runs:
        units = sr.units(by_run.get(run.pk, []))
        points = [p for u in units if (p := sr.unit_point(u, kind, name, run.name)) is not None]
        if not points:
            continue
        point, values = points[0], [p["percent"] for p in points]
        if len(points) > 1:
            point.update(percent=round(fmean(values), 2), low=min(values), high=max(values))
            point["label"] = f"{run.name} (mean of {len(values)} captures)"
        elif point["label"] != run.name:
            point["label"] = f"{run.name} · {point['label']}"
        point["at"] = _run_at(run)
        series["points"].append(point)
    return [series]


def _latest_series(
    runs: list[Run], by_run: dict[int, list[sr.Measured]], kind: str, name: str
) -> list[sr.TrendSeries]:
    """A series per rank (its latest capture in each run) and the whole job's (each
    run's latest whole-job capture); `by_run` lists each run's captures newest first."""
    job = sr.new_series(sr.JOB, sr.JOB_NAME, "job")
    ranks: dict[str, sr.TrendSeries] = {}
    for run in runs:
        captures = by_run.get(run.pk, [])
        if (point := _latest_job_point(run, captures, kind, name)) is not None:
            job["points"].append(point)
        for key, title, point in _latest_rank_points(run, captures, kind, name):
            ranks.setdefault(key, sr.new_series(key, title, "rank"))["points"].append(point)
    ordered = sorted(ranks.values(), key=lambda s: sr.natural(s["name"]))
    return sr.pick_shown(([job] if job["points"] else []) + ordered)


def _latest_job_point(
    run: Run, captures: list[sr.Measured], kind: str, name: str
) -> sr.TrendPoint | None:
    for unit in sr.units(c for c in captures if c.group_id):
        if (point := sr.unit_point(unit, kind, name, "")) is not None:
            point["label"] = f"{run.name} · {point['label']}"
            point["at"] = _run_at(run)
            return point
    return None


def _latest_rank_points(
    run: Run, captures: list[sr.Measured], kind: str, name: str
) -> list[tuple[str, str, sr.TrendPoint]]:
    """(key, name, point) of each rank's latest capture that measured `name`."""
    keys = _cross_run_keys(run, captures)
    found: dict[str, tuple[str, str, sr.TrendPoint]] = {}
    for capture in captures:
        key, title = keys[capture.pk]
        if key in found or (side := sr.share(capture, kind, name)) is None:
            continue
        point = sr.capture_point(capture, side, f"{run.name} · {title} #{capture.pk}")
        point["at"] = _run_at(run)
        found[key] = (key, title, point)
    return list(found.values())


def _cross_run_keys(run: Run, captures: list[sr.Measured]) -> dict[int, tuple[str, str]]:
    """Roles and import names carry across runs; a host:pid does not (pids are reused),
    except that the one process of a run without roles continues the previous run's."""
    keys = sr.series_keys(captures)
    processes = {key for key, _ in keys.values() if key.startswith("proc:")}
    for pk, (key, title) in keys.items():
        if len(processes) == 1 and key in processes:
            keys[pk] = (SINGLE, SINGLE_NAME)
        elif not key.startswith(("role:", "import:")):
            keys[pk] = (f"run{run.pk}:{key}", title)
    return keys
