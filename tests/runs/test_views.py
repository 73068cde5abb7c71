"""Run and host pages: permissions per persona, search and filters, click-to-capture,
the lag warning's data, and a bounded number of queries at scale."""

import json
import subprocess
import sys
import time

import pytest
from django.urls import reverse

from profiles.models import Capture
from runs.models import Host, Run, RunProcess, Tag
from tests.profiles.web.test_views import bulk_captures, fake_stats


@pytest.fixture
def run(db):
    return Run.objects.create(name="llama-7b bs64", description="baseline run")


@pytest.fixture
def process(run):
    return RunProcess.objects.create(
        run=run, host=Host.objects.get(name="local"), pid=4242, role="target-0"
    )


def context_json(response, element_id: str):
    html = response.content.decode()
    return json.loads(
        html.split(f'id="{element_id}" type="application/json">')[1].split("</script>")[0]
    )


PAGES = ["runs:run_list", "runs:run_detail", "runs:host_list", "runs:host_detail"]


def _url(name, run):
    if name == "runs:run_detail":
        return reverse(name, args=[run.pk])
    if name == "runs:host_detail":
        return reverse(name, args=[Host.objects.get(name="local").pk])
    return reverse(name)


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES + ["runs:run_create", "runs:host_create"])
def test_anonymous_users_are_sent_to_log_in(client, run, name):
    response = client.get(_url(name, run))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_a_teammate_sees_run_and_host_pages_without_launch_buttons(
    teammate_client, run, process, name
):
    response = teammate_client.get(_url(name, run))
    assert response.status_code == 200
    assert 'class="capture-launch"' not in response.content.decode()


@pytest.mark.django_db
def test_a_teammate_gets_403_on_every_write(teammate_client, run, process):
    host = Host.objects.get(name="local")
    for url, data in [
        (reverse("runs:run_create"), {"name": "x", "status": "running"}),
        (reverse("runs:run_edit", args=[run.pk]), {"name": "x", "status": "running"}),
        (reverse("runs:run_process_add", args=[run.pk]), {"host": host.pk, "pid": 1}),
        (reverse("runs:run_process_remove", args=[run.pk, process.pk]), {}),
        (reverse("runs:host_create"), {"name": "h"}),
        (reverse("runs:host_edit", args=[host.pk]), {"name": "h"}),
    ]:
        assert teammate_client.post(url, data).status_code == 403, url
    assert teammate_client.post("/api/captures/", {"host": host.pk, "pid": 1}).status_code == 403
    assert not Capture.objects.exists()


@pytest.mark.django_db
def test_an_owner_creates_a_run_with_tags_and_edits_it(owner_client, owner):
    response = owner_client.post(
        reverse("runs:run_create"),
        {
            "name": "gpt bs32",
            "description": "d",
            "status": "running",
            "tags_text": "baseline, bs32",
            "schedule_every_min": 0,
        },
    )
    run = Run.objects.get(name="gpt bs32")
    assert response.status_code == 302 and run.created_by == owner and run.started_at
    assert sorted(run.tags.values_list("name", flat=True)) == ["baseline", "bs32"]
    owner_client.post(
        reverse("runs:run_edit", args=[run.pk]),
        {
            "name": "gpt bs32",
            "status": "finished",
            "tags_text": "after-fix",
            "schedule_every_min": 0,
        },
    )
    run.refresh_from_db()
    assert run.status == "finished" and list(run.tags.values_list("name", flat=True)) == [
        "after-fix"
    ]


@pytest.mark.django_db
def test_the_run_form_sets_and_edits_the_library_paths(owner_client):
    fields = {"name": "vendored", "status": "running", "schedule_every_min": 0}
    owner_client.post(reverse("runs:run_create"), {**fields, "library_paths": "megatron"})
    run = Run.objects.get(name="vendored")
    assert run.library_entries == ("megatron",)
    page = owner_client.get(reverse("runs:run_edit", args=[run.pk])).content.decode()
    assert 'name="library_paths"' in page and "megatron" in page
    edit = {**fields, "library_paths": "megatron\n src/vendor/ \n"}
    owner_client.post(reverse("runs:run_edit", args=[run.pk]), edit)
    run.refresh_from_db()
    assert run.library_entries == ("megatron", "src/vendor/")
    bad = owner_client.post(
        reverse("runs:run_edit", args=[run.pk]), {**fields, "library_paths": "a\x00b"}
    )
    assert (
        bad.status_code == 200 and Run.objects.get(pk=run.pk).library_entries == run.library_entries
    )


@pytest.mark.django_db
def test_an_owner_attaches_and_detaches_a_process(owner_client, run, sleeper):
    host = Host.objects.get(name="local")
    owner_client.post(
        reverse("runs:run_process_add", args=[run.pk]),
        {"host": host.pk, "pid": sleeper.pid, "role": "rank 0"},
    )
    process = run.processes.get()
    assert (process.pid, process.role, process.alive) == (sleeper.pid, "rank 0", True)
    owner_client.post(reverse("runs:run_process_remove", args=[run.pk, process.pk]))
    assert not run.processes.exists()


@pytest.mark.django_db
def test_attaching_a_pid_that_is_not_running_says_so_and_attaches_nothing(
    owner_client, run, dead_pid
):
    host = Host.objects.get(name="local")
    response = owner_client.post(
        reverse("runs:run_process_add", args=[run.pk]),
        {"host": host.pk, "pid": dead_pid},
        follow=True,
    )
    assert f"no running process {dead_pid} on local" in response.content.decode()
    assert not run.processes.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("pid", ["0", "4194305", "٣", "1e3"])
def test_the_attach_form_refuses_what_is_not_a_pid(owner_client, run, pid):
    host = Host.objects.get(name="local")
    response = owner_client.post(
        reverse("runs:run_process_add", args=[run.pk]), {"host": host.pk, "pid": pid}, follow=True
    )
    assert "Could not attach the process — pid:" in response.content.decode()
    assert not run.processes.exists()


@pytest.mark.django_db
def test_a_launcher_tree_is_attached_to_a_new_run_in_one_post(owner_client, sleeper):
    host = Host.objects.get(name="local")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        response = owner_client.post(
            reverse("runs:host_attach", args=[host.pk]),
            {"pids": f"{sleeper.pid} {other.pid}", "new_run": "train.py on local",
             f"role_{sleeper.pid}": "rank-0", f"role_{other.pid}": "rank-1"},
        )  # fmt: skip
    finally:
        other.kill()
        other.wait()
    run = Run.objects.get(name="train.py on local")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert sorted(run.processes.values_list("role", "alive")) == [
        ("rank-0", True),
        ("rank-1", True),
    ]


@pytest.mark.django_db
def test_a_tree_with_an_exited_process_attaches_none_of_it(owner_client, run, sleeper, dead_pid):
    host = Host.objects.get(name="local")
    response = owner_client.post(
        reverse("runs:host_attach", args=[host.pk]),
        {"pids": f"{sleeper.pid},{dead_pid}", "run": run.pk},
        follow=True,
    )
    assert f"no running process {dead_pid}" in response.content.decode()
    assert not run.processes.exists()


@pytest.mark.django_db
def test_a_teammate_cannot_attach_a_tree_and_sees_no_attach_dialog(teammate_client, sleeper):
    host = Host.objects.get(name="local")
    url = reverse("runs:host_attach", args=[host.pk])
    assert teammate_client.post(url, {"pids": str(sleeper.pid), "new_run": "x"}).status_code == 403
    assert not Run.objects.filter(name="x").exists()
    page = teammate_client.get(reverse("runs:host_detail", args=[host.pk])).content.decode()
    assert 'id="attach-dialog"' not in page


@pytest.mark.django_db
def test_the_run_page_marks_exited_processes_and_plans_capture_all(owner_client, run):
    local = Host.objects.get(name="local")
    RunProcess.objects.create(run=run, host=local, pid=11, role="rank-0", alive=True)
    RunProcess.objects.create(run=run, host=local, pid=12, role="rank-1", alive=False)
    run.capture_settings = {"duration": 7, "rate": 99, "native": False}
    run.save()
    response = owner_client.get(reverse("runs:run_detail", args=[run.pk]))
    html = response.content.decode()
    assert html.count('class="exited"') == 1 and ">exited</span>" in html
    plan = context_json(response, "capture-all-data")
    assert plan["plan"]["processes"] == 1 and plan["plan"]["hosts"] == 1
    assert [p["pid"] for p in plan["plan"]["skipped"]] == [12]
    assert (plan["settings"]["duration"], plan["settings"]["rate"]) == (7, 99)
    assert plan["settings"]["native"] is False and plan["settings"]["threads"] is True
    # Not remembered on this run: a whole job records with --idle, and the dialog says why.
    assert plan["settings"]["idle"] is True
    assert "without it py-spy drops the samples of blocked threads" in html


@pytest.mark.django_db
def test_a_teammate_gets_no_capture_all_dialog(teammate_client, run, process):
    html = teammate_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    assert "capture-all-dialog" not in html and 'id="capture-all"' not in html
    assert 'id="dump-all"' not in html


@pytest.mark.django_db
def test_an_operator_gets_dump_all_ranks_beside_capture_all(owner_client, run, process):
    html = owner_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()
    assert 'id="capture-all"' in html and 'id="dump-all"' in html
    assert ">Dump all ranks</button>" in html


@pytest.mark.django_db
def test_an_owner_starts_a_capture_of_a_run_process_with_defaults(
    owner_client, owner, run, process
):
    response = owner_client.post(
        "/api/captures/", json.dumps({"process": process.pk}), content_type="application/json"
    )
    assert response.status_code == 201
    capture = Capture.objects.get(pk=response.json()["id"])
    assert (capture.process, capture.run, capture.pid, capture.requested_by) == (
        process,
        run,
        4242,
        owner,
    )
    assert (capture.duration, capture.rate, capture.native, capture.threads) == (30, 20, True, True)
    bad = owner_client.post(
        "/api/captures/",
        json.dumps({"process": process.pk, "rate": 0}),
        content_type="application/json",
    )
    assert bad.status_code == 400 and "rate" in bad.json()


@pytest.mark.django_db
def test_the_capture_button_knows_which_rates_fell_behind_before(owner_client, run, process):
    Capture.objects.create(
        host=process.host,
        pid=process.pid,
        rate=49,
        status=Capture.Status.DONE,
        stats=fake_stats(0, "unreliable"),
    )
    Capture.objects.create(
        host=process.host,
        pid=999,
        rate=49,
        status=Capture.Status.DONE,
        stats=fake_stats(0, "unreliable"),
    )
    history = context_json(owner_client.get(run.get_absolute_url()), "launch-context")["lagHistory"]
    assert [(h["pid"], h["rate"], h["verdict"], h["recommended_rate"]) for h in history] == [
        (4242, 49, "unreliable", 10)
    ]


@pytest.mark.django_db
def test_a_host_admin_creates_and_edits_hosts(host_admin_client):
    response = host_admin_client.post(
        reverse("runs:host_create"),
        {
            "name": "gpu-1",
            "transport": "ssh",
            "address": "gpu-1.lan",
            "py_spy": "py-spy",
            "exec_prefix": "pct exec 200 --",
        },
    )
    host = Host.objects.get(name="gpu-1")
    assert response.status_code == 302 and host.exec_prefix == "pct exec 200 --"
    bad = host_admin_client.post(
        reverse("runs:host_edit", args=[host.pk]),
        {"name": "gpu-1", "transport": "ssh", "address": "-oProxyCommand=x", "py_spy": "py-spy"},
    )
    assert bad.status_code == 200 and "may hold only letters" in bad.content.decode()


@pytest.mark.django_db
def test_the_host_page_shows_the_last_check_and_its_processes(owner_client):
    host = Host.objects.get(name="local")
    host.last_check = {
        "ok": True,
        "ssh_ok": True,
        "py_spy_version": "0.4.1",
        "can_attach": True,
        "processes": [
            {
                "pid": 31,
                "user": "root",
                "cpu_percent": 99.0,
                "threads": 9,
                "command": "<b>python</b> train.py",
            }
        ],
    }
    host.save()
    response = owner_client.get(host.get_absolute_url())
    assert context_json(response, "host-check")["processes"][0]["pid"] == 31
    assert "<b>python</b>" not in response.content.decode()


@pytest.mark.django_db
def test_the_run_list_searches_by_name_and_tag_and_filters_by_status_and_host(teammate_client):
    a = Run.objects.create(name="alpha", status="running")
    b = Run.objects.create(name="beta", status="finished")
    b.tags.add(Tag.objects.create(name="after-fix"))
    other = Host.objects.create(name="gpu-9", transport="local")
    RunProcess.objects.create(run=a, host=other, pid=1)

    def names(params):
        rows = teammate_client.get(reverse("runs:run_list"), params).context["rows"]
        return [r["run"].name for r in rows]

    assert names({}) == ["beta", "alpha"]
    assert names({"q": "alp"}) == ["alpha"]
    assert names({"q": "after-fix"}) == ["beta"]
    assert names({"status": "finished"}) == ["beta"]
    assert names({"host": other.pk}) == ["alpha"]


@pytest.mark.django_db
def test_the_run_list_is_paginated_with_latest_capture_and_sparkline_in_bounded_queries(
    teammate_client, django_assert_max_num_queries
):
    runs = Run.objects.bulk_create(Run(name=f"run {i}") for i in range(60))
    for run in runs[-30:]:
        bulk_captures(15, run=run)
    with django_assert_max_num_queries(10):
        response = teammate_client.get(reverse("runs:run_list"))
    rows = response.context["rows"]
    assert len(rows) == 25 and rows[0]["latest"] is not None
    assert rows[0]["spark"] and rows[0]["spark"]["lines"][0]["state"] == "compute"
    assert "<polyline" in response.content.decode()


@pytest.mark.django_db
def test_a_run_with_1000_captures_opens_quickly_in_bounded_queries(
    teammate_client, run, process, django_assert_max_num_queries
):
    bulk_captures(1000, run=run, process=process)
    start = time.perf_counter()
    with django_assert_max_num_queries(14):
        response = teammate_client.get(run.get_absolute_url())
    assert time.perf_counter() - start < 2.0
    assert len(response.context["page"].object_list) == 50
