"""Contract 3: the JSON API, its auth and permissions."""

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from profiles.models import Capture
from runs.models import Host
from runs.tokens import api_token_create

pytestmark = pytest.mark.django_db

RAW = (
    "thread (11): MainThread;main (train.py:10);step (train.py:20);"
    "cuLaunchKernel (libcuda.so.1) 7\n"
    "thread (11): MainThread;main (train.py:10);cudaStreamSynchronize (libcudart.so) 3\n"
)


@pytest.fixture(autouse=True)
def _no_enqueue(monkeypatch):
    """The API only queues; running captures is the worker tests' business."""
    sent = []
    monkeypatch.setattr(
        "profiles.captures.enqueue.capture_enqueue", lambda *, capture: sent.append(capture.pk)
    )
    monkeypatch.setattr("profiles.captures.enqueue.group_enqueue", lambda *, group: None)
    return sent


def _token_client(client, user):
    _, key = api_token_create(user=user)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    return client


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/hosts/"),
        ("post", "/api/hosts/"),
        ("get", "/api/captures/"),
        ("post", "/api/captures/"),
        ("get", "/api/captures/1/"),
        ("get", "/api/captures/1/flamegraph/"),
        ("post", "/api/captures/1/cancel/"),
        ("post", "/api/captures/import/"),
    ],
)
def test_anonymous_requests_get_401_or_403_never_data(client, method, url):
    response = getattr(client, method)(url)
    assert response.status_code in (401, 403)
    assert b"total_samples" not in response.content


def test_a_bad_token_is_refused(client):
    client.defaults["HTTP_AUTHORIZATION"] = "Token nope"
    assert client.get("/api/hosts/").status_code == 401


def test_a_host_admin_creates_a_host_with_a_token(client, host_admin):
    client = _token_client(client, host_admin)
    body = {
        "name": "gpu-7",
        "transport": "ssh",
        "address": "gpu7.example",
        "port": 2222,
        "username": "train",
        "exec_prefix": "pct exec 200 --",
        "py_spy": "/usr/local/bin/py-spy",
    }
    response = client.post("/api/hosts/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    host = Host.objects.get(pk=response.json()["id"])
    assert (host.address, host.port, host.exec_prefix) == ("gpu7.example", 2222, "pct exec 200 --")


def test_a_host_address_that_looks_like_an_ssh_option_is_refused(host_admin_client):
    body = {"name": "evil", "transport": "ssh", "address": "-oProxyCommand=touch /tmp/x"}
    response = host_admin_client.post("/api/hosts/", body, content_type="application/json")
    assert response.status_code == 400
    assert "address" in response.json()


def test_a_teammate_may_read_hosts_but_not_create_them_or_launch(teammate_client):
    assert teammate_client.get("/api/hosts/").status_code == 200
    body = {"name": "x", "transport": "local"}
    assert (
        teammate_client.post("/api/hosts/", body, content_type="application/json").status_code
        == 403
    )
    body = {"host": "local", "pid": 1}
    assert (
        teammate_client.post("/api/captures/", body, content_type="application/json").status_code
        == 403
    )


def test_creating_a_capture_queues_it_with_its_settings(
    owner_client, _no_enqueue, django_capture_on_commit_callbacks
):
    body = {"host": "local", "pid": 4242, "duration": 5, "rate": 50, "idle": True}
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "queued"
    capture = Capture.objects.get(pk=data["id"])
    assert (
        capture.pid,
        capture.duration,
        capture.rate,
        capture.idle,
        capture.native,
        capture.threads,
    ) == (4242, 5, 50, True, True, True)
    assert _no_enqueue == [capture.pk]
    detail = owner_client.get(f"/api/captures/{capture.pk}/").json()
    assert detail["status"] == "queued" and detail["stats"] is None and detail["error"] == ""


@pytest.mark.parametrize(
    "body",
    [
        {"host": "local", "pid": 0},
        {"host": "local", "pid": "1; rm -rf /"},
        {"host": "local", "pid": 5, "rate": 0},
        {"host": "local", "pid": 5, "duration": 100000},
        {"host": "local", "pid": 5, "kind": "flame"},
        # py-spy refuses native stacks without pausing the process: asked, not sent.
        {"host": "local", "pid": 5, "native": True, "nonblocking": True},
    ],
)
def test_bad_capture_requests_get_400_with_the_field_named(owner_client, body):
    response = owner_client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 400
    fields = {"pid", "host", "rate", "duration", "kind", "process", "nonblocking"}
    assert set(response.json()) & fields
    assert not Capture.objects.exists()


@pytest.mark.parametrize(
    ("body", "named"),
    [({"host": "nowhere", "pid": 5}, "host"), ({"process": 999999}, "process"),
     ({"host": "local", "pid": 5, "run": 999999}, "run")],
)  # fmt: skip
def test_a_host_process_or_run_the_body_names_that_does_not_exist_is_a_404(
    owner_client, body, named
):
    response = owner_client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 404 and response.json()["detail"].startswith(f"{named}: ")
    assert not Capture.objects.exists()


def test_non_blocking_sampling_without_native_stacks_is_accepted(owner_client, _no_enqueue):
    body = {"host": "local", "pid": 5, "native": False, "nonblocking": True}
    response = owner_client.post("/api/captures/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    capture = Capture.objects.get(pk=response.json()["id"])
    assert (capture.native, capture.nonblocking) == (False, True)


def test_cancelling_a_queued_capture_ends_it_and_a_done_one_is_refused(owner_client):
    capture = Capture.objects.create(host=Host.objects.get(name="local"), pid=5)
    response = owner_client.post(f"/api/captures/{capture.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    capture.refresh_from_db()
    assert capture.status == "cancelled" and capture.finished_at is not None
    assert owner_client.post(f"/api/captures/{capture.pk}/cancel/").status_code == 409


@pytest.mark.parametrize(("run", "status"), [("", 400), ("x", 400), ("999999", 404)])
def test_an_import_that_gives_run_gives_an_id_of_a_run(owner_client, run, status):
    upload = io.BytesIO(RAW.encode())
    upload.name = "train.txt"
    response = owner_client.post("/api/captures/import/", {"file": upload, "run": run})
    assert response.status_code == status, response.content
    assert not Capture.objects.exists()


def test_import_stores_the_file_and_computes_stats(owner_client, inline_analysis):
    upload = io.BytesIO(RAW.encode())
    upload.name = "train.txt"
    response = owner_client.post("/api/captures/import/", {"file": upload})
    assert response.status_code == 201, response.content
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.status == "done"
    detail = owner_client.get(f"/api/captures/{capture.pk}/").json()
    assert detail["stats"]["total_samples"] == 10
    assert "flamegraph" not in detail["stats"]
    launch = {c["category"]: c["percent"] for c in detail["stats"]["categories"]}["launch"]
    assert launch == pytest.approx(70.0)
    tree = owner_client.get(f"/api/captures/{capture.pk}/flamegraph/?max_nodes=50").json()
    assert tree["value"] == 10


THREADED = RAW + (
    "thread (12): loader;load (data.py:5);cudaMemcpy (libcudart.so) 6\n"
    "thread (12): loader;load (data.py:5);main (train.py:10) 4\n"
)


def test_a_thread_filter_sums_stored_tables_and_survives_pruning_the_raw_file(
    owner_client, inline_analysis
):
    from profiles.jobs import services as jobs

    upload = io.BytesIO(THREADED.encode())
    upload.name = "train.txt"
    capture_id = owner_client.post("/api/captures/import/", {"file": upload}).json()["id"]
    url = f"/api/captures/{capture_id}/"
    whole = owner_client.get(url).json()["stats"]
    loader = owner_client.get(url, {"thread": "loader"}).json()["stats"]
    both = owner_client.get(url, {"thread": "loader,11"}).json()["stats"]
    assert whole["total_samples"] == 20 and loader["total_samples"] == 10
    assert [t["name"] for t in loader["threads"]] == ["loader"]
    assert {c["category"]: c["percent"] for c in loader["categories"]}["copy"] == 60.0
    # main() runs on both threads: 10 + 4 of 20 samples, 4 of the loader's 10.
    assert {r["frame"]: r["samples"] for r in whole["top_total"]}["main (train.py:10)"] == 14
    assert {r["frame"]: r["samples"] for r in loader["top_total"]}["main (train.py:10)"] == 4
    assert {k: v for k, v in both.items() if k != "lag"} == {
        k: v for k, v in whole.items() if k != "lag"
    }
    assert jobs.raw_prune(budget_bytes=0)["pruned"] == 1
    after = owner_client.get(url, {"thread": "loader"}).json()
    assert after["raw_pruned"] and after["stats"] == loader


def test_a_capture_without_stored_tables_says_so_instead_of_unfiltered_stats(
    owner_client, inline_analysis
):
    upload = io.BytesIO(THREADED.encode())
    upload.name = "train.txt"
    capture_id = owner_client.post("/api/captures/import/", {"file": upload}).json()["id"]
    Capture.objects.filter(pk=capture_id).update(threads_file="")  # analysed before tables
    url = f"/api/captures/{capture_id}/"
    assert owner_client.get(url, {"thread": "loader"}).json()["stats"] is None
    assert owner_client.get(url).json()["stats"]["total_samples"] == 20


def test_re_analysing_replaces_the_stored_files_instead_of_piling_them_up(
    owner_client, inline_analysis
):
    from profiles.captures import services
    from profiles.models import KeywordSet

    upload = io.BytesIO(THREADED.encode())
    upload.name = "train.txt"
    capture_id = owner_client.post("/api/captures/import/", {"file": upload}).json()["id"]
    capture = Capture.objects.get(pk=capture_id)
    folder = Path(capture.threads_file.storage.path(capture.threads_file.name)).parent
    before = {p.name for p in folder.iterdir()}
    derived = ("flamegraph_file", "threads_file", "export_file")
    old = {field: Path(getattr(capture, field).name).name for field in derived}
    only_copy = KeywordSet.objects.create(name="copies only")
    only_copy.keywords.create(keyword="cudaMemcpy", category="copy", position=0)
    capture = services.capture_reanalyze(capture=capture, keyword_set=only_copy)
    after = {p.name for p in folder.iterdir()}
    # As many files as before: each derived file replaced, none left beside its new copy
    # (a folder reused by an earlier capture's id, as SQLite reuses ids, may hold more).
    new = {field: Path(getattr(capture, field).name).name for field in derived}
    assert len(after) == len(before) and set(new.values()) <= after, (before, after)
    assert not {name for name in set(old.values()) - set(new.values()) if name in after}
    loader = owner_client.get(f"/api/captures/{capture_id}/", {"thread": "loader"}).json()
    assert [c["category"] for c in loader["stats"]["categories"]] == ["copy"]


def test_a_malformed_import_fails_with_its_reason_and_keeps_the_file(owner_client, inline_analysis):
    upload = io.BytesIO(b"<svg xmlns='http://www.w3.org/2000/svg'></svg>")
    upload.name = "flame.svg"
    response = owner_client.post("/api/captures/import/", {"file": upload})
    assert response.status_code == 201
    capture = Capture.objects.get(pk=response.json()["id"])
    assert capture.status == "failed"
    assert capture.error_cause == "parse" and "raw file and log are kept" in capture.error
    assert capture.raw_file and capture.raw_size == len(upload.getvalue())


def test_create_api_token_prints_a_key_that_authenticates(client, owner, capsys):
    call_command("create_api_token", "owner")
    key = capsys.readouterr().out.strip()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {key}"
    assert client.get("/api/hosts/").status_code == 200
