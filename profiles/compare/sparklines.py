"""The runs list's sparklines: per run, one series over its last few captures (the
whole job's, or the rank captured most), never a line through two ranks, drawn as
polylines of its step threads' main states (the product's words, as on the run and
whole-job pages; keyword sets stay a lens of the capture, compare and trends pages)."""

from __future__ import annotations

from collections import Counter

from django.db import connection
from django.db.models import F, QuerySet, Window
from django.db.models.functions import Coalesce, DenseRank

from profiles.compare.series import Measured, measured_captures, series_keys
from profiles.models import Capture
from profiles.pyspy import STATES

SPARK_UNITS = 12
# Each whole-job capture's step-thread states, averaged over its ranks in the database:
# the runs list reads one row per job and state instead of every rank's stats (a page of
# runs with 64-rank jobs is ~20,000 captures). A rank stores only the states it was in,
# so the mean divides by the job's ranks with step threads, not by the ranks that had
# the state. `ids` is a subquery (its parameters given twice); names are constants.
_JOB_MEANS = {
    "postgresql": """
        SELECT c.run_id, c.group_id, e.state,
               100 * SUM(e.samples / (c.stats->'step_threads'->>'samples')::float)
                   / MIN(n.ranks)
        FROM {table} c
        JOIN (SELECT group_id, COUNT(*) AS ranks FROM {table}
              WHERE id IN ({ids}) AND group_id IS NOT NULL
                AND (stats->'step_threads'->>'samples')::float > 0
              GROUP BY group_id) n ON n.group_id = c.group_id
        CROSS JOIN LATERAL jsonb_to_recordset(c.stats->'step_threads'->'states')
            AS e(state text, samples float)
        WHERE c.id IN ({ids}) AND (c.stats->'step_threads'->>'samples')::float > 0
        GROUP BY c.run_id, c.group_id, e.state
        ORDER BY MIN(c.queued_at), c.group_id""",
    "sqlite": """
        SELECT c.run_id, c.group_id, json_extract(e.value, '$.state'),
               100 * SUM(json_extract(e.value, '$.samples') * 1.0
                         / json_extract(c.stats, '$.step_threads.samples')) / MIN(n.ranks)
        FROM {table} c
        JOIN (SELECT group_id, COUNT(*) AS ranks FROM {table}
              WHERE id IN ({ids}) AND group_id IS NOT NULL
                AND json_extract(stats, '$.step_threads.samples') > 0
              GROUP BY group_id) n ON n.group_id = c.group_id
        CROSS JOIN json_each(c.stats, '$.step_threads.states') AS e
        WHERE c.id IN ({ids}) AND json_extract(c.stats, '$.step_threads.samples') > 0
        GROUP BY c.run_id, c.group_id, json_extract(e.value, '$.state')
        ORDER BY MIN(c.queued_at), c.group_id""",
}


def spark_series(run_ids: list[int]) -> dict[int, tuple[str, list[dict[str, float]]]]:
    """Per run, the one series its sparkline draws, as (name, [{state: percent}]) oldest
    first, over its last SPARK_UNITS done captures (a whole-job capture counting as
    one): the whole job's when there are whole-job captures among them, else the rank
    captured most. Percentages are of the step threads' samples."""
    if not run_ids:  # `IN ()` has no SQL: Django raises EmptyResultSet for it
        return {}
    unit_at = Coalesce(F("group__created_at"), F("queued_at"))
    order = [unit_at.desc(), F("group_id").desc(nulls_last=True)]
    recent = (
        Capture.objects.filter(run_id__in=run_ids, status=Capture.Status.DONE)
        .annotate(unit=Window(DenseRank(), partition_by=F("run_id"), order_by=order))
        .filter(unit__lte=SPARK_UNITS)
        .values("pk")
    )
    found = {run: ("whole job", points) for run, points in _job_means(recent).items()}
    singles: dict[int, list[Measured]] = {}
    rest = [run for run in run_ids if run not in found]
    alone = Capture.objects.filter(pk__in=recent, run_id__in=rest, group__isnull=True)
    for capture in measured_captures(alone.order_by("queued_at"), kind="state") if rest else []:
        singles.setdefault(capture.run_id, []).append(capture)
    return found | {run: _rank_captured_most(captures) for run, captures in singles.items()}


def _job_means(ids: QuerySet[Capture]) -> dict[int, list[dict[str, float]]]:
    sql, params = ids.query.sql_with_params()
    query = _JOB_MEANS[connection.vendor].format(table=Capture._meta.db_table, ids=sql)
    points: dict[int, dict[int, dict[str, float]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(query, (*params, *params))
        for run, group, state, percent in cursor.fetchall():
            if percent is not None:
                points.setdefault(run, {}).setdefault(group, {})[state] = round(percent, 2)
    return {run: list(groups.values()) for run, groups in points.items()}


def _rank_captured_most(captures: list[Measured]) -> tuple[str, list[dict[str, float]]]:
    keys = series_keys(captures)
    count = Counter(keys[c.pk] for c in captures)
    last = {keys[c.pk]: i for i, c in enumerate(captures)}
    best = max(count, key=lambda k: (count[k], last[k]))
    return best[1], [
        {name: round(100 * int(n) / c.sample_count, 2) for name, n in c.measures}
        for c in captures
        if keys[c.pk] == best
    ]


SPARK_STATES = 3


def sparkline(
    series: tuple[str, list[dict[str, float]]] | None, width: int = 120, height: int = 26
) -> dict | None:
    """Polylines of the main states' shares in one series (the whole job's, or one
    rank's: never a line through two ranks), oldest to newest."""
    if not series:
        return None
    name, points = series
    # The engine's vocabulary only: a state name becomes a CSS class.
    known = {s for p in points for s in p if s in STATES}
    main = sorted(known, key=lambda s: -sum(p.get(s, 0) for p in points))[:SPARK_STATES]
    top = max([point.get(c, 0) for point in points for c in main] + [1])
    step = width / max(len(points) - 1, 1)
    lines = []
    for state in main:
        xy = [
            f"{i * step:.1f},{height - 2 - point.get(state, 0) / top * (height - 4):.1f}"
            for i, point in enumerate(points)
        ]
        last = points[-1].get(state, 0)
        lines.append({"state": state, "points": " ".join(xy), "last": last})
    return {"series": name, "lines": lines, "count": len(points)}
