"""One vocabulary: the tables that summarise a capture or a process (the run page's
processes, captures and whole-job captures, the host page, the captures list and the
rows they add live) show the step threads' states as the analysis stored them, never a
keyword lens. The DDP job a user saw: its idle queue-feeder threads put the keyword
lens at COMM, WAIT and PYTHON QUEUE 66.7% on every rank, under states that said the
step threads were in their collective."""

import pytest
from django.urls import reverse

from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess

pytestmark = pytest.mark.django_db

FEEDERS = "<b>QueueFeederThread</b>"


def ddp_stats(*, step: bool = True, states: bool = True) -> dict:
    """A DDP rank as stored: a main thread in its all-reduce, two idle queue feeders
    (named with markup: thread names are the program's), and the keyword lens that read
    the feeders as communication and waiting."""
    step_states = [
        {"state": "compute", "samples": 120, "percent": 40.0},
        {"state": "collective", "samples": 180, "percent": 60.0},
    ]
    stats = {
        "format": "raw",
        "total_samples": 900,
        "categories": [
            {"category": "comm", "samples": 600, "percent": 66.7},
            {"category": "wait", "samples": 600, "percent": 66.7},
            {"category": "python queue", "samples": 600, "percent": 66.7},
        ],
        "keywords": [],
        "top_self": [],
        "top_total": [],
    }
    if states:
        stats["states"] = [
            {"state": "compute", "samples": 120, "percent": 13.33},
            {"state": "collective", "samples": 180, "percent": 20.0},
            {"state": "idle", "samples": 600, "percent": 66.67},
        ]
    if step:
        stats["step_threads"] = {
            "tids": ["1"],
            "names": [f"MainThread {FEEDERS}"],
            "detected_by": "collective",
            "samples": 300,
            "states": step_states,
        }
    return stats


@pytest.fixture
def rank(db):
    run = Run.objects.create(name="ddp")
    process = RunProcess.objects.create(
        run=run, host=Host.objects.get(name="local"), pid=4242, role="rank-0"
    )
    return process


def done(process, stats, **fields) -> Capture:
    return Capture.objects.create(
        run=process.run,
        process=process,
        host=process.host,
        pid=process.pid,
        status=Capture.Status.DONE,
        stats=stats,
        **fields,
    )


def row_of(html: str, capture: Capture) -> str:
    return html.split(f'<tr data-capture="{capture.pk}"')[1].split("</tr>")[0]


def page_urls(process) -> dict[str, str]:
    return {
        "run": process.run.get_absolute_url(),
        "host": reverse("runs:host_detail", args=[process.host_id]),
        "captures": reverse("profiles:capture_list"),
        "new rows": reverse("profiles:capture_rows") + f"?run={process.run_id}",
    }


@pytest.mark.parametrize("page", ["run", "host", "captures", "new rows"])
def test_a_capture_row_shows_its_step_threads_states_and_no_keyword_lens(
    teammate_client, rank, page
):
    capture = done(rank, ddp_stats())
    html = teammate_client.get(page_urls(rank)[page]).content.decode()
    row = row_of(html, capture)
    assert '<span class="seg st-collective" data-state="collective" data-width="60.0">' in row
    assert '<span class="seg st-compute" data-state="compute" data-width="40.0">' in row
    assert "collective 60.0%" in row and "idle" not in row
    assert "comm" not in row and "66.7" not in row and "cat-" not in row
    # The thread names the title gives are the program's text: escaped.
    assert "step thread: MainThread &lt;b&gt;QueueFeederThread&lt;/b&gt;: collective" in row
    assert FEEDERS not in html


def test_the_captures_table_heads_its_column_as_states(teammate_client, rank):
    done(rank, ddp_stats())
    html = teammate_client.get(rank.run.get_absolute_url()).content.decode()
    head = html.split('<table class="dense captures"')[1].split("</thead>")[0]
    assert "States <span" in head and "(step threads)" in head and "categor" not in head


def test_a_capture_analysed_before_step_threads_shows_every_threads_states(teammate_client, rank):
    capture = done(rank, ddp_stats(step=False))
    row = row_of(teammate_client.get(rank.run.get_absolute_url()).content.decode(), capture)
    assert 'title="all threads: idle 66.7% · collective 20.0% · compute 13.3%"' in row
    assert "idle 66.7%" in row and "comm" not in row


def test_a_capture_analysed_before_states_says_so_and_shows_no_lens(teammate_client, rank):
    capture = done(rank, ddp_stats(step=False, states=False))
    row = row_of(teammate_client.get(rank.run.get_absolute_url()).content.decode(), capture)
    assert "no states" in row and "re-analyse" in row
    assert "comm" not in row and "66.7" not in row


def test_a_state_outside_the_vocabulary_never_becomes_a_class(teammate_client, rank):
    stats = ddp_stats()
    stats["step_threads"]["states"].append(
        {"state": 'x" onmouseover="alert(1)', "samples": 1, "percent": 99.0}
    )
    capture = done(rank, stats)
    row = row_of(teammate_client.get(rank.run.get_absolute_url()).content.decode(), capture)
    assert "onmouseover" not in row and "collective 60.0%" in row


def test_the_processes_table_shows_each_process_latest_done_capture_states(teammate_client, rank):
    other = RunProcess.objects.create(run=rank.run, host=rank.host, pid=5, role="rank-1")
    older = ddp_stats()
    older["step_threads"]["states"] = [{"state": "data_wait", "samples": 300, "percent": 100.0}]
    done(rank, older)
    latest = done(rank, ddp_stats())
    Capture.objects.create(
        run=rank.run, process=rank, host=rank.host, pid=rank.pid, kind=Capture.Kind.DUMP,
        status=Capture.Status.DONE, stats={"format": "dump"},
    )  # fmt: skip
    Capture.objects.create(run=rank.run, process=rank, host=rank.host, pid=rank.pid)  # queued
    html = teammate_client.get(rank.run.get_absolute_url()).content.decode()
    head = html.split('id="processes"')[1].split("</thead>")[0]
    assert "<th" in head and "States <span" in head and "(latest capture)" in head
    row = html.split(f'<tr data-process="{rank.pk}"')[1].split("</tr>")[0]
    cell = row.split('data-cell="latest-states">')[1].split("</td>")[0]
    assert reverse("profiles:capture_detail", args=[latest.pk]) in cell
    assert 'class="seg st-collective"' in cell and "collective 60.0%" in cell
    assert "data_wait" not in cell and "comm" not in cell
    empty = html.split(f'<tr data-process="{other.pk}"')[1].split("</tr>")[0]
    assert "no capture yet" in empty


def test_the_whole_job_captures_table_shows_the_mean_of_the_ranks_step_states(
    teammate_client, rank
):
    group = CaptureGroup.objects.create(run=rank.run)
    done(rank, ddp_stats(), group=group)

    def reported(name, states):
        rows = [{"state": s, "samples": int(p * 10), "percent": p} for s, p in states.items()]
        return {"name": name, "samples": 1000, "states": rows, "step_threads": ["MainThread"]}

    group.job_report = {
        "ranks": [
            reported("rank-0", {"compute": 40.0, "collective": 60.0}),
            reported("rank-1", {"compute": 100.0, "collective": 0.0}),
            {"name": "rank-2", "samples": 0, "states": []},  # no samples: not in the mean
        ]
    }
    group.save()
    html = teammate_client.get(rank.run.get_absolute_url()).content.decode()
    table = html.split('id="groups"')[1].split("</table>")[0]
    assert "States <span" in table
    assert 'title="step threads, mean of 2 ranks: compute 70.0% · collective 30.0%"' in table
    assert 'data-width="30.0"' in table and "compute 70.0%" in table


def test_the_run_page_keeps_its_query_bound_with_latest_states_per_process(
    teammate_client, rank, django_assert_max_num_queries
):
    for pid in range(20):
        process = RunProcess.objects.create(run=rank.run, host=rank.host, pid=pid, role=f"r{pid}")
        for _ in range(3):
            done(process, ddp_stats())
    with django_assert_max_num_queries(14):
        response = teammate_client.get(rank.run.get_absolute_url())
    label = '<span class="catlabel statelabel">collective 60.0%</span>'
    assert response.content.decode().count(label) == 20 + 50  # processes + captures rows
