"""Trends across launches: a role keeps one line through every launch of its run (new
PIDs, new processes), and the run's trend data says where each launch began."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Launch, RunProcess
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_role_keeps_one_line_across_launches_and_the_boundaries_are_given(teammate_client):
    run = factories.run()
    host = factories.local_host()
    first, second = (Launch.objects.create(run=run, number=n) for n in (1, 2))
    old = RunProcess.objects.create(run=run, host=host, pid=101, role="rank-0", launch=first)
    new = RunProcess.objects.create(run=run, host=host, pid=202, role="rank-0", launch=second)
    RunProcess.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(minutes=60),
        replaced_at=timezone.now() - timedelta(minutes=20),
        replaced_by=new,
    )
    RunProcess.objects.filter(pk=new.pk).update(created_at=timezone.now() - timedelta(minutes=20))
    for process, ago in ((old, 50), (old, 40), (new, 10)):
        factories.done_capture(
            run=run,
            process=process,
            shares={"sync": 10.0},
            step={"compute": 100.0},
            at=factories.minutes_ago(ago),
        )
    data = teammate_client.get(f"/runs/{run.pk}/trends.json?series=role:rank-0").json()
    lines = [s for s in data["series"] if s["points"]]
    assert [r["key"] for r in data["ranks"]] == ["role:rank-0"]
    assert len(lines) == 1 and len(lines[0]["points"]) == 3
    assert [launch["label"] for launch in data["launches"]] == ["launch 1", "launch 2"]
    starts = [launch["start"] for launch in data["launches"]]
    assert starts == sorted(starts)


def test_a_run_of_one_launch_marks_no_boundary(teammate_client):
    run = factories.run()
    Launch.objects.create(run=run, number=1)
    assert teammate_client.get(f"/runs/{run.pk}/trends.json").json()["launches"] == []
