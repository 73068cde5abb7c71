"""Share series never join two ranks: the run page's chart (`/runs/<id>/trends.json`),
the cross-run trends (`/trends.json`) and the runs-list sparkline. They plot the step
threads' states unless the user picks a keyword lens, which is labelled as one."""

import pytest
from django.urls import reverse

from profiles.models import Capture, KeywordSet
from runs.models import Run, RunProcess
from tests.factories import (
    done_capture,
    local_host,
    minutes_ago,
    ranked_processes,
    whole_job_capture,
)

pytestmark = pytest.mark.django_db


def run_chart(client, run, **params):
    return client.get(reverse("compare:run_trends", args=[run.pk]), params).json()


def by_key(data):
    return {s["key"]: s for s in data["series"]}


def rank_of(capture_id: int) -> str:
    return Capture.objects.select_related("process").get(pk=capture_id).process.role


def assert_one_rank_per_series(data):
    for series in data["series"]:
        if series["kind"] == "rank":
            assert len({rank_of(p["capture"]) for p in series["points"]}) == 1, series["name"]


# --- the run page's chart ------------------------------------------------------------------


def test_single_captures_of_different_ranks_draw_one_line_per_rank(teammate_client):
    """The trial's run: gil 25 → 5 → 38 → 6 % read as one line, alternating ranks."""
    run = Run.objects.create(name="job")
    rank0, _, _, rank3 = ranked_processes(run, 4)
    for minutes, process, gil in [(40, rank0, 25), (30, rank3, 5), (20, rank0, 38), (10, rank3, 6)]:
        done_capture(process=process, shares={}, step={"gil": gil}, at=minutes_ago(minutes))
    default = run_chart(teammate_client, run)
    assert default["measure"] == "state" and default["names"] == ["compute", "gil"]
    assert default["view"] == {"by": "rank", "name": "compute", "series": None}
    data = run_chart(teammate_client, run, name="gil")
    assert data["view"] == {"by": "rank", "name": "gil", "series": None}
    series = by_key(data)
    assert set(series) == {"role:rank-0", "role:rank-3"}
    assert [p["percent"] for p in series["role:rank-0"]["points"]] == [25, 38]
    assert [p["percent"] for p in series["role:rank-3"]["points"]] == [5, 6]
    assert series["role:rank-3"]["name"] == "rank-3"
    assert_one_rank_per_series(data)


def test_a_whole_job_capture_is_a_point_per_rank_and_one_whole_job_point(teammate_client):
    run = Run.objects.create(name="job")
    processes = ranked_processes(run, 3)
    group = whole_job_capture(
        run, processes, [{"sync": 10}, {"sync": 20}, {"sync": 60}], at=minutes_ago(30)
    )
    done_capture(process=processes[1], shares={"sync": 22}, at=minutes_ago(5))
    series = by_key(run_chart(teammate_client, run, measure="category", name="sync"))
    (job_point,) = series["job"]["points"]
    assert (job_point["percent"], job_point["low"], job_point["high"]) == (30.0, 10, 60)
    assert job_point["url"] == reverse("profiles:group_detail", args=[group.pk])
    assert job_point["label"] == f"whole-job capture #{group.pk} (3 ranks)"
    assert [p["percent"] for p in series["role:rank-1"]["points"]] == [20, 22]
    assert [len(series[f"role:rank-{i}"]["points"]) for i in (0, 2)] == [1, 1]


def test_a_restarted_rank_with_a_new_pid_keeps_its_line(teammate_client):
    run = Run.objects.create(name="restarts")
    first = RunProcess.objects.create(run=run, host=local_host(), pid=10, role="rank-0")
    again = RunProcess.objects.create(run=run, host=local_host(), pid=20, role="rank-0")
    done_capture(process=first, shares={"sync": 5}, at=minutes_ago(20))
    done_capture(process=again, shares={"sync": 7}, at=minutes_ago(10))
    data = run_chart(teammate_client, run, measure="category", name="sync")
    assert [(s["key"], len(s["points"])) for s in data["series"]] == [("role:rank-0", 2)]


def test_a_role_every_process_shares_is_no_rank_so_each_process_has_its_line(teammate_client):
    run = Run.objects.create(name="workers")
    processes = ranked_processes(run, 2, role="worker")
    whole_job_capture(run, processes, [{"sync": 1}, {"sync": 50}], at=minutes_ago(20))
    whole_job_capture(run, processes, [{"sync": 2}, {"sync": 52}], at=minutes_ago(10))
    series = by_key(run_chart(teammate_client, run, measure="category", name="sync"))
    host = local_host()
    assert set(series) == {"job", f"proc:{host.pk}:1000", f"proc:{host.pk}:1001"}
    assert [p["percent"] for p in series[f"proc:{host.pk}:1001"]["points"]] == [50, 52]
    assert series[f"proc:{host.pk}:1001"]["name"] == "worker local:1001"


def test_at_64_ranks_four_are_drawn_first_the_highest_and_the_most_changed(teammate_client):
    run = Run.objects.create(name="big")
    processes = ranked_processes(run, 64)
    before = [{"comm": 20.0} for _ in processes]
    after = [{"comm": 20.0 + (i % 3)} for i in range(64)]
    before[7], after[7] = {"comm": 5.0}, {"comm": 45.0}  # changed most, and highest
    before[40], after[40] = {"comm": 44.0}, {"comm": 44.0}  # second highest, unchanged
    before[12], after[12] = {"comm": 40.0}, {"comm": 21.0}  # second largest change
    whole_job_capture(run, processes, before, at=minutes_ago(60))
    whole_job_capture(run, processes, after, at=minutes_ago(10))
    data = run_chart(teammate_client, run, measure="category")
    assert data["view"] == {"by": "rank", "name": "comm", "series": None}
    assert len(data["series"]) == 65 and data["series"][0]["key"] == "job"
    drawn = {s["name"]: s["reason"] for s in data["series"] if s["shown"]}
    assert drawn["whole job (mean of ranks)"] == ""
    assert drawn["rank-7"] == "highest latest share" and drawn["rank-12"] == "changed most"
    assert drawn["rank-40"] == "highest latest share" and len(drawn) == 5
    assert [r["name"] for r in data["ranks"][:4]] == [
        "whole job (mean of ranks)",
        "rank-0",
        "rank-1",
        "rank-2",
    ]
    assert_one_rank_per_series(data)


def test_one_rank_can_be_plotted_with_a_line_per_category_of_the_keyword_lens(teammate_client):
    run = Run.objects.create(name="one rank")
    rank0, rank1 = ranked_processes(run, 2)
    done_capture(process=rank0, shares={"sync": 30, "launch": 5}, at=minutes_ago(20))
    done_capture(process=rank1, shares={"sync": 90, "launch": 1}, at=minutes_ago(15))
    done_capture(process=rank0, shares={"sync": 10, "launch": 7}, at=minutes_ago(10))
    data = run_chart(teammate_client, run, measure="category", series="role:rank-0")
    assert data["view"] == {"by": "name", "name": None, "series": "role:rank-0"}
    series = {s["name"]: [p["percent"] for p in s["points"]] for s in data["series"]}
    assert series == {"sync": [30, 10], "launch": [5, 7]}
    assert {s["kind"] for s in data["series"]} == {"category"}
    assert data["series"][0]["points"][0]["label"].endswith(" rank-0")


def test_a_run_of_one_process_plots_its_step_threads_states_by_default(teammate_client):
    run = Run.objects.create(name="solo")
    (process,) = ranked_processes(run, 1, role="")
    step = {"host_sync": 30, "data_wait": 5}
    done_capture(process=process, shares={"sync": 30}, step=step, at=minutes_ago(9))
    data = run_chart(teammate_client, run)
    assert data["measure"] == "state" and data["view"]["by"] == "name"
    assert data["view"]["series"] == f"proc:{process.host_id}:{process.pid}"
    series = {s["name"]: s for s in data["series"]}
    assert list(series) == ["compute", "host_sync", "data_wait"]
    assert {s["kind"] for s in series.values()} == {"state"}
    assert [p["percent"] for p in series["host_sync"]["points"]] == [30]


def test_a_state_a_rank_was_never_in_is_0_percent_not_a_missing_point(teammate_client):
    run = Run.objects.create(name="pair")
    rank0, rank1 = ranked_processes(run, 2)
    done_capture(process=rank0, shares={}, step={"collective": 40}, at=minutes_ago(9))
    done_capture(process=rank1, shares={}, step={}, at=minutes_ago(8))
    series = by_key(run_chart(teammate_client, run, name="collective"))
    assert [p["percent"] for p in series["role:rank-0"]["points"]] == [40]
    assert [p["percent"] for p in series["role:rank-1"]["points"]] == [0]


def test_the_keyword_lens_is_labelled_as_one_naming_the_runs_keyword_sets(teammate_client):
    run = Run.objects.create(name="lens")
    (process,) = ranked_processes(run, 1)
    default = KeywordSet.objects.get(is_default=True)
    mine = KeywordSet.objects.create(name="<b>data</b> set")
    done_capture(process=process, shares={"sync": 3}, keyword_set=default, at=minutes_ago(9))
    done_capture(process=process, shares={"sync": 4}, keyword_set=mine, at=minutes_ago(8))
    data = run_chart(teammate_client, run, measure="category")
    lens = f"Keyword lens: <b>data</b> set, {default.name} (default set) · categories"
    assert data["measure"] == "category" and data["label"] == lens
    assert data["measures"] == [
        {"value": "state", "label": "Thread states of the step threads"},
        {"value": "category", "label": lens},
    ]
    assert run_chart(teammate_client, run)["label"] == "Thread states of the step threads"


def test_imports_of_one_file_name_share_a_line_and_other_names_do_not(teammate_client):
    run = Run.objects.create(name="imports")
    done_capture(run=run, shares={"sync": 10}, original_name="rank0.txt", at=minutes_ago(30))
    done_capture(run=run, shares={"sync": 80}, original_name="rank1.txt", at=minutes_ago(20))
    done_capture(run=run, shares={"sync": 12}, original_name="rank0.txt", at=minutes_ago(10))
    series = by_key(run_chart(teammate_client, run, measure="category", name="sync"))
    assert [p["percent"] for p in series["import:rank0.txt"]["points"]] == [10, 12]
    assert [p["percent"] for p in series["import:rank1.txt"]["points"]] == [80]


def test_the_run_chart_reads_in_a_few_queries(teammate_client, django_assert_max_num_queries):
    run = Run.objects.create(name="big")
    processes = ranked_processes(run, 64)
    for minutes in (50, 40, 30):
        step = [{"gil": 9}] * 64
        whole_job_capture(run, processes, [{"sync": 9}] * 64, step=step, at=minutes_ago(minutes))
    with django_assert_max_num_queries(5):
        data = run_chart(teammate_client, run)
    assert len(by_key(data)["role:rank-5"]["points"]) == 3


# --- across runs -----------------------------------------------------------------------------


def cross_run(client, **params):
    params = {"name": "gil", "kind": "category", **params}
    return client.get(reverse("compare:trends_data"), params).json()


def test_trends_across_runs_plot_a_state_by_default_and_label_a_keyword_lens(teammate_client):
    for i in range(2):
        run = Run.objects.create(name=f"run-{i}")
        process = ranked_processes(run, 1)[0]
        done_capture(process=process, shares={"gil": 7}, step={"gil": 20 + i}, at=minutes_ago(9))
    data = teammate_client.get(reverse("compare:trends_data"), {"name": "gil"}).json()
    assert data["kind"] == "state" and data["label"] == "Thread states of the step threads · gil"
    assert [p["percent"] for p in by_key(data)["role:rank-0"]["points"]] == [20, 21]
    lens = cross_run(teammate_client)
    default = KeywordSet.objects.get(is_default=True).name
    assert lens["label"] == f"Keyword lens: {default} (default set) · category gil"
    assert [p["percent"] for p in by_key(lens)["role:rank-0"]["points"]] == [7, 7]


def test_latest_trends_follow_each_rank_across_runs_and_never_join_two(teammate_client):
    """Run A's latest capture is of rank 0, run B's of rank 3: two lines of one point."""
    a, b = Run.objects.create(name="a"), Run.objects.create(name="b")
    done_capture(process=ranked_processes(a, 1)[0], shares={"gil": 25}, at=minutes_ago(30))
    b3 = RunProcess.objects.create(run=b, host=local_host(), pid=5, role="rank-3")
    done_capture(process=b3, shares={"gil": 5}, at=minutes_ago(20))
    data = cross_run(teammate_client)
    series = {s["name"]: [p["label"] for p in s["points"]] for s in data["series"]}
    assert set(series) == {"rank-0", "rank-3"}
    assert [len(labels) for labels in series.values()] == [1, 1]
    assert series["rank-3"][0].startswith("b · rank-3 #")


def test_latest_trends_give_each_run_its_ranks_latest_and_its_latest_whole_job_point(
    teammate_client,
):
    runs = [Run.objects.create(name=f"run-{i}") for i in range(2)]
    for i, run in enumerate(runs):
        processes = ranked_processes(run, 2)
        whole_job_capture(run, processes, [{"gil": 10 + i}, {"gil": 30}], at=minutes_ago(50))
        done_capture(process=processes[0], shares={"gil": 40 + i}, at=minutes_ago(40))
    series = by_key(cross_run(teammate_client))
    assert [p["percent"] for p in series["role:rank-0"]["points"]] == [40, 41]
    assert [p["percent"] for p in series["role:rank-1"]["points"]] == [30, 30]
    assert [p["percent"] for p in series["job"]["points"]] == [20.0, 20.5]
    assert series["job"]["points"][0]["label"].startswith("run-0 · whole-job capture #")


def test_runs_of_one_process_without_a_role_continue_one_line(teammate_client):
    for i in range(3):
        run = Run.objects.create(name=f"solo-{i}")
        (process,) = ranked_processes(run, 1, role="")
        done_capture(process=process, shares={"gil": 10 * i}, at=minutes_ago(30 - i))
    (series,) = cross_run(teammate_client)["series"]
    assert series["name"] == "the only process (runs without roles)"
    assert [p["percent"] for p in series["points"]] == [0, 10, 20]


def test_processes_without_roles_in_a_run_of_several_stay_in_their_run(teammate_client):
    host = local_host()
    for name in ("a", "b"):
        run = Run.objects.create(name=name)
        for pid in (1, 2):
            process = RunProcess.objects.create(run=run, host=host, pid=pid)
            done_capture(process=process, shares={"gil": pid}, at=minutes_ago(9))
    data = cross_run(teammate_client)
    assert len(data["series"]) == 4 and all(len(s["points"]) == 1 for s in data["series"])


# --- the runs list ---------------------------------------------------------------------------


def spark_of(client, run):
    rows = client.get(reverse("runs:run_list")).context["rows"]
    return next(r["spark"] for r in rows if r["run"].pk == run.pk)


def test_the_sparkline_draws_the_whole_job_when_the_run_has_whole_job_captures(
    teammate_client,
):
    run = Run.objects.create(name="job")
    processes = ranked_processes(run, 4)
    for minutes, gil in ((30, 10), (20, 30)):
        step = [{"gil": gil + i} for i in range(4)]
        whole_job_capture(run, processes, [{}] * 4, step=step, at=minutes_ago(minutes))
    done_capture(process=processes[3], shares={}, step={"gil": 90}, at=minutes_ago(10))
    spark = spark_of(teammate_client, run)
    assert spark["series"] == "whole job" and spark["count"] == 2
    lines = {line["state"]: line["last"] for line in spark["lines"]}
    assert lines == {"compute": 68.5, "gil": 31.5}  # never the lone 90 %


def test_the_sparkline_mean_counts_a_rank_without_a_state_as_0_percent(teammate_client):
    run = Run.objects.create(name="one waits")
    processes = ranked_processes(run, 4)
    step = [{"collective": 40}, {}, {}, {}]
    whole_job_capture(run, processes, [{}] * 4, step=step, at=minutes_ago(5))
    lines = {line["state"]: line["last"] for line in spark_of(teammate_client, run)["lines"]}
    assert lines == {"compute": 90.0, "collective": 10.0}


def test_the_sparkline_draws_states_never_a_keyword_category(teammate_client):
    run = Run.objects.create(name="lens only")
    (process,) = ranked_processes(run, 1)
    done_capture(process=process, shares={"comm": 66.7, "wait": 66.7}, at=minutes_ago(5))
    assert spark_of(teammate_client, run) is None  # analysed before states: nothing drawn
    done_capture(process=process, shares={"comm": 66.7}, step={"idle": 5}, at=minutes_ago(1))
    html = teammate_client.get(reverse("runs:run_list")).content.decode()
    rows = html.split("State trend")[1]
    assert 'class="st-compute"' in rows and "cat-" not in rows and "66.7" not in rows


def test_the_sparkline_of_single_captures_draws_the_rank_captured_most(teammate_client):
    run = Run.objects.create(name="ranks in turn")
    rank0, rank3 = ranked_processes(run, 2)
    for minutes, process, gil in [(40, rank0, 25), (30, rank3, 5), (20, rank0, 38)]:
        done_capture(process=process, shares={}, step={"gil": gil}, at=minutes_ago(minutes))
    spark = spark_of(teammate_client, run)
    assert spark["series"] == "rank-0" and spark["count"] == 2
    assert {line["state"]: line["last"] for line in spark["lines"]} == {"compute": 62, "gil": 38}


def test_the_sparkline_counts_a_64_rank_capture_as_one_of_its_12_in_bounded_queries(
    teammate_client, django_assert_max_num_queries
):
    runs = [Run.objects.create(name=f"r{i}") for i in range(3)]
    for run in runs:
        processes = ranked_processes(run, 64)
        for minutes in range(14):
            step = [{"data_wait": minutes}] * 64
            whole_job_capture(run, processes, [{}] * 64, step=step, at=minutes_ago(minutes))
    with django_assert_max_num_queries(10):
        response = teammate_client.get(reverse("runs:run_list"))
    spark = response.context["rows"][0]["spark"]
    lines = {line["state"]: line["last"] for line in spark["lines"]}
    assert spark["count"] == 12 and lines == {"compute": 100, "data_wait": 0}
    html = response.content.decode()
    assert 'aria-label="step-thread states of whole job over its last 12 captures"' in html


def test_the_sparkline_escapes_a_role(teammate_client):
    run = Run.objects.create(name="xss")
    (process,) = ranked_processes(run, 1, role="<img src=x onerror=alert(1)>")
    done_capture(process=process, shares={}, step={"gil": 3}, at=minutes_ago(1))
    html = teammate_client.get(reverse("runs:run_list")).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;:" in html and "<img src=x" not in html


def test_the_runs_list_names_the_newest_capture_whatever_its_status(teammate_client):
    run = Run.objects.create(name="busy")
    (process,) = ranked_processes(run, 1)
    done_capture(process=process, shares={}, step={"gil": 3}, at=minutes_ago(5))
    queued = Capture.objects.create(run=run, process=process, host=process.host, pid=process.pid)
    rows = teammate_client.get(reverse("runs:run_list")).context["rows"]
    (row,) = [r for r in rows if r["run"].pk == run.pk]
    assert (row["latest"]["pk"], row["latest"]["status"]) == (queued.pk, "queued")
    assert row["spark"]["count"] == 1  # the sparkline draws done captures only
