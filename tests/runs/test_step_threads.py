"""A run's step threads (what the whole-job report reads as the training step): set
through the API and the run form, checked, and only by those who may launch."""

import pytest
from django.urls import reverse

from runs.models import Run
from tests import factories

pytestmark = pytest.mark.django_db


def test_step_threads_are_set_read_and_checked_through_the_api(owner_client):
    run = factories.job_run(ranks=2)
    url = f"/api/runs/{run.pk}/"
    response = owner_client.patch(url, {"step_threads": "trainer, 5066 worker"}, "application/json")
    assert response.status_code == 200 and response.json()["step_threads"] == "trainer, 5066 worker"
    assert Run.objects.get(pk=run.pk).step_thread_names == ("trainer", "5066", "worker")
    for bad in ("tab\x07bell", "x" * 301, ["trainer"]):
        response = owner_client.patch(url, {"step_threads": bad}, "application/json")
        assert response.status_code == 400 and "step_threads" in response.json()
    assert Run.objects.get(pk=run.pk).step_thread_names == ("trainer", "5066", "worker")


def test_step_threads_and_library_paths_can_be_set_in_one_patch(owner_client):
    run = factories.job_run(ranks=1)
    body = {"step_threads": "trainer", "library_paths": "megatron"}
    assert owner_client.patch(f"/api/runs/{run.pk}/", body, "application/json").status_code == 200
    run.refresh_from_db()
    assert (run.step_thread_names, run.library_entries) == (("trainer",), ("megatron",))


def test_a_viewer_cannot_set_step_threads(teammate_client):
    run = factories.job_run(ranks=1)
    response = teammate_client.patch(
        f"/api/runs/{run.pk}/", {"step_threads": "trainer"}, "application/json"
    )
    assert response.status_code == 403 and Run.objects.get(pk=run.pk).step_threads == ""


def test_the_run_form_sets_the_step_threads(owner_client):
    fields = {"name": "stepped", "status": "running", "schedule_every_min": 0}
    owner_client.post(reverse("runs:run_create"), {**fields, "step_threads": "trainer"})
    run = Run.objects.get(name="stepped")
    assert run.step_thread_names == ("trainer",)
    page = owner_client.get(reverse("runs:run_edit", args=[run.pk])).content.decode()
    assert 'name="step_threads"' in page
    owner_client.post(reverse("runs:run_edit", args=[run.pk]), {**fields, "step_threads": "a,b"})
    assert Run.objects.get(pk=run.pk).step_thread_names == ("a", "b")


def test_a_run_created_through_the_api_keeps_its_step_threads(owner_client):
    response = owner_client.post("/api/runs/", {"name": "new", "step_threads": "trainer"})
    assert response.status_code == 201 and response.json()["step_threads"] == "trainer"
