"""Contract 3 for runs: a run with its processes, attaching and detaching processes,
ranks that register themselves, and who may do each."""

import pytest

from runs.models import Host, Run, RunProcess
from runs.tokens import api_token_create
from tests.support.procs import sleepers
from tests.support.sshd import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(db):
    return Run.objects.create(name="llama-70b", status=Run.Status.RUNNING)


@pytest.fixture
def local():
    return Host.objects.get(name="local")


def _token(client, user):
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {api_token_create(user=user)[1]}"
    return client


ROUTES = [
    ("get", "/api/runs/{run}/"),
    ("patch", "/api/runs/{run}/"),
    ("get", "/api/runs/{run}/processes/"),
    ("post", "/api/runs/{run}/processes/"),
    ("post", "/api/runs/{run}/processes/check/"),
    ("delete", "/api/runs/{run}/processes/{process}/"),
    ("post", "/api/register/"),
]


@pytest.mark.parametrize(("method", "url"), ROUTES)
def test_anonymous_callers_get_401_or_403_and_no_data(client, run, local, method, url):
    process = RunProcess.objects.create(run=run, host=local, pid=77, role="rank-0")
    response = getattr(client, method)(url.format(run=run.pk, process=process.pk))
    assert response.status_code in (401, 403)
    assert b"rank-0" not in response.content and b"llama" not in response.content
    assert RunProcess.objects.filter(pk=process.pk).exists()


WRITES = [r for r in ROUTES if r[0] != "get" and "check" not in r[1]]


@pytest.mark.parametrize(("method", "url"), WRITES)
def test_a_viewer_may_read_but_attaches_registers_and_detaches_nothing(
    teammate_client, run, local, sleeper, method, url
):
    process = RunProcess.objects.create(run=run, host=local, pid=77, role="rank-0")
    body = {"run": "new-job", "host": "local", "pid": sleeper.pid, "role": "rank-1"}
    body |= {"capture_settings": {"duration": 5}}
    response = getattr(teammate_client, method)(
        url.format(run=run.pk, process=process.pk), body, content_type="application/json"
    )
    assert response.status_code == 403
    assert list(RunProcess.objects.values_list("pid", flat=True)) == [77]
    assert not Run.objects.filter(name="new-job").exists()
    assert Run.objects.get(pk=run.pk).capture_settings == {}
    assert teammate_client.get(f"/api/runs/{run.pk}/").json()["processes"][0]["role"] == "rank-0"


def test_the_run_comes_with_its_processes_and_their_liveness(teammate_client, run, local):
    RunProcess.objects.create(run=run, host=local, pid=4242, role="rank-0", alive=False)
    body = teammate_client.get(f"/api/runs/{run.pk}/").json()
    assert body["name"] == "llama-70b" and body["status"] == "running"
    assert body["processes"] == [
        {
            "id": run.processes.get().pk,
            "host": "local",
            "host_id": local.pk,
            "pid": 4242,
            "role": "rank-0",
            "alive": False,
            "checked_at": None,
            "launch": None,
            "replaced_at": None,
            "replaced_by": None,
            "layout": None,
        }
    ]


def test_attaching_a_running_pid_answers_201_then_200_with_the_same_row(
    client, owner, run, local, sleeper
):
    api = _token(client, owner)
    url = f"/api/runs/{run.pk}/processes/"
    first = api.post(
        url, {"host": "local", "pid": sleeper.pid, "role": "rank-0"}, "application/json"
    )
    assert first.status_code == 201, first.content
    assert first.json()["alive"] is True and first.json()["warning"] == ""
    again = api.post(url, {"host": local.pk, "pid": sleeper.pid}, "application/json")
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.json()["role"] == "rank-0"
    assert run.processes.count() == 1


def test_attaching_a_pid_that_has_exited_is_refused_with_the_reason(
    owner_client, run, local, dead_pid
):
    response = owner_client.post(
        f"/api/runs/{run.pk}/processes/", {"host": "local", "pid": dead_pid}, "application/json"
    )
    assert response.status_code == 400
    assert f"no running process {dead_pid} on local" in response.json()["pid"][0]
    assert not run.processes.exists()


def test_attaching_on_a_host_that_cannot_be_asked_attaches_with_a_warning(owner_client, run):
    Host.objects.create(name="down", transport="ssh", address="127.0.0.1", port=free_port())
    response = owner_client.post(
        f"/api/runs/{run.pk}/processes/", {"host": "down", "pid": 123}, "application/json"
    )
    assert response.status_code == 201
    assert "could not check that the process runs on down" in response.json()["warning"]
    assert response.json()["alive"] is None


@pytest.mark.parametrize("pid", [0, -1, 4194305, "12a", "٣", True, None, 1.5])
def test_a_pid_that_is_not_a_linux_pid_is_a_400(owner_client, run, pid):
    response = owner_client.post(
        f"/api/runs/{run.pk}/processes/", {"host": "local", "pid": pid}, "application/json"
    )
    assert response.status_code == 400 and "pid" in response.json()


def test_an_unknown_host_is_a_400_that_says_how_to_add_it(owner_client, run):
    response = owner_client.post(
        f"/api/runs/{run.pk}/processes/", {"host": "gpu-9", "pid": 5}, "application/json"
    )
    assert response.status_code == 400
    assert "no host named 'gpu-9'" in response.json()["host"][0]
    assert "POST /api/hosts/" in response.json()["host"][0]


def test_an_operator_detaches_a_process(owner_client, run, local):
    process = RunProcess.objects.create(run=run, host=local, pid=5)
    response = owner_client.delete(f"/api/runs/{run.pk}/processes/{process.pk}/")
    assert response.status_code == 204 and not run.processes.exists()
    other = Run.objects.create(name="other")
    kept = RunProcess.objects.create(run=other, host=local, pid=6)
    assert owner_client.delete(f"/api/runs/{run.pk}/processes/{kept.pk}/").status_code == 404


@pytest.fixture
def three_ranks():
    with sleepers(3) as pids:
        yield pids


def test_registration_creates_the_run_once_and_records_its_start(client, owner, local, three_ranks):
    api = _token(client, owner)
    bodies = [
        {"run": "job-1234", "host": "local", "pid": pid, "role": f"rank-{rank}"}
        for rank, pid in enumerate(three_ranks)
    ]
    answers = [api.post("/api/register/", b, "application/json") for b in bodies]
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert [a.json()["run_created"] for a in answers] == [True, False, False]
    run = Run.objects.get(name="job-1234")
    assert run.started_at is not None and run.status == "running"
    assert run.started_at <= run.processes.order_by("created_at").first().created_at
    assert sorted(run.processes.values_list("role", flat=True)) == ["rank-0", "rank-1", "rank-2"]
    again = api.post("/api/register/", bodies[1], "application/json")
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["run"]["id"] == run.pk and run.processes.count() == 3
    assert run.processes.filter(alive=True).count() == 3


def test_registration_joins_a_run_an_operator_created_by_that_name(owner_client, local, sleeper):
    planned = Run.objects.create(name="job-7", status=Run.Status.PLANNED)
    body = {"run": "job-7", "host": "local", "pid": sleeper.pid}
    response = owner_client.post("/api/register/", body, "application/json")
    assert response.status_code == 201 and response.json()["run"]["id"] == planned.pk
    planned.refresh_from_db()
    assert planned.status == "running" and planned.started_at is not None


def test_registering_a_pid_that_does_not_run_is_refused_before_any_run_is_made(
    owner_client, local, dead_pid
):
    body = {"run": "job-ghost", "host": "local", "pid": dead_pid}
    response = owner_client.post("/api/register/", body, "application/json")
    assert response.status_code == 400
    assert f"no running process {dead_pid} on local" in response.json()["pid"][0]
    assert not Run.objects.filter(name="job-ghost").exists()


def test_a_rank_whose_host_cannot_be_asked_is_registered_as_unknown_never_alive(
    owner_client, sleeper
):
    unreachable = Host.objects.create(
        name="gpu-down", transport="ssh", address="127.0.0.1", port=free_port()
    )
    body = {"run": "job-far", "host": unreachable.name, "pid": sleeper.pid, "role": "rank-0"}
    response = owner_client.post("/api/register/", body, "application/json")
    assert response.status_code == 201
    assert response.json()["process"]["alive"] is None
    assert response.json()["process"]["checked_at"] is None
    assert "could not check that the process runs on gpu-down" in response.json()["warning"]
    run = Run.objects.get(name="job-far")
    detail = owner_client.get(f"/api/runs/{run.pk}/").json()
    assert [p["alive"] for p in detail["processes"]] == [None]
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert ">unknown<" in page and ">running<" not in page


def test_a_run_whose_every_rank_exited_is_finished_and_offers_no_capture(
    owner_client, run, local, sleeper
):
    process = RunProcess.objects.create(run=run, host=local, pid=sleeper.pid, role="rank-0")
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert f'data-process="{process.pk}" data-label' in page  # a capture button
    sleeper.kill()
    sleeper.wait()
    body = owner_client.post(f"/api/runs/{run.pk}/processes/check/").json()
    assert body["processes"][0]["alive"] is False and body["run_status"] == "finished"
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.ended_at is not None
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert "exited: nothing to capture" in page
    assert f'data-process="{process.pk}" data-label' not in page


def test_one_rank_still_running_or_unknown_keeps_the_run_running(
    owner_client, run, local, sleeper, dead_pid
):
    RunProcess.objects.create(run=run, host=local, pid=sleeper.pid, role="rank-0")
    RunProcess.objects.create(run=run, host=local, pid=dead_pid, role="rank-1")
    assert owner_client.post(f"/api/runs/{run.pk}/processes/check/").json()["run_status"] == (
        "running"
    )


def test_a_live_rank_registering_to_a_finished_run_starts_it_again(owner_client, local, sleeper):
    ended = Run.objects.create(name="job-9", status=Run.Status.FINISHED)
    body = {"run": "job-9", "host": "local", "pid": sleeper.pid}
    assert owner_client.post("/api/register/", body, "application/json").status_code == 201
    ended.refresh_from_db()
    assert ended.status == Run.Status.RUNNING and ended.ended_at is None


def test_a_rank_registers_its_place_in_the_parallel_layout_and_the_run_shows_it(
    owner_client, local, sleeper
):
    body = {"run": "job-3d", "host": "local", "pid": sleeper.pid, "role": "rank-29"}
    first = owner_client.post("/api/register/", body, "application/json")
    assert first.status_code == 201 and first.json()["process"]["layout"] is None
    # The job built its device mesh since: the same process registers again with it.
    layout = {"dp": 7, "tp": 0, "pp": 3}
    again = owner_client.post("/api/register/", {**body, "layout": layout}, "application/json")
    assert again.status_code == 200 and again.json()["process"]["layout"] == layout
    # A later registration that says nothing keeps it.
    owner_client.post("/api/register/", {**body, "layout": None}, "application/json")
    run = Run.objects.get(name="job-3d")
    (process,) = owner_client.get(f"/api/runs/{run.pk}/").json()["processes"]
    assert (process["role"], process["layout"]) == ("rank-29", layout)
    assert "rank-29 <span" in (page := owner_client.get(run.get_absolute_url()).content.decode())
    assert ">dp 7 · pp 3 · tp 0</span>" in page


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ({"dp": 7, "stage": 3}, "unknown axis 'stage': use cp, dp, dp_replicate"),
        ({"pp": -1}, "pp: give a number from 0 to 65535"),
        ({"pp": 3.5}, "pp: give a whole number"),
        ("dp=7,pp=3", "give an object of axis -> coordinate"),
    ],
)
def test_a_layout_it_cannot_use_is_refused_naming_the_problem_before_any_run_is_made(
    owner_client, local, sleeper, layout, problem
):
    body = {"run": "job-bad", "host": "local", "pid": sleeper.pid, "layout": layout}
    response = owner_client.post("/api/register/", body, "application/json")
    assert response.status_code == 400
    assert response.json()["layout"][0].startswith(problem)
    assert not Run.objects.filter(name="job-bad").exists()


def test_registration_on_an_unknown_host_names_it_and_how_to_add_it(owner_client):
    response = owner_client.post(
        "/api/register/", {"run": "job-1", "host": "gpu-node-17", "pid": 10}, "application/json"
    )
    assert response.status_code == 400
    message = response.json()["host"][0]
    assert "gpu-node-17" in message and "Hosts page" in message
    assert not Run.objects.filter(name="job-1").exists()


def test_capture_settings_are_remembered_on_the_run_and_checked(owner_client, run):
    url = f"/api/runs/{run.pk}/"
    good = {"capture_settings": {"duration": 12, "rate": 50, "native": False}}
    assert owner_client.patch(url, good, "application/json").status_code == 200
    run.refresh_from_db()
    assert run.capture_settings["duration"] == 12 and run.capture_settings["native"] is False
    bad = {"capture_settings": {"duration": 10**9}}
    assert owner_client.patch(url, bad, "application/json").status_code == 400
    assert Run.objects.get(pk=run.pk).capture_settings["duration"] == 12


def test_checking_the_run_marks_exited_processes_and_plans_capture_all(
    owner_client, run, local, sleeper, dead_pid
):
    RunProcess.objects.create(run=run, host=local, pid=sleeper.pid, role="rank-0")
    RunProcess.objects.create(run=run, host=local, pid=dead_pid, role="rank-1")
    body = owner_client.post(f"/api/runs/{run.pk}/processes/check/").json()
    assert {p["role"]: p["alive"] for p in body["processes"]} == {"rank-0": True, "rank-1": False}
    assert body["errors"] == []
    assert body["plan"]["processes"] == 1 and body["plan"]["hosts"] == 1
    assert [p["pid"] for p in body["plan"]["skipped"]] == [dead_pid]


def test_a_viewer_may_refresh_liveness_which_only_reads_the_hosts(
    teammate_client, run, local, dead_pid
):
    RunProcess.objects.create(run=run, host=local, pid=dead_pid, role="rank-0")
    body = teammate_client.post(f"/api/runs/{run.pk}/processes/check/").json()
    assert body["processes"][0]["alive"] is False


def test_a_fresh_check_is_not_repeated(owner_client, run, local, dead_pid):
    from django.utils import timezone

    now = timezone.now()
    RunProcess.objects.create(run=run, host=local, pid=dead_pid, alive=True, checked_at=now)
    body = owner_client.post(f"/api/runs/{run.pk}/processes/check/").json()
    assert body["processes"][0]["alive"] is True  # cached: checked under 15 s ago
    RunProcess.objects.update(checked_at=now - timezone.timedelta(seconds=60))
    body = owner_client.post(f"/api/runs/{run.pk}/processes/check/").json()
    assert body["processes"][0]["alive"] is False


def test_library_paths_are_set_read_and_checked_through_the_api(owner_client, run):
    url = f"/api/runs/{run.pk}/"
    response = owner_client.patch(
        url, {"library_paths": "megatron\n/opt/venv/"}, "application/json"
    )
    assert (
        response.status_code == 200 and response.json()["library_paths"] == "megatron\n/opt/venv/"
    )
    run.refresh_from_db()
    assert run.library_entries == ("megatron", "/opt/venv/")
    too_many = "\n".join(f"pkg{i}" for i in range(201))
    for bad in (too_many, "bad\x07line", ["not", "text"]):
        response = owner_client.patch(url, {"library_paths": bad}, "application/json")
        assert response.status_code == 400 and "library_paths" in response.json()
    assert Run.objects.get(pk=run.pk).library_entries == ("megatron", "/opt/venv/")


def test_a_run_created_through_the_api_keeps_its_library_paths(owner_client):
    body = {"name": "with-vendor", "library_paths": "src/vendor/"}
    response = owner_client.post("/api/runs/", body, "application/json")
    assert response.status_code == 201 and response.json()["library_paths"] == "src/vendor/"
    assert Run.objects.get(name="with-vendor").library_entries == ("src/vendor/",)
