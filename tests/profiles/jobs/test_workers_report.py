"""A whole-job record's DataLoader workers, through the real group pipeline and analysis
(only the remote seam swapped) on the real recording tests/data/jobs/loader_workers:
each rank's capture keeps its own samples only, its workers are stored beside them
and shown as its workers, never as ranks; the report's evidence names what they do."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator

from profiles.captures import enqueue, pipeline
from profiles.jobs import pipeline as group_pipeline
from profiles.jobs import services as jobs
from profiles.models import Capture, CaptureGroup
from profiles.pyspy.formats.redaction import HIDDEN
from profiles.pyspy.formats.time_track import load_track
from runs import remote
from runs.remote import guard
from tests import factories
from tests.config.test_api_schema import assert_answer_matches
from tests.support.seam import finished

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parents[2] / "data" / "jobs" / "loader_workers"
CHILDREN = json.loads((DATA / "children.json").read_text())


def _facts(rank: int) -> dict[str, str]:
    seen = CHILDREN[f"rank-{rank}"]
    return {"children_start": " ".join(map(str, seen["start"])),
            "children_end": " " + " ".join(map(str, seen["end"]))}  # fmt: skip


@pytest.fixture
def group(monkeypatch):
    """The 2-rank loader job recorded as a whole-job capture (default settings), analysed."""
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    run = factories.job_run(ranks=2, name="loader-job")
    made = jobs.capture_group_create(user=None, run=run, duration=8, rate=20)
    asked = set()

    def fake_record_many(target, pids, settings, session, **kwargs):
        session.on_ready()
        asked.add(remote.build.record_flags(settings).count("--subprocesses"))
        results, logs = {}, {}
        for pid in pids:
            rank = pid - factories.FIRST_PID
            raw, log = (DATA / f"rank-{rank}.txt").read_bytes(), (DATA / f"rank-{rank}.txt.log")
            logs[pid] = log.read_text()
            results[pid] = remote.RecordResult(
                raw, logs[pid], "", 0, "duration", 8.2, facts=_facts(rank)
            )
        return finished(remote.ManyResult(results, logs), kwargs)

    monkeypatch.setattr(remote, "record_many", fake_record_many)
    ids = list(made.captures.order_by("pid").values_list("pk", flat=True))
    host_id = Capture.objects.get(pk=ids[0]).host_id
    group_pipeline.host_captures_execute(group_id=made.pk, host_id=host_id, capture_ids=ids)
    for pk in ids:
        assert pipeline.capture_analyze_stored(capture_id=pk) == "done"
    assert asked == {1}  # a whole-job capture asks for --subprocesses by default
    return CaptureGroup.objects.get(pk=made.pk)


def test_each_rank_keeps_its_own_samples_and_its_workers_apart(group):
    for capture in group.captures.order_by("pid"):
        with capture.raw_file.open("rb") as stored:
            raw = stored.read()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        assert "process " not in text  # the rank's own stacks, no worker's
        assert {t["pid"] for t in capture.stats["threads"]} == {None}
        workers = capture.progress["workers"]
        assert workers["count"] == 2 and workers["dataloader"] is True
        assert set(workers["pids"]) >= set(CHILDREN[capture.process.role]["start"])
    rank1 = group.captures.get(process__role="rank-1")
    # The rank's states are its own rounds: one main-thread sample a round, no more.
    main = [t for t in rank1.stats["threads"] if t["name"] == "MainThread"]
    assert [t["samples"] for t in main] == [159]


def test_the_report_names_rank_1s_workers_in_tokenize_and_lists_no_worker_as_a_rank(group):
    report = group.job_report
    assert [r["name"] for r in report["ranks"]] == ["rank-0", "rank-1"]
    assert report["without_samples"] == []
    said = "rank-1's 2 DataLoader workers spend 58.2% in `tokenize (data.py:23)`"
    findings = {f["rule"]: f for f in report["findings"]}
    assert said in findings["input_bound"]["advice"]
    assert report["straggler"]["name"] == "rank-1"
    assert report["straggler"]["workers"]["text"] == said
    assert said in findings["straggler"]["advice"]


def test_the_api_and_the_page_show_the_workers_as_the_ranks(group, owner_client):
    spec = SchemaGenerator().get_schema(request=None, public=True)
    for path in ("/api/groups/{id}/", "/api/groups/{id}/live/", "/api/captures/{id}/"):
        pk = group.captures.get(process__role="rank-1").pk if "captures" in path else group.pk
        url = path.replace("{id}", str(pk))
        assert_answer_matches(spec, owner_client, "get", url, path)  # every field described
    body = owner_client.get(f"/api/groups/{group.pk}/").json()
    assert sorted(body["workers"]) == ["rank-0", "rank-1"]
    rank1 = body["workers"]["rank-1"]
    assert rank1["functions"][0]["frame"] == "tokenize (data.py:23)"
    assert len(body["processes"]) == 2  # one per rank: workers are no processes of the run
    live = owner_client.get(f"/api/groups/{group.pk}/live/").json()
    assert [row["workers"] for row in live["rows"]] == [2, 2]
    ranks = {r["name"]: r for r in live["report"]["ranks"]}
    assert ranks["rank-1"]["workers"]["functions"][0]["function"] == "tokenize (data.py)"
    assert "pids" not in ranks["rank-1"]["workers"]  # the page has no use for them


def test_a_viewer_of_the_servers_own_processes_sees_no_worker_command_line(group, teammate_client):
    body = teammate_client.get(f"/api/groups/{group.pk}/").json()
    commands = {p["command"] for w in body["workers"].values() for p in w["processes"]}
    assert commands == {HIDDEN}


def test_a_record_without_child_stacks_is_left_as_it_was():
    capture = factories.capture(None, None)
    result = remote.RecordResult(b"thread (1): MainThread;main (a.py:1) 3\n", "", "", 0,
                                 "duration", 1.0)  # fmt: skip
    assert group_pipeline.rank_samples_apart(capture, result) == (result, None)
    broken = dataclasses.replace(result, raw=b'{"shared": {"frames": [{"name": "process 1:\\"x')
    assert group_pipeline.rank_samples_apart(capture, broken) == (broken, None)  # kept as is
    assert "workers" not in Capture.objects.get(pk=capture.pk).progress
    assert guard.children({"children_start": " 12 13 ", "other": "1"}) == [[12, 13]]


SPEEDSCOPE = CHILDREN["rank-1.speedscope"]


def _speedscope_result(clock: bool) -> remote.RecordResult:
    facts = {"children_start": " ".join(map(str, SPEEDSCOPE["start"]))}
    if clock:
        facts |= {"sampling_at": str(SPEEDSCOPE["sampling_at"]),
                  "ended_at": str(SPEEDSCOPE["ended_at"])}  # fmt: skip
    raw = (DATA / "rank-1.speedscope.json").read_bytes()
    return remote.RecordResult(raw, "", "", 0, "duration", 2.3, facts=facts)


@pytest.mark.parametrize("clock", [True, False], ids=["timed", "no host clock"])
def test_a_speedscope_record_keeps_the_ranks_samples_and_time_track_only(clock):
    run = factories.run("loader-speedscope")
    process = factories.process(run, role="rank-1", pid=SPEEDSCOPE["pid"])
    capture = factories.capture(process, None, status=Capture.Status.RUNNING, idle=True, rate=20)
    result, track = group_pipeline.rank_samples_apart(capture, _speedscope_result(clock))
    text = result.raw.decode()
    assert text and "process " not in text  # the rank's own records, as raw text
    workers = Capture.objects.get(pk=capture.pk).progress["workers"]
    assert workers["count"] == 2 and workers["dataloader"]
    assert workers["functions"][0]["function"].startswith("tokenize (")
    if not clock:
        assert track is None
        return
    kept = load_track(track)
    records = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    assert kept.records == len(records)
    assert {t.pid for t in kept.threads} == {None}  # no worker thread in the rank's time
    main = next(t for t in kept.threads if t.tid == SPEEDSCOPE["pid"])
    assert main.samples == kept.rounds and all(0 <= i < len(records) for i in main.lines)
    assert all(records[i].startswith(f"thread ({SPEEDSCOPE['pid']})") for i in main.lines)


def test_only_the_ranks_own_failed_samples_can_make_its_native_record_look_failed():
    warn = "[2026-12-04T15:58:23.614970096Z WARN  py_spy] Failed to get stack trace from {}: "
    stderr = "".join(
        warn.format(pid)
        + "Failed to merge native and python frames (Have 1 native and 14 python)\n"
        for pid in [4001] * 3 + [4107] * 90
    )
    log = "py-spy> Sampling process 20 times a second for 10 seconds.\n" \
          "py-spy> Wrote raw flamegraph data to 'x'. Samples: 900 Errors: 93\n"  # fmt: skip
    result = remote.RecordResult(b"", log, stderr, 0, "duration", 10.2)
    own = group_pipeline.rank_errors_only(result, 4001)
    assert "Samples: 900 Errors: 3" in own.log
    assert remote.guard.native_failure(own.log, rate=20, sampled_s=10) is None
    assert remote.guard.native_failure(result.log, rate=20, sampled_s=10) is not None
    quiet = remote.RecordResult(b"", log, "", 0, "duration", 10.2)
    assert group_pipeline.rank_errors_only(quiet, 4001) is quiet  # nothing names a PID
