"""The group page: every process side by side, the straggler marked, the merged
flamegraph with a process filter, and GPU timelines when they were sampled."""

import gzip
import json

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from profiles import jobs, services
from profiles.models import Capture
from runs.models import Host, Run, RunProcess

pytestmark = pytest.mark.django_db


def _tree(leaf: str, value: int) -> dict:
    return {
        "name": "all",
        "value": value,
        "children": [
            {
                "name": "thread (1): MainThread",
                "value": value,
                "children": [{"name": leaf, "value": value, "children": []}],
            }
        ],
    }


def _gpu_timeline(busy: bool) -> dict:
    """Four seconds of one GPU: steady when busy, spotty when the host stalls."""
    points = [
        {
            "t": i / 4,
            "util": (88.0 if busy else (70.0 if i % 4 == 0 else 5.0)),
            "mem_used_mib": 40000.0,
            "mem_total_mib": 81559.0,
        }
        for i in range(17)
    ]
    return {"interval_ms": 250, "skipped_lines": 0, "gpus": [{"index": 0, "points": points}]}


@pytest.fixture
def group(monkeypatch):
    monkeypatch.setattr(services, "capture_enqueue", lambda *, capture: None)
    run = Run.objects.create(name="job")
    local = Host.objects.get(name="local")
    for rank in range(3):
        RunProcess.objects.create(run=run, host=local, pid=100 + rank, role=f"rank-{rank}")
    group = jobs.capture_group_create(user=None, run=run)
    mixes = [(30, 10), (31, 11), (2, 70)]
    for capture, (launch, sync) in zip(group.captures.order_by("pid"), mixes, strict=True):
        capture.status = "done"
        capture.stats = {
            "total_samples": 100,
            "categories": [
                {"category": "launch", "samples": launch, "percent": launch},
                {"category": "sync", "samples": sync, "percent": sync},
            ],
        }
        tree = _tree(f"<b>step</b> rank {capture.pid}", 100)
        capture.flamegraph_file.save(
            "fg.json.gz", ContentFile(gzip.compress(json.dumps(tree).encode()))
        )
        capture.gpu_samples = _gpu_timeline(busy=capture.pid != 102)
        capture.save()
    return group


def test_the_group_page_shows_each_process_and_marks_the_one_that_differs(teammate_client, group):
    response = teammate_client.get(reverse("profiles:group_detail", args=[group.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="outlier"') == 1
    outlier_row = html[html.index('class="outlier"') :].split("</tr>")[0]
    assert "local:102 rank-2" in outlier_row and "differs most" in outlier_row
    data = json.loads(
        html.split('id="group-data" type="application/json">')[1].split("</script>")[0]
    )
    assert [p["gpu"]["gpus"][0]["index"] for p in data["processes"]] == [0, 0, 0]


def test_the_group_page_needs_a_login(client, group):
    response = client.get(reverse("profiles:group_detail", args=[group.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_merged_flamegraph_puts_each_process_under_its_own_node(teammate_client, group):
    tree = teammate_client.get(f"/api/groups/{group.pk}/flamegraph/").json()
    assert tree["value"] == 300
    assert sorted(c["name"] for c in tree["children"]) == [
        "process local:100 rank-0",
        "process local:101 rank-1",
        "process local:102 rank-2",
    ]
    first = Capture.objects.filter(group=group).order_by("pid").first()
    only = teammate_client.get(f"/api/groups/{group.pk}/flamegraph/?capture={first.pk}").json()
    assert only["value"] == 100 and len(only["children"]) == 1


def test_the_group_page_queries_stay_bounded(teammate_client, group, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        teammate_client.get(reverse("profiles:group_detail", args=[group.pk]))
