"""Capture page additions of issue 13: compare links, the sandwich API, numbers that
agree with what was captured, deleting failed captures and editing one's own comments.
Every new route is checked for each persona (owner, teammate, anonymous)."""

import pytest
from django.test import Client
from django.urls import reverse

from profiles.captures import pipeline, record_notes, services
from profiles.models import Capture, CaptureGroup, Comment
from runs.models import Host, Run

from .test_views import LAG_LOG, RAW, imported

pytestmark = pytest.mark.django_db

RECURSIVE = (
    "thread (1): main;run (t.py:1);walk (t.py:5);walk (t.py:5);leaf (t.py:9) 3\n"
    "thread (1): main;run (t.py:1);walk (t.py:5) 2\n"
    "thread (2): aux;other (t.py:2);walk (t.py:5);cuLaunchKernel (libcuda.so.1) 5\n"
)

SYNC_HALF = (
    "thread (1): main;step (t.py:1);cuStreamSynchronize (libcuda.so.1) 5\n"
    "thread (1): main;step (t.py:1);forward (t.py:3) 5\n"
)
NO_SYNC = "thread (1): main;step (t.py:1);forward (t.py:3) 10\n"


def sandwich_url(capture, **query):
    from urllib.parse import urlencode

    return reverse("api:capture_sandwich", args=[capture.pk]) + "?" + urlencode(query)


# --- sandwich API -----------------------------------------------------------------------


def test_the_sandwich_api_counts_a_recursive_frame_once_per_sample(teammate_client, teammate):
    capture = imported(teammate, raw=RECURSIVE)
    body = teammate_client.get(sandwich_url(capture, frame="walk (t.py:5)")).json()
    assert (body["samples"], body["self_samples"], body["total_samples"]) == (10, 2, 10)
    assert {c["name"]: c["value"] for c in body["callers"]["children"]} == {
        "run (t.py:1)": 5,
        "other (t.py:2)": 5,
    }
    assert body["approximate"] is False and body["suggestions"] == []


def test_the_sandwich_api_follows_the_thread_filter(teammate_client, teammate):
    capture = imported(teammate, raw=RECURSIVE)
    body = teammate_client.get(sandwich_url(capture, frame="walk (t.py:5)", thread="aux")).json()
    assert body["samples"] == 5 and body["total_samples"] == 5
    assert [c["name"] for c in body["callers"]["children"]] == ["other (t.py:2)"]


def test_an_inexact_frame_gets_suggestions_instead_of_numbers(teammate_client, teammate):
    capture = imported(teammate, raw=RECURSIVE)
    body = teammate_client.get(sandwich_url(capture, frame="walk")).json()
    assert body["samples"] == 0
    assert body["suggestions"] == ["walk (t.py:5)"]


def test_the_sandwich_api_refuses_bad_input_and_strangers(owner_client, owner):
    capture = imported(owner, raw=RECURSIVE)
    assert Client().get(sandwich_url(capture, frame="walk (t.py:5)")).status_code in (401, 403)
    assert owner_client.get(sandwich_url(capture)).status_code == 400
    bad = sandwich_url(capture, frame="x", max_nodes="²")
    assert owner_client.get(bad).status_code == 400
    missing = reverse("api:capture_sandwich", args=[capture.pk + 999]) + "?frame=x"
    assert owner_client.get(missing).status_code == 404


# --- compare links ------------------------------------------------------------------------


def test_the_capture_page_links_to_the_previous_capture_of_its_process_and_run(
    teammate_client, teammate
):
    host = Host.objects.get(name="local")
    run = Run.objects.create(name="r1")
    older = [imported(teammate, run=run) for _ in range(2)]
    Capture.objects.filter(pk=older[0].pk).update(host=host, pid=77)
    newest = imported(teammate, run=run)
    Capture.objects.filter(pk=newest.pk).update(host=host, pid=77)
    html = teammate_client.get(newest.get_absolute_url()).content.decode()
    compare = reverse("compare:compare")
    assert f'href="{compare}?a={older[0].pk}&amp;b={newest.pk}" id="compare-process"' in html
    assert f'href="{compare}?a={older[1].pk}&amp;b={newest.pk}" id="compare-run"' in html
    assert 'id="compare-pick"' in html


def test_a_ranks_run_link_is_the_same_role_before_never_a_peer_of_its_own_job(
    teammate_client, teammate
):
    """A job restarted under new PIDs keeps its roles: rank-3's "previous capture of
    this run" is rank-3's in the earlier whole-job capture, not rank-2's beside it."""
    from runs.models import RunProcess

    host = Host.objects.get(name="local")
    run = Run.objects.create(name="job")
    rows = {}
    for job, pids in enumerate(((100, 103), (200, 203))):
        group = CaptureGroup.objects.create(run=run)
        for role, pid in zip(("rank-0", "rank-3"), pids, strict=True):
            process = RunProcess.objects.create(run=run, host=host, pid=pid, role=role)
            capture = imported(teammate, run=run)
            Capture.objects.filter(pk=capture.pk).update(
                host=host, pid=pid, process=process, group=group
            )
            rows[job, role] = capture
    newest = rows[1, "rank-3"]
    html = teammate_client.get(newest.get_absolute_url()).content.decode()
    compare = reverse("compare:compare")
    before = rows[0, "rank-3"].pk
    assert (
        f'href="{compare}?a={before}&amp;b={newest.pk}" id="compare-run">'
        f"the previous capture of rank-3 in this run (#{before})</a>"
    ) in html
    assert 'id="compare-process"' not in html  # new PIDs: no earlier capture of them
    first = rows[0, "rank-3"]
    html = teammate_client.get(first.get_absolute_url()).content.decode()
    assert 'id="compare-run"' not in html  # rank-0 beside it is a peer, not a before
    assert "no earlier capture of rank-3 in this run" in html


def test_navigation_offers_compare_and_trends(teammate_client):
    html = teammate_client.get(reverse("profiles:capture_list")).content.decode()
    assert f'href="{reverse("compare:compare")}"' in html
    assert f'href="{reverse("compare:trends")}"' in html


@pytest.mark.parametrize("query", ["a=999999&b=999998", "a=abc&b=1", "a=%C2%B2&b=1", "a=1"])
def test_bad_or_missing_ids_give_a_full_page_with_the_form(teammate_client, teammate, query):
    imported(teammate)
    response = teammate_client.get(reverse("compare:compare") + "?" + query)
    assert response.status_code in (400, 404)
    html = response.content.decode()
    assert 'class="mainnav"' in html and 'class="card compare-pick"' in html
    assert 'role="alert"' in html


def test_two_checked_captures_from_the_list_compare(teammate_client, teammate):
    a, b = imported(teammate), imported(teammate)
    response = teammate_client.get(reverse("compare:compare") + f"?pick={a.pk}&pick={b.pk}")
    assert response.status_code == 200 and response.context["result"]["before"]["id"] == a.pk
    listing = teammate_client.get(reverse("profiles:capture_list") + f"?compare={a.pk}")
    html = listing.content.decode()
    assert f'name="pick" value="{a.pk}" form="compare-form"' in html
    assert (
        f'value="{a.pk}" form="compare-form" aria-label="Compare capture #{a.pk}" checked' in html
    )


# --- trends -------------------------------------------------------------------------------


def test_ranks_of_one_whole_job_capture_are_one_whole_job_trend_point(teammate_client, teammate):
    run = Run.objects.create(name="job")
    group = CaptureGroup.objects.create(run=run)
    ranks = [imported(teammate, run=run) for _ in range(3)]
    Capture.objects.filter(pk__in=[c.pk for c in ranks]).update(group=group)
    single = imported(teammate, run=run)
    url = reverse("compare:run_trends", args=[run.pk])
    body = teammate_client.get(url, {"name": "compute"}).json()
    assert body["measure"] == "state" and body["view"]["name"] == "compute"
    job = next(s for s in body["series"] if s["key"] == "job")
    (point,) = job["points"]
    assert point["label"] == f"whole-job capture #{group.pk} (3 ranks)"
    assert point["url"] == reverse("profiles:group_detail", args=[group.pk])
    # Four imports of one file name, three in one whole-job capture: no rank is known,
    # so each stands alone rather than joining the others.
    alone = [s["points"] for s in body["series"] if s["kind"] == "rank"]
    assert sorted(p["capture"] for (p,) in alone) == [c.pk for c in (*ranks, single)]


def test_trends_say_unknown_category_and_list_the_known_ones(teammate_client):
    response = teammate_client.get(reverse("compare:trends") + "?kind=category&name=nonsense")
    html = response.content.decode()
    assert "Unknown category “nonsense”" in html
    assert '<option value="sync">' in html
    data = teammate_client.get(reverse("compare:trends_data") + "?name=nonsense").json()
    assert data["unknown"] is True and data["kind"] == "state"
    known = teammate_client.get(reverse("compare:trends_data") + "?kind=category&name=sync")
    assert known.json()["unknown"] is False
    # States are the default measure; a category is not a state.
    assert teammate_client.get(reverse("compare:trends_data") + "?name=sync").json()["unknown"]
    assert not teammate_client.get(reverse("compare:trends_data") + "?name=gil").json()["unknown"]
    state = teammate_client.get(reverse("compare:trends") + "?name=nonsense").content.decode()
    assert "Unknown state “nonsense”: not a thread state" in state
    assert '<option value="collective">' in state and '<option value="sync">' not in state


# --- numbers that agree -------------------------------------------------------------------


def test_an_imported_log_that_is_not_py_spys_is_reported(teammate_client, teammate):
    capture = imported(teammate, log="hello, this is not py-spy\n")
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert 'id="log-problem"' in html and "holds none of py-spy" in html


def test_a_log_with_only_py_spys_error_line_shows_that_error(teammate_client, teammate):
    error = "Error: Failed to get process executable name. Check that the process is running."
    capture = imported(teammate, log=error + "\n")
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert "py-spy said: Failed to get process executable name." in html
    assert "holds no py-spy log lines" not in html and "holds none of py-spy" not in html
    assert 'id="lag"' not in html  # not a "fell 0 s behind" banner


def test_an_import_takes_rate_and_duration_from_its_log(teammate_client, teammate):
    capture = imported(teammate, log=LAG_LOG)
    assert (capture.rate, capture.duration) == (100, 30)
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert "record --rate 100 --duration 30" in html


def test_a_capture_whose_process_exited_says_how_much_it_covers(teammate_client, teammate):
    capture = imported(teammate, log=LAG_LOG)
    lag = {**capture.stats["lag"], "stop_reason": "process exited"}
    Capture.objects.filter(pk=capture.pk).update(
        kind=Capture.Kind.RECORD,
        duration=30,
        host=Host.objects.get(name="local"),
        pid=5,
        stats={**capture.stats, "lag": lag},
        progress={"covered_s": 12.4},
    )
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert html.count("covers 12.4 s of the 30 s asked") == 2  # sampler row and lag banner


def test_the_pipeline_records_the_seconds_covered_when_the_process_exits():
    from runs import remote

    host = Host.objects.get(name="local")
    capture = Capture.objects.create(host=host, pid=9, duration=30, status="running")
    progress = pipeline._Progress(capture)
    progress.on_line("py-spy> Sampling process 100 times a second for 30 seconds.", 0.5)
    progress.on_line("py-spy> Stopped sampling because process exited", 8.0)
    result = remote.RecordResult(
        b"a 1\n", "", "", 0, "duration", 9.0, process_exited=True, gpu_csv=None
    )
    record_notes.record_note(result, capture, progress.span)
    assert Capture.objects.get(pk=capture.pk).progress["covered_s"] == 7.5


# --- delete failed captures, comments -------------------------------------------------------


def failed_capture() -> Capture:
    capture = Capture.objects.create(host=Host.objects.get(name="local"), pid=3)
    pipeline.capture_store_outputs(capture=capture, raw=None, log="Error: no such process")
    Capture.objects.filter(pk=capture.pk).update(status=Capture.Status.FAILED, error="gone")
    return Capture.objects.get(pk=capture.pk)


def test_an_operator_deletes_a_failed_capture_and_its_files(owner_client):
    capture = failed_capture()
    path = capture.log_file.path
    response = owner_client.post(reverse("profiles:capture_delete", args=[capture.pk]))
    assert response.status_code == 302
    assert not Capture.objects.filter(pk=capture.pk).exists()
    import os

    assert not os.path.exists(path)


def test_a_teammate_cannot_delete_a_capture_and_nobody_deletes_a_done_one(teammate, owner):
    capture = failed_capture()
    url = reverse("profiles:capture_delete", args=[capture.pk])
    assert Client().post(url).status_code == 302  # to the login page
    teammate_client, owner_client = Client(), Client()
    teammate_client.force_login(teammate)
    assert teammate_client.post(url).status_code == 403
    done = imported(owner)
    owner_client.force_login(owner)
    owner_client.post(reverse("profiles:capture_delete", args=[done.pk]))
    assert Capture.objects.filter(pk__in=[capture.pk, done.pk]).count() == 2


def test_an_author_edits_and_deletes_their_own_comment_but_not_anothers(client, owner, teammate):
    capture = imported(owner)
    mine = services.comment_create(capture=capture, author=teammate, body="first")
    theirs = services.comment_create(capture=capture, author=owner, body="owner's")
    edit = lambda c: reverse("profiles:comment_edit", args=[capture.pk, c.pk])  # noqa: E731
    delete = lambda c: reverse("profiles:comment_delete", args=[capture.pk, c.pk])  # noqa: E731
    assert client.post(edit(mine), {"body": "anon"}).status_code == 302  # login
    client.force_login(teammate)
    html = client.get(capture.get_absolute_url()).content.decode()
    assert html.count('class="commentedit"') == 1
    assert client.post(edit(mine), {"body": "second thoughts"}).status_code == 302
    assert Comment.objects.get(pk=mine.pk).body == "second thoughts"
    assert client.post(edit(theirs), {"body": "vandal"}).status_code == 403
    assert client.post(delete(theirs)).status_code == 403
    assert Comment.objects.get(pk=theirs.pk).body == "owner's"
    assert client.post(delete(mine)).status_code == 302
    assert not Comment.objects.filter(pk=mine.pk).exists()


def test_a_dump_capture_can_ask_for_locals(owner_client):
    from runs.remote.build import dump_argv
    from runs.services import host_target

    body = {"host": "local", "pid": 4242, "kind": "dump", "dump_locals": True}
    response = owner_client.post(reverse("api:capture_list"), body, content_type="application/json")
    assert response.status_code == 201
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.dump_locals is True
    argv = dump_argv(host_target(capture.host), capture.pid, locals=capture.dump_locals)
    assert "--locals" in " ".join(argv)
    assert "--locals" not in " ".join(dump_argv(host_target(capture.host), capture.pid))


def test_the_capture_page_stays_within_its_query_budget_with_compare_links(
    teammate_client, teammate, django_assert_max_num_queries
):
    run = Run.objects.create(name="q")
    capture = imported(teammate, raw=RAW, run=run)
    with django_assert_max_num_queries(16):
        assert teammate_client.get(capture.get_absolute_url()).status_code == 200


@pytest.mark.parametrize(
    ("query", "status"),
    [("host=%C2%B2", 400), ("run=99999999999999999999", 400), ("compare=%D9%A3", 200)],
)
def test_the_captures_list_takes_only_plain_ids_from_the_query(teammate_client, query, status):
    """A filter that is not a plain id is refused (400); a bad pre-ticked compare
    box is just not ticked."""
    response = teammate_client.get(reverse("profiles:capture_list") + "?" + query)
    assert response.status_code == status


def test_cross_run_trends_plot_a_runs_latest_whole_job_capture_as_one_point(
    teammate_client, teammate
):
    run = Run.objects.create(name="job run")
    group = CaptureGroup.objects.create(run=run)
    ranks = [imported(teammate, run=run) for _ in range(2)]
    Capture.objects.filter(pk__in=[c.pk for c in ranks]).update(group=group)
    data = teammate_client.get(reverse("compare:trends_data") + "?name=sync&runs=5").json()
    job = next(s for s in data["series"] if s["key"] == "job")
    (point,) = job["points"]
    assert point["label"] == f"job run · whole-job capture #{group.pk} (2 ranks)"
    assert point["url"] == reverse("profiles:group_detail", args=[group.pk])


def test_mean_trends_weigh_a_whole_job_capture_as_one_capture_not_one_per_rank(
    teammate_client, teammate
):
    run = Run.objects.create(name="mixed run")
    group = CaptureGroup.objects.create(run=run)
    ranks = [imported(teammate, run=run, raw=SYNC_HALF) for _ in range(4)]
    Capture.objects.filter(pk__in=[c.pk for c in ranks]).update(group=group)
    imported(teammate, run=run, raw=NO_SYNC)  # one capture on its own, 0% sync
    query = "?kind=category&name=sync&mode=mean"
    data = teammate_client.get(reverse("compare:trends_data") + query).json()
    (point,) = data["series"][0]["points"]
    # (50 + 0) / 2, not (4 x 50 + 0) / 5 = 40: the four ranks are one capture.
    assert (point["percent"], point["low"], point["high"]) == (25.0, 0.0, 50.0)
    assert point["label"] == "mixed run (mean of 2 captures)"


def test_a_dump_with_locals_passes_the_setting_to_py_spy_and_shows_them(
    monkeypatch, host_admin_client
):
    from runs import remote

    asked = {}
    text = (
        'Thread 4242 (active): "MainThread"\n'
        "    step (train.py:20)\n"
        "        Arguments:\n"
        "            batch: <Tensor at 0x7f>\n"
    )

    def fake_dump(target, pid, native=True, locals=False):
        asked.update(pid=pid, locals=locals)
        return remote.DumpResult(text, "")

    monkeypatch.setattr(remote, "dump", fake_dump)
    host = Host.objects.get(name="local")
    capture = Capture.objects.create(host=host, pid=4242, kind="dump", dump_locals=True)
    assert pipeline.capture_execute(capture_id=capture.pk) == "done"
    assert asked == {"pid": 4242, "locals": True}
    # A local host's locals are for host admins (tests/profiles/captures/test_redact.py).
    html = host_admin_client.get(capture.get_absolute_url()).content.decode()
    assert "dump --native --locals" in html
    assert '<dl class="locals"><dt class="mono">batch' in html and "&lt;Tensor at 0x7f&gt;" in html


def test_the_diff_tree_answers_json_for_missing_or_bad_ids(teammate_client):
    url = reverse("compare:diff_flamegraph")
    missing = teammate_client.get(url + "?a=999999&b=999998")
    assert missing.status_code == 404 and "No capture" in missing.json()["detail"]
    assert teammate_client.get(url + "?a=x&b=1").status_code == 400


# --- one vocabulary -----------------------------------------------------------------------


def test_the_capture_page_labels_categories_and_keywords_a_keyword_lens_naming_its_set(
    teammate_client, teammate
):
    from profiles.models import KeywordSet

    capture = imported(teammate)
    default = KeywordSet.objects.get(is_default=True)
    assert capture.keyword_set == default
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    name = f'<span class="muted small lensname">{default.name} (default set)</span>'
    assert f"<h2>Keyword lens: keywords</h2>{name}" in html
    assert "<h2>Keyword lens: categories</h2>" in html and "not the product's words" in html
    assert "<h2>Categories</h2>" not in html and "<h2>Keywords</h2>" not in html
