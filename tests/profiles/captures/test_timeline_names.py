"""A capture's time names frames as the rest of the product does (issue 48 item 1): the
stored raw text of a speedscope recording keeps py-spy's absolute paths (the download
has them), yet its timeline, windows, periodic stall and the whole job's merged
flamegraph name each frame as py-spy does by default (`periodic_job.py:38`,
`threading.py:320`), never by the recording machine's folders."""

import gzip
import json
import re

import pytest

from profiles.models import CaptureGroup
from tests import factories

pytestmark = pytest.mark.django_db

# An absolute file inside a frame's location: `(/usr/lib/...` or `(C:\...`.
ABSOLUTE = re.compile(r"\((?:/|[A-Za-z]:[\\/])")


def _absolute_paths(answer) -> list[str]:
    """Every string in a JSON answer that names an absolute file in a frame."""
    found, stack = [], [answer]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [v for k, v in item.items() if k != "path"]
            stack += list(item)
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and ABSOLUTE.search(item):
            found.append(item)
    return found


def _frames(tree: dict) -> set[str]:
    names, stack = set(), [tree]
    while stack:
        node = stack.pop()
        names.add(node["name"])
        stack += node.get("children", [])
    return names


@pytest.fixture
def timed_job(owner):
    """A whole-job capture of two real recordings (periodic evaluation, periodic
    checkpoint), stored and analysed as the worker does from py-spy's speedscope."""
    run = factories.job_run(ranks=2, name="named job")
    ranks = list(run.processes.order_by("pid"))
    group = CaptureGroup.objects.create(run=run)
    made = [
        factories.timed_capture(process_=ranks[0], group=group, offset_s=0.0),
        factories.timed_capture("periodic_checkpoint", process_=ranks[1], group=group),
    ]
    return group, made


def test_the_stored_raw_text_keeps_the_recordings_absolute_paths(timed_job):
    _, (capture, _) = timed_job
    with capture.raw_file.open("rb") as fh:
        raw = gzip.decompress(fh.read()).decode()
    assert "/tests/data/timeline/periodic_job.py:38" in raw
    assert "(/usr/lib/python3.11/threading.py:" in raw


def test_the_periodic_stall_names_its_frames_as_py_spy_does(timed_job):
    _, (capture, _) = timed_job
    (stall,) = [f for f in capture.stats["findings"] if f["rule"] == "periodic_stall"]
    assert stall["frames"] == ["evaluate (periodic_job.py:38)"], stall
    assert "`evaluate (periodic_job.py:38)`" in stall["title"] + stall["advice"]
    assert _absolute_paths(capture.stats) == []
    effects = capture.stats["time"]["design_effect"]["step"]["functions"]
    assert "evaluate (periodic_job.py)" in effects, effects


def test_the_timeline_window_and_window_flamegraph_name_no_absolute_path(client, owner, timed_job):
    client.force_login(owner)
    _, (capture, _) = timed_job
    (stall,) = [f for f in capture.stats["findings"] if f["rule"] == "periodic_stall"]
    begin, end = stall["bursts"][1]
    base = f"/api/captures/{capture.pk}"
    line = client.get(f"{base}/timeline/?bucket=0.5")
    window = client.get(f"{base}/window/?from={begin}&to={end}")
    tree = client.get(f"{base}/flamegraph/?from={begin}&to={end}")
    rest = client.get(f"{base}/flamegraph/?from=0&to={begin}")
    for answer in (line, window, tree, rest):
        assert answer.status_code == 200, answer.content
        assert _absolute_paths(answer.json()) == [], answer.json()
    assert "evaluate (periodic_job.py:38)" in _frames(tree.json())
    top = [row["frame"] for row in window.json()["top_total"]]
    assert "evaluate (periodic_job.py:38)" in top, top
    # Where a name was shortened, the node carries the recorded file for the tooltip.
    paths = {n["path"] for n in _nodes(tree.json()) if n["name"].startswith("evaluate (")}
    assert paths and all(p.endswith("/tests/data/timeline/periodic_job.py") for p in paths)


def _nodes(tree: dict) -> list[dict]:
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        stack += node.get("children", [])
    return found


def test_the_group_timeline_and_merged_flamegraph_name_no_absolute_path(client, owner, timed_job):
    client.force_login(owner)
    group, _ = timed_job
    line = client.get(f"/api/groups/{group.pk}/timeline/")
    merged = client.get(f"/api/groups/{group.pk}/flamegraph/")
    detail = client.get(f"/api/groups/{group.pk}/")
    for answer in (line, merged, detail):
        assert answer.status_code == 200, answer.content
        assert _absolute_paths(answer.json()) == [], json.dumps(answer.json())[:2000]
    names = _frames(merged.json())
    assert {"evaluate (periodic_job.py:38)", "Condition.wait (threading.py:320)"} <= names
    with_path = [
        n for n in _nodes(merged.json()) if n["name"] == "Condition.wait (threading.py:320)"
    ]
    assert with_path and {n["path"] for n in with_path} == {"/usr/lib/python3.11/threading.py"}
