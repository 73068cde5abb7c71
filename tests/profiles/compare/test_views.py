"""The compare page, `GET /api/compare/`, the differential tree JSON and the trends."""

import gzip
import json
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse
from django.utils import timezone

from profiles.models import Capture, KeywordSet
from runs.models import Run

pytestmark = pytest.mark.django_db


def make_stats(total, sync, launch=0, lag=None, threads=("MainThread",)):
    def pct(n):
        return round(100 * n / total, 2)

    return {
        "format": "raw",
        "total_samples": total,
        "threads": [
            {"name": n, "tid": i, "pid": None, "samples": total, "percent": 100.0}
            for i, n in enumerate(threads)
        ],
        "top_self": [
            {"frame": "cuStreamSynchronize (libcuda.so.1)", "samples": sync, "percent": pct(sync)},
            {
                "frame": "<b>evil</b> (x.py:1)",
                "samples": total - sync,
                "percent": pct(total - sync),
            },
        ],
        "top_total": [{"frame": "main (train.py:1)", "samples": total, "percent": 100.0}],
        "keywords": [
            {
                "keyword": "cuStreamSynchronize",
                "category": "sync",
                "samples": sync,
                "percent": pct(sync),
            },
            {
                "keyword": "cuLaunchKernel",
                "category": "launch",
                "samples": launch,
                "percent": pct(launch),
            },
            {"keyword": "nccl", "category": "comm", "samples": 0, "percent": 0.0},
        ],
        "categories": [
            {"category": "sync", "samples": sync, "percent": pct(sync)},
            {"category": "launch", "samples": launch, "percent": pct(launch)},
        ],
        "uncovered_native": [],
        "lag": lag,
    }


def make_tree(total, sync):
    return {
        "name": "all",
        "value": total,
        "children": [
            {
                "name": "thread (1): MainThread",
                "value": total,
                "children": [
                    {"name": "cuStreamSynchronize (libcuda.so.1)", "value": sync, "children": []},
                    {"name": "<b>evil</b> (x.py:1)", "value": total - sync, "children": []},
                ],
            }
        ],
    }


def make_capture(total=2000, sync=620, *, run=None, minutes_ago=0, lag=None, scheduled=False, **kw):
    capture = Capture.objects.create(
        status=Capture.Status.DONE,
        kind=Capture.Kind.IMPORT,
        run=run,
        scheduled=scheduled,
        stats=make_stats(total, sync, lag=lag, **kw),
    )
    tree = json.dumps(make_tree(total, sync)).encode()
    capture.flamegraph_file.save("flamegraph.json.gz", ContentFile(gzip.compress(tree)))
    at = timezone.now() - timedelta(minutes=minutes_ago)
    Capture.objects.filter(pk=capture.pk).update(queued_at=at, finished_at=at)
    capture.refresh_from_db()
    return capture


@pytest.fixture
def pair():
    return make_capture(2000, 620, minutes_ago=60), make_capture(2000, 120, minutes_ago=5)


def compare_url(a, b, **extra):
    query = "&".join(f"{k}={v}" for k, v in {"a": a.pk, "b": b.pk, **extra}.items())
    return reverse("compare:compare") + "?" + query


def test_an_anonymous_visitor_is_sent_to_log_in(client, pair):
    response = client.get(compare_url(*pair))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_anonymous_api_caller_gets_no_data(client, pair):
    response = client.get("/api/compare/", {"a": pair[0].pk, "b": pair[1].pk})
    assert response.status_code in (401, 403)
    assert "categories" not in response.content.decode()


@pytest.mark.parametrize(
    "url",
    ["/compare/diff.json?a=1&b=2", "/trends/", "/trends.json", "/runs/1/trends.json"],
)
def test_every_other_compare_route_wants_a_login(client, url):
    assert client.get(url).status_code == 302


def test_a_teammate_sees_the_verdict_of_a_real_drop(
    teammate_client, pair, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        response = teammate_client.get(compare_url(*pair))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-verdict="real change"' in html
    assert "31.00%" in html and "6.00%" in html
    assert "autocorrelated" in html and "optimistic" in html


def test_categories_and_keywords_are_labelled_a_keyword_lens_naming_the_set(teammate_client, pair):
    default = KeywordSet.objects.get(is_default=True)
    Capture.objects.filter(pk__in=[c.pk for c in pair]).update(keyword_set=default)
    html = teammate_client.get(compare_url(*pair)).content.decode()
    lens = f'<span class="lenslabel">Keyword lens: {default.name} (default set)</span>'
    for table in ("categories", "keywords"):
        section = html.split(f'id="{table}"')[1].split("</section>")[0]
        assert f"<h2>{lens} · {table}</h2>" in section and "not the product's words" in section
    states = html.split('id="states"')[1].split("</section>")[0]
    assert "<h2>Thread states</h2>" in states and "lenslabel" not in states


def test_two_captures_of_different_keyword_sets_name_each_side_escaped(teammate_client, pair):
    mine = KeywordSet.objects.create(name="<i>data</i>")
    Capture.objects.filter(pk=pair[1].pk).update(keyword_set=mine)
    html = teammate_client.get(compare_url(*pair)).content.decode()
    assert (
        "Keyword lens: built-in GPU set (before), &lt;i&gt;data&lt;/i&gt; (after)" in html
        and "<i>data</i>" not in html
    )


def test_frame_names_are_escaped_on_the_page(teammate_client, pair):
    html = teammate_client.get(compare_url(*pair)).content.decode()
    assert "<b>evil</b>" not in html and "&lt;b&gt;evil&lt;/b&gt;" in html


def test_a_two_point_move_on_300_samples_reads_within_noise(teammate_client):
    a, b = make_capture(300, 90, minutes_ago=30), make_capture(300, 96)
    html = teammate_client.get(compare_url(a, b)).content.decode()
    assert 'data-verdict="within noise"' in html
    assert 'data-verdict="real change"' not in html.split('id="top-self"')[0]


def test_the_order_in_the_url_does_not_change_before_and_after(owner_client, pair):
    earlier, later = pair
    one = owner_client.get("/api/compare/", {"a": earlier.pk, "b": later.pk}).json()
    other = owner_client.get("/api/compare/", {"a": later.pk, "b": earlier.pk}).json()
    assert one == other
    assert one["before"]["id"] == earlier.pk and one["after"]["id"] == later.pk


def test_the_api_returns_the_numbers_the_page_shows(teammate_client, pair):
    data = teammate_client.get("/api/compare/", {"a": pair[0].pk, "b": pair[1].pk}).json()
    sync = next(r for r in data["categories"] if r["name"] == "sync")
    assert sync["before"]["percent"] == 31.0 and sync["after"]["percent"] == 6.0
    assert sync["delta_points"] == -25.0 and sync["verdict"] == "real change"
    assert sync["delta_low"] < -25.0 < sync["delta_high"]
    html = teammate_client.get(compare_url(*pair)).content.decode()
    assert f"{sync['delta_low']:.1f}, {sync['delta_high']:.1f}" in html
    assert set(data) >= {"top_self", "top_total", "keywords", "lag_warnings", "method"}


def test_the_api_refuses_bad_or_missing_ids(teammate_client, pair):
    assert teammate_client.get("/api/compare/", {"a": "x", "b": 1}).status_code == 400
    assert teammate_client.get("/api/compare/", {"a": pair[0].pk, "b": 999999}).status_code == 404


def test_a_capture_without_samples_is_explained_not_crashed(teammate_client, pair):
    empty = Capture.objects.create(status=Capture.Status.FAILED, kind=Capture.Kind.RECORD)
    response = teammate_client.get(compare_url(pair[0], empty))
    assert response.status_code == 200 and "has no samples to compare" in response.content.decode()
    api = teammate_client.get("/api/compare/", {"a": pair[0].pk, "b": empty.pk})
    assert api.status_code == 409  # the capture's state, not the request's form


def test_a_lagging_capture_is_flagged_beside_the_verdicts(teammate_client):
    lag = {"verdict": "unreliable", "max_behind_s": 3.5, "recommended_rate": 8}
    a, b = make_capture(minutes_ago=10), make_capture(sync=100, lag=lag)
    html = teammate_client.get(compare_url(a, b)).content.decode()
    assert 'id="lag-warning"' in html and "unreliable" in html and "8 Hz" in html
    data = teammate_client.get("/api/compare/", {"a": a.pk, "b": b.pk}).json()
    assert data["lag_warnings"][0]["side"] == "after"


def test_the_compare_page_without_ids_offers_a_chooser(teammate_client, pair):
    html = teammate_client.get(reverse("compare:compare")).content.decode()
    assert 'name="a"' in html and f'value="{pair[0].pk}"' in html


def test_the_diff_tree_colours_the_later_tree_by_change(teammate_client, pair):
    url = reverse("compare:diff_flamegraph")
    data = teammate_client.get(url, {"a": pair[1].pk, "b": pair[0].pk}).json()
    assert data["view"] == "after" and data["shown"] == pair[1].pk
    thread = data["tree"]["children"][0]
    sync = next(c for c in thread["children"] if c["name"].startswith("cuStream"))
    assert sync["delta"] == -25.0 and sync["value"] == 120 and sync["other_value"] == 620


def test_the_reverse_diff_tree_is_the_earlier_tree(teammate_client, pair):
    url = reverse("compare:diff_flamegraph")
    data = teammate_client.get(url, {"a": pair[0].pk, "b": pair[1].pk, "view": "before"}).json()
    assert data["shown"] == pair[0].pk
    thread = data["tree"]["children"][0]
    sync = next(c for c in thread["children"] if c["name"].startswith("cuStream"))
    assert sync["value"] == 620 and sync["delta"] == -25.0


def test_the_diff_tree_honours_a_thread_filter(teammate_client, pair):
    url = reverse("compare:diff_flamegraph")
    data = teammate_client.get(url, {"a": pair[0].pk, "b": pair[1].pk, "thread": "nope"}).json()
    assert data["tree"]["value"] == 0


def test_run_trends_give_one_series_per_category_in_time_order(
    teammate_client, django_assert_max_num_queries
):
    run = Run.objects.create(name="llama")
    old = make_capture(2000, 620, run=run, minutes_ago=90)
    lagging = make_capture(2000, 400, run=run, minutes_ago=60, lag={"verdict": "degraded"})
    new = make_capture(2000, 120, run=run, minutes_ago=5, scheduled=True)
    make_capture(2000, 1, minutes_ago=1)  # another run's capture stays out
    with django_assert_max_num_queries(6):
        data = teammate_client.get(f"/runs/{run.pk}/trends.json?measure=category").json()
    sync = next(s for s in data["series"] if s["name"] == "sync")
    assert [p["capture"] for p in sync["points"]] == [old.pk, lagging.pk, new.pk]
    assert [p["percent"] for p in sync["points"]] == [31.0, 20.0, 6.0]
    assert sync["points"][1]["lag"] == "degraded" and sync["points"][2]["scheduled"] is True
    assert sync["points"][0]["url"] == old.get_absolute_url()
    assert {s["name"] for s in data["series"]} == {"sync", "launch"}


def test_cross_run_trends_take_the_latest_done_capture_per_run(teammate_client):
    runs = [Run.objects.create(name=f"run-{i}") for i in range(3)]
    make_capture(2000, 620, run=runs[0], minutes_ago=50)
    make_capture(2000, 400, run=runs[1], minutes_ago=40)
    latest = make_capture(2000, 200, run=runs[1], minutes_ago=30)
    data = teammate_client.get(
        "/trends.json", {"kind": "category", "name": "sync", "runs": 2}
    ).json()
    points = data["series"][0]["points"]
    # run-2 has no capture; run-0 is beyond N
    assert [p["label"] for p in points] == [f"run-1 · imported #{latest.pk}"]
    assert points[0]["capture"] == latest.pk and points[0]["percent"] == 10.0


def test_cross_run_trends_can_take_the_mean_of_a_runs_captures(teammate_client):
    run = Run.objects.create(name="mean-run")
    make_capture(2000, 400, run=run, minutes_ago=40)
    make_capture(2000, 200, run=run, minutes_ago=30)
    query = {"kind": "keyword", "name": "cuStreamSynchronize", "mode": "mean"}
    point = teammate_client.get("/trends.json", query).json()["series"][0]["points"][0]
    assert point["percent"] == 15.0 and (point["low"], point["high"]) == (10.0, 20.0)


def test_the_trends_page_renders_for_a_teammate(teammate_client, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        response = teammate_client.get("/trends/", {"kind": "category", "name": "sync"})
    assert response.status_code == 200 and b"trends-page" in response.content


def test_a_thread_filter_without_raw_samples_says_the_tables_cover_all_threads(teammate_client):
    a = make_capture(minutes_ago=9, threads=("MainThread", "loader"))
    b = make_capture(sync=100, threads=("MainThread", "loader"))
    html = teammate_client.get(compare_url(a, b, thread="loader")).content.decode()
    assert "the tables show all threads" in html
    assert '<option value="loader" selected>' in html


def test_the_run_page_partial_points_its_chart_at_the_run_trends():
    from django.template.loader import render_to_string

    run = Run.objects.create(name="partial")
    html = render_to_string("profiles/_run_trends.html", {"run": run})
    assert f'data-trend-url="/runs/{run.pk}/trends.json"' in html


def test_the_compare_page_reads_states_before_to_after_with_their_verdicts(teammate_client):
    from tests import factories

    rank = factories.process(factories.run(), "rank-0")
    before = factories.capture(rank, factories.state_stats(2000, collective=62), minutes_ago=9)
    after = factories.capture(rank, factories.state_stats(2000, collective=31))
    response = teammate_client.get(reverse("compare:compare") + f"?a={after.pk}&b={before.pk}")
    html = response.content.decode()
    moved = html.split('id="states-moved">')[1].split("</p>")[0]
    assert "collective 62.0% → 31.0%" in moved and "compute 38.0% → 69.0%" in moved
    states = html.split('id="states"')[1].split("</section>")[0]
    assert 'data-name="collective"' in states and "real change" in states
    assert 'data-name="idle"' not in states  # no samples on either side
    api = teammate_client.get(f"/api/compare/?a={before.pk}&b={after.pk}").json()
    row = next(r for r in api["states"] if r["name"] == "collective")
    assert (row["before"]["percent"], row["after"]["percent"]) == (62.0, 31.0)


def test_the_trends_page_plots_a_state_by_default_and_labels_a_keyword_lens(teammate_client):
    html = teammate_client.get("/trends/").content.decode()
    assert 'State <span class="frame">compute</span>, share of the step threads\' samples' in html
    assert "Thread states of the step threads · compute" in html
    assert '<option value="state" selected>' in html
    mine = KeywordSet.objects.create(name="<i>io</i>")
    mine.keywords.create(keyword="read", category="sync")
    lens = teammate_client.get("/trends/", {"kind": "category", "name": "sync"}).content.decode()
    default = KeywordSet.objects.get(is_default=True).name
    label = f"Keyword lens: &lt;i&gt;io&lt;/i&gt;, {default} (default set) · category sync"
    assert label in lens and "a lens you picked" in lens and "<i>io</i>" not in lens
