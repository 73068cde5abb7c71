"""Capture, import and keyword-set pages: permissions per persona, safe rendering of
untrusted frame names and comments, downloads, and a bounded number of queries."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from profiles.captures import services
from profiles.models import Capture, Comment, KeywordSet
from runs.models import Host, Run, Tag

XSS = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
STEP = "thread (11): MainThread;train (train.py:10);step (train.py:20)"
RAW = (
    f"{STEP};cuStreamSynchronize (libcuda.so.1) 60\n"
    f"{STEP};cuLaunchKernel (libcuda.so.1) 25\n"
    f"thread (12): loader;load (data.py:5);{XSS} (evil.py:1) 10\n"
    f"thread (12): loader;load (data.py:5);{IMG} (evil.py:2);0x7f00 (libfoo.so) 5\n"
)
LAG_LOG = (
    "py-spy> Sampling process 100 times a second for 30 seconds. Press Control-C to exit.\n"
    "py-spy> 1.20s behind in sampling, results may be inaccurate. Try reducing the sampling rate\n"
    "py-spy> 2.50s behind in sampling, results may be inaccurate. Try reducing the sampling rate\n"
    "py-spy> 4.80s behind in sampling, results may be inaccurate. Try reducing the sampling rate\n"
    "py-spy> Wrote raw flamegraph data to '/tmp/x'. Samples: 100 Errors: 0\n"
)
DUMP = """Process 4242: python train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 4242 (active+gil): "MainThread"
    cuStreamSynchronize (libcuda.so.1)
    step (train.py:20)
    train (train.py:10)
Thread 4250 (idle): "loader"
    wait (threading.py:320)
    get (queue.py:171)
"""


def imported(user=None, raw: str = RAW, log: str | None = None, run: Run | None = None) -> Capture:
    """A capture through the real import path (engine included)."""
    upload = SimpleUploadedFile("samples.txt", raw.encode())
    log_file = SimpleUploadedFile("py-spy.log", log.encode()) if log else None
    return services.capture_import(user=user, file=upload, log=log_file, run=run)


def fake_stats(i: int = 0, verdict: str | None = None) -> dict:
    """Stored stats without running the engine (for many-row fixtures)."""
    lag = None
    if verdict:
        lag = {
            "verdict": verdict,
            "max_behind_s": 3.1,
            "recommended_rate": 10,
            "requested_rate": 20,
            "warnings": 3,
            "series": [{"t_index": 0, "approx_s": 1, "behind_s": 1.1}],
        }
    total = 1000 + i
    shares = {"host_sync": 30 - i % 20, "collective": 10 + i % 7, "data_wait": 5}
    counts = {state: round(total * share / 100) for state, share in shares.items()}
    counts = {"compute": total - sum(counts.values()), **counts}
    states = [
        {"state": state, "samples": n, "percent": round(100 * n / total, 2)}
        for state, n in counts.items()
    ]
    return {
        "format": "raw",
        "total_samples": total,
        "states": states,
        # One thread, so the step threads are all of it.
        "step_threads": {
            "tids": ["1"],
            "names": ["MainThread"],
            "detected_by": "busiest",
            "samples": total,
            "states": states,
        },
        "unique_stacks": 10,
        "skipped_lines": 0,
        "threads": [{"name": "MainThread", "tid": 1, "samples": 1000, "percent": 100.0}],
        "top_self": [{"frame": "f (a.py:1)", "samples": 10, "percent": 1.0}] * 30,
        "top_total": [],
        "keywords": [],
        "categories": [
            {"category": "sync", "samples": 300, "percent": 30.0 - i % 20},
            {"category": "launch", "samples": 100, "percent": 10.0 + i % 7},
        ],
        "uncovered_native": [],
        "lag": lag,
    }


def bulk_captures(n: int, **fields) -> list[Capture]:
    host = Host.objects.get(name="local")
    return Capture.objects.bulk_create(
        Capture(
            host=host, pid=100 + i % 5, status=Capture.Status.DONE, stats=fake_stats(i), **fields
        )
        for i in range(n)
    )


PAGES = [
    ("profiles:capture_list", False),
    ("profiles:capture_detail", True),
    ("profiles:keywordset_list", False),
    ("profiles:keywordset_detail", "ks"),
]


def _url(name, arg, capture, ks):
    if arg is True:
        return reverse(name, args=[capture.pk])
    if arg == "ks":
        return reverse(name, args=[ks.pk])
    return reverse(name)


@pytest.fixture
def capture(db, owner):
    return imported(owner, log=LAG_LOG)


@pytest.mark.django_db
@pytest.mark.parametrize("name,arg", PAGES)
def test_anonymous_users_are_sent_to_log_in(client, capture, name, arg):
    ks = KeywordSet.objects.get(is_default=True)
    response = client.get(_url(name, arg, capture, ks))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
@pytest.mark.parametrize("name,arg", PAGES)
def test_a_teammate_sees_every_page(teammate_client, capture, name, arg):
    ks = KeywordSet.objects.get(is_default=True)
    assert teammate_client.get(_url(name, arg, capture, ks)).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name,method",
    [
        ("profiles:keywordset_create", "get"),
        ("profiles:keywordset_edit", "get"),
        ("profiles:capture_reanalyze", "post"),
        ("profiles:capture_import", "get"),
        ("profiles:capture_import", "post"),
        ("profiles:capture_tags", "post"),
    ],
)
def test_a_teammate_gets_403_on_operator_actions(teammate_client, capture, name, method):
    ks = KeywordSet.objects.get(is_default=True)
    arg = {
        "profiles:keywordset_create": [],
        "profiles:keywordset_edit": [ks.pk],
        "profiles:capture_import": [],
    }.get(name, [capture.pk])
    data = {"keyword_set": ks.pk, "tags": "viewer-tag"}
    if name == "profiles:capture_import" and method == "post":
        data = {"file": SimpleUploadedFile("r.txt", RAW.encode())}
    response = getattr(teammate_client, method)(reverse(name, args=arg), data)
    assert response.status_code == 403
    assert Capture.objects.count() == 1 and not capture.tags.exists()


@pytest.mark.django_db
def test_the_capture_page_carries_stats_and_never_raw_markup_of_frame_names(
    teammate_client, capture
):
    assert capture.status == Capture.Status.DONE, capture.error
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert "<script>window.__xss" not in html
    assert "<img src=x" not in html
    data = json.loads(
        html.split('id="capture-data" type="application/json">')[1].split("</script>")[0]
    )
    frames = [f["frame"] for f in data["stats"]["top_self"]]
    assert any(XSS in f for f in frames)


@pytest.mark.django_db
def test_the_lag_banner_offers_a_recapture_to_operators_only(client, owner, teammate, capture):
    client.force_login(owner)
    html = client.get(capture.get_absolute_url()).content.decode()
    assert "behind while sampling" in html and "Recommended rate" in html
    # an import has no host to capture again
    assert 'id="recapture"' not in html
    capture.host = Host.objects.get(name="local")
    capture.pid, capture.kind = 4242, Capture.Kind.RECORD
    capture.save()
    assert 'id="recapture"' in client.get(capture.get_absolute_url()).content.decode()
    client.force_login(teammate)
    assert 'id="recapture"' not in client.get(capture.get_absolute_url()).content.decode()


@pytest.mark.django_db
def test_a_teammate_comments_in_markdown_rendered_safely(teammate_client, capture):
    body = f"**sync** dominates {XSS} [x](javascript:alert(1))"
    response = teammate_client.post(
        reverse("profiles:capture_comment", args=[capture.pk]),
        {
            "body": body,
            "frame": "cuStreamSynchronize (libcuda.so.1)",
            "next": capture.get_absolute_url() + "?search=sync",
        },
    )
    comment = Comment.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(
        f"?search=sync#comment-{comment.pk}"
    )
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert "<strong>sync</strong>" in html
    # The author's edit box holds the markdown source as escaped text; no link may
    # carry the javascript: scheme.
    assert "<script>window.__xss" not in html and 'href="javascript:' not in html
    assert "[x](javascript:alert(1))</textarea>" in html
    assert 'data-frame="cuStreamSynchronize (libcuda.so.1)"' in html


@pytest.mark.django_db
def test_comments_refuse_an_outside_next_url(teammate_client, capture):
    response = teammate_client.post(
        reverse("profiles:capture_comment", args=[capture.pk]),
        {"body": "x", "next": "https://evil.example/"},
    )
    assert response["Location"].startswith(capture.get_absolute_url())


@pytest.mark.django_db
def test_tags_are_set_on_a_capture_and_filter_the_list(owner_client, capture, owner):
    other = imported(owner)
    owner_client.post(
        reverse("profiles:capture_tags", args=[capture.pk]), {"tags": "baseline, bs64"}
    )
    assert sorted(capture.tags.values_list("name", flat=True)) == ["baseline", "bs64"]
    page = owner_client.get(reverse("profiles:capture_list"), {"tag": "baseline"}).context["page"]
    assert [c.pk for c in page.object_list] == [capture.pk] and other.pk != capture.pk


@pytest.mark.django_db
def test_downloads_stream_the_stored_files(teammate_client, capture):
    url = lambda what: reverse("profiles:capture_download", args=[capture.pk, what])  # noqa: E731
    folded = b"".join(teammate_client.get(url("folded")).streaming_content).decode()
    assert "cuStreamSynchronize (libcuda.so.1) 60" in folded
    speedscope = json.loads(b"".join(teammate_client.get(url("speedscope")).streaming_content))
    assert "profiles" in speedscope and speedscope["shared"]["frames"]
    log = b"".join(teammate_client.get(url("log")).streaming_content).decode()
    assert "behind in sampling" in log
    assert teammate_client.get(url("nope")).status_code == 404


@pytest.mark.django_db
def test_a_speedscope_capture_downloads_as_folded_through_the_exporter(
    teammate_client, owner, capture
):
    speedscope = b"".join(
        teammate_client.get(
            reverse("profiles:capture_download", args=[capture.pk, "speedscope"])
        ).streaming_content
    )
    again = services.capture_import(user=owner, file=SimpleUploadedFile("s.json", speedscope))
    assert again.raw_format == "speedscope", again.error
    folded = b"".join(
        teammate_client.get(
            reverse("profiles:capture_download", args=[again.pk, "folded"])
        ).streaming_content
    ).decode()
    assert "cuStreamSynchronize" in folded and folded.endswith("\n")


@pytest.mark.django_db
def test_the_import_page_imports_into_a_run(owner_client, owner, inline_analysis):
    run = Run.objects.create(name="bs64")
    response = owner_client.post(
        reverse("profiles:capture_import"),
        {"file": SimpleUploadedFile("r.txt", RAW.encode()), "run": run.pk},
    )
    capture = Capture.objects.get(run=run)
    assert response.status_code == 302 and response["Location"] == capture.get_absolute_url()
    assert capture.status == Capture.Status.DONE


@pytest.mark.django_db
def test_an_operator_reanalyses_with_another_keyword_set(owner_client, capture, inline_analysis):
    ks = KeywordSet.objects.create(name="loader only")
    ks.keywords.create(keyword="load", category="data")
    response = owner_client.post(
        reverse("profiles:capture_reanalyze", args=[capture.pk]), {"keyword_set": ks.pk}
    )
    assert response.status_code == 302 and response["Location"].endswith(f"?ks={ks.pk}")
    capture.refresh_from_db()
    assert capture.keyword_set == ks and capture.stats["categories"][0]["category"] == "data"


@pytest.mark.django_db
def test_an_operator_edits_a_keyword_set_and_makes_it_the_default(owner_client):
    response = owner_client.post(
        reverse("profiles:keywordset_create"),
        {
            "name": "mine",
            "description": "",
            "is_default": "on",
            "keywords_text": "sync: cudaStreamSynchronize\nio: read",
        },
    )
    ks = KeywordSet.objects.get(name="mine")
    assert response.status_code == 302
    assert [(k.category, k.keyword) for k in ks.keywords.all()] == [
        ("sync", "cudaStreamSynchronize"),
        ("io", "read"),
    ]
    assert list(KeywordSet.objects.filter(is_default=True)) == [ks]
    bad = owner_client.post(
        reverse("profiles:keywordset_edit", args=[ks.pk]),
        {"name": "mine", "keywords_text": "nocolon"},
    )
    assert bad.status_code == 200 and "expected" in bad.content.decode()


@pytest.mark.django_db
def test_a_dump_shows_threads_by_state_with_native_frames_marked(teammate_client, owner):
    capture = Capture.objects.create(
        host=Host.objects.get(name="local"), pid=4242, kind=Capture.Kind.DUMP
    )
    from profiles.captures import pipeline

    pipeline.capture_store_outputs(capture=capture, raw=DUMP.encode(), log="")
    Capture.objects.filter(pk=capture.pk).update(status=Capture.Status.PARSING)
    pipeline.capture_analyze(capture=Capture.objects.get(pk=capture.pk))
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert "Active" in html and "Idle" in html and "holds GIL" in html
    assert 'class="native"' in html and "cuStreamSynchronize" in html


@pytest.mark.django_db
def test_the_capture_list_runs_a_bounded_number_of_queries(
    teammate_client, django_assert_max_num_queries
):
    captures = bulk_captures(120)
    tag = Tag.objects.create(name="baseline")
    for c in captures[:60]:
        c.tags.add(tag)
    with django_assert_max_num_queries(12):
        response = teammate_client.get(reverse("profiles:capture_list"))
    assert len(response.context["page"].object_list) == 50


@pytest.mark.django_db
def test_the_capture_page_runs_a_bounded_number_of_queries(
    teammate_client, teammate, capture, django_assert_max_num_queries
):
    for i in range(40):
        Comment.objects.create(capture=capture, author=teammate, body=f"note {i}")
    capture.tags.add(Tag.objects.create(name="a"), Tag.objects.create(name="b"))
    with django_assert_max_num_queries(14):
        assert teammate_client.get(capture.get_absolute_url()).status_code == 200


@pytest.mark.django_db
def test_a_running_capture_shows_live_progress_and_cancel(teammate_client):
    capture = Capture.objects.create(
        host=Host.objects.get(name="local"), pid=1, status=Capture.Status.RUNNING
    )
    html = teammate_client.get(capture.get_absolute_url()).content.decode()
    assert 'id="live"' in html and 'id="cancel-capture"' in html
