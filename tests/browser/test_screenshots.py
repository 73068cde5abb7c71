"""`make screenshots`: the main pages with realistic data, saved to docs/screenshots/.

The capture and whole-job pages show real recordings (tests/data/jobs/: a 4-rank gloo
job with host syncs planted, and one whose rank 3 is the planted straggler), analysed
by the real pipeline; the whole-job dump of a real hung DDP job (tests/data/dumps) and the
timelines of real recordings with time (tests/data/timeline). Also a check that every
page renders without JavaScript errors at a laptop width."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from profiles.captures import pipeline, services
from profiles.jobs import report as group_report
from profiles.models import Capture, CaptureGroup
from runs.models import Host, Run, RunProcess, Tag
from tests import factories
from tests.browser.conftest import SCREENSHOTS
from tests.profiles.pyspy.timeline_data import TIMELINE
from tests.profiles.web.test_views import DUMP, LAG_LOG, fake_stats, imported
from tests.support.recorded_jobs import record_group

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T0 = "thread (5066): target-0;<module> (train.py:88);main (train.py:80);train_step (train.py:"
ALLOC = "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc (libc10_cuda.so)"
LINES = [
    T0 + "41);forward (model.py:120);Linear.forward (torch/nn/modules/linear.py:134);"
    "cuLaunchKernel (libcuda.so.1) 410",
    T0 + "41);forward (model.py:120);attention (model.py:77);cuLaunchKernel (libcuda.so.1) 220",
    T0 + "45);loss.item (train.py:45);at::native::_local_scalar_dense_cuda (libtorch_cuda.so);"
    "cuStreamSynchronize (libcuda.so.1) 930",
    T0 + "43);backward (torch/_tensor.py:521);run_backward (libtorch.so);"
    "0x7fc0eb8a71f5 (libc.so.6) 380",
    T0 + "42);step (torch/optim/adamw.py:160);" + ALLOC + " 160",
    "thread (5071): pin_memory;_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:49);"
    "get (queue.py:180);wait (threading.py:331);pthread_cond_timedwait (libc.so.6) 300",
    "thread (5072): loader-0;_worker_loop (torch/utils/data/_utils/worker.py:308);"
    "collate (data.py:31);decode_jpeg (libjpeg.so.8) 240",
    # py-spy sees Python threads only (NCCL's own watchdog is a C++ thread it never shows).
    "thread (5073): event-writer;run (threading.py:1010);_run (tensorboard/summary/writer/"
    "event_file_writer.py:244);get (queue.py:180);wait (threading.py:331);"
    "pthread_cond_timedwait (libc.so.6) 120",
]
TRAINING = "\n".join(LINES) + "\n"


def shoot(page, name: str, full: bool = True) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(900)  # let d3 transitions finish
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full)


@pytest.fixture
def data(owner, teammate, monkeypatch):
    host = Host.objects.create(
        name="gpu-node-3",
        transport="ssh",
        address="gpu-node-3.lan",
        username="root",
        exec_prefix="pct exec 200 --",
    )
    host.last_check = {
        "ok": True,
        "ssh_ok": True,
        "py_spy_version": "py-spy 0.4.0",
        "py_spy_path": "/usr/local/bin/py-spy",
        "uid": 0,
        "ptrace_scope": 1,
        "can_attach": True,
        "reason": "root",
        "processes": [
            {
                "pid": 5066,
                "user": "root",
                "cpu_percent": 312.4,
                "threads": 41,
                "command": "python train.py --config llama7b.yaml --rank 0",
            },
            {
                "pid": 5067,
                "user": "root",
                "cpu_percent": 298.0,
                "threads": 39,
                "command": "python train.py --config llama7b.yaml --rank 1",
            },
            {
                "pid": 4410,
                "user": "root",
                "cpu_percent": 0.3,
                "threads": 3,
                "command": "python -m tensorboard.main --logdir runs/",
            },
        ],
    }
    host.save()
    run = services_run("llama-7b bs64 async-postprocess", "after-fix", owner)
    for i, name in enumerate(["baseline bs64", "bs128 grad-accum", "fp8 trial", "dataloader x8"]):
        other = services_run(name, "baseline" if i % 2 else "bs128", owner)
        Capture.objects.bulk_create(
            Capture(
                run=other,
                host=host,
                pid=5066,
                status=Capture.Status.DONE,
                stats=fake_stats(j * 3 + i),
            )
            for j in range(8)
        )
    p0 = RunProcess.objects.create(run=run, host=host, pid=5066, role="target-0")
    RunProcess.objects.create(run=run, host=host, pid=5067, role="target-1")
    made = Capture.objects.bulk_create(
        Capture(
            run=run,
            process=p0,
            host=host,
            pid=5066,
            rate=49 if j == 0 else 20,
            status=Capture.Status.DONE,
            stats=fake_stats(j, "unreliable" if j == 0 else None),
        )
        for j in range(10)
    )
    # Taken over the last few hours, not all in one instant: the trend has a time axis.
    for j, done in enumerate(made):
        at = timezone.now() - timedelta(minutes=20 * (11 - j))
        Capture.objects.filter(pk=done.pk).update(queued_at=at, finished_at=at)
    capture = imported(owner, raw=TRAINING, log=LAG_LOG.replace("100 times", "49 times"), run=run)
    Capture.objects.filter(pk=capture.pk).update(
        host=host, pid=5066, process=p0, kind=Capture.Kind.RECORD, rate=49, duration=30
    )
    annotate(
        capture,
        "after-fix",
        teammate,
        "cuStreamSynchronize (libcuda.so.1)",
        "`loss.item()` forces a **host sync** every step; move it behind the log interval.",
    )
    dump = Capture.objects.create(run=run, host=host, pid=5066, kind=Capture.Kind.DUMP)
    pipeline.capture_store_outputs(capture=dump, raw=DUMP.encode(), log="")
    Capture.objects.filter(pk=dump.pk).update(status=Capture.Status.PARSING)
    pipeline.capture_analyze(capture=Capture.objects.get(pk=dump.pk))
    job, _ = record_group(monkeypatch, "straggler", run_name="gloo 4 ranks: rank 3 computes more")
    hostsync, ranks = record_group(monkeypatch, "hostsync", run_name="gloo 4 ranks: .item() a step")
    real = Capture.objects.get(pk=ranks[0])
    annotate(
        real,
        "baseline",
        teammate,
        "Job.train_step (train.py:142)",
        "`loss.item()` every step: log it every 50 steps instead.",
    )
    return {"run": run, "host": host, "capture": capture, "dump": dump, "job": job, "real": real,
            "hostsync": hostsync}  # fmt: skip


def annotate(capture, tag: str, author, frame: str, body: str) -> None:
    """A tag and a comment pinned to a frame, as a teammate leaves them."""
    capture.tags.add(Tag.objects.get_or_create(name=tag)[0])
    services.comment_create(capture=capture, author=author, frame=frame, body=body)


def services_run(name, tag, owner):
    from runs.services import run_create

    return run_create(user=owner, name=name, tags=tag, description="Llama 7B on 8×H100, FSDP")


def test_screenshots_of_the_main_pages(open_tab, owner, data):
    tab = open_tab(owner)
    page = tab.goto("/")
    shoot(page, "runs")
    page = tab.goto(data["run"].get_absolute_url())
    shoot(page, "run_detail")
    page.locator("#processes .capture-more").first.click()
    shoot(page, "capture_button_advanced", full=False)
    page = tab.goto(data["real"].get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    shoot(page, "capture_detail")
    page = tab.goto(data["job"].get_absolute_url())
    page.wait_for_selector("#job-report[data-ready='1']")
    page.wait_for_selector("#group-flamegraph[data-loaded='true']")
    shoot(page, "group_detail")
    page = tab.goto(data["capture"].get_absolute_url())
    page.wait_for_selector("#flamegraph[data-ready='1']")
    page.locator('#flamegraph g[name^="main (train.py"]').first.click()
    page.fill("#fg-search", "cuStreamSynchronize")
    page.wait_for_timeout(500)
    page.locator('#flamegraph g[name^="loss.item"]').first.hover()
    shoot(page, "capture_flamegraph_zoomed", full=False)
    page = tab.goto(data["dump"].get_absolute_url())
    shoot(page, "dump")
    page = tab.goto(data["host"].get_absolute_url())
    shoot(page, "host_detail")
    for name, path in [
        ("captures", "/captures/"),
        ("hosts", "/hosts/"),
        ("keywords", "/keywords/"),
    ]:
        shoot(tab.goto(path), name)


# --- a hung job and time: the dump page and the timelines (docs/jobs.md, docs/evidence.md) ---

DUMPS = Path(__file__).resolve().parents[1] / "data" / "dumps"


def dumped_job(client, monkeypatch, case: str) -> CaptureGroup:
    """A "Dump all ranks" of the four ranks of a real hung gloo DDP job
    (tests/data/dumps/CASE: py-spy's own dumps, three rounds), asked through the API and
    stored by the worker's host task with only the SSH seam swapped for those files."""
    from profiles.captures import enqueue
    from profiles.jobs import pipeline as group_pipeline
    from runs import remote

    run = Run.objects.create(name="hang_train.py: 4 ranks, gloo DDP", status="running")
    local = Host.objects.get(name="local")
    pids = [RunProcess.objects.create(run=run, host=local, pid=31400 + r, role=f"rank-{r}").pid
            for r in range(4)]  # fmt: skip
    files = {pid: sorted((DUMPS / case).glob(f"rank-{r}.*.json")) for r, pid in enumerate(pids)}

    def from_files(target, asked, *, repeat, interval_s, native=True, start_at=None):
        at = start_at or 0.0
        return {pid: remote.PidDumps([remote.Dump(path.read_text(), at + k * interval_s, True)
                                      for k, path in enumerate(files[pid])])
                for pid in asked}  # fmt: skip

    monkeypatch.setattr(remote, "dump_many", from_files)
    monkeypatch.setattr(enqueue, "group_enqueue", lambda *, group: None)
    answer = client.post(f"/api/runs/{run.pk}/capture/", {"kind": "dump"}, "application/json")
    group = CaptureGroup.objects.get(pk=answer.json()["id"])
    ids = list(group.captures.values_list("pk", flat=True))
    group_pipeline.host_captures_execute(group_id=group.pk, host_id=local.pk, capture_ids=ids)
    group.refresh_from_db()
    assert group.stacks["verdict"]["kind"] == "stuck", group.stacks
    return group


def drag(page, row, begin: float, end: float) -> None:
    """Drag across `row` (a strip's locator) from `begin` to `end`, fractions of its width."""
    row.scroll_into_view_if_needed()
    box = row.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + begin * box["width"], y)
    page.mouse.down()
    page.mouse.move(box["x"] + end * box["width"], y, steps=8)
    page.mouse.up()
    page.mouse.move(0, 0)  # no tooltip over the picture


def timed_job() -> CaptureGroup:
    """A whole-job capture of three ranks with time (tests/data/timeline, real recordings):
    rank-0 the training loop with its planted 0.8 s evaluate() every ~3 s, rank-1 one with a
    0.6 s checkpoint wait on a host whose clock runs 50 s ahead, rank-2 the steady loop."""
    run = factories.job_run(ranks=3, name="periodic_job.py: 3 ranks")
    ranks = list(run.processes.order_by("pid"))
    group = CaptureGroup.objects.create(run=run)
    first = json.loads((TIMELINE / "periodic_eval.clock.json").read_text())["start"]
    other = json.loads((TIMELINE / "periodic_checkpoint.clock.json").read_text())["start"]
    steady = json.loads((TIMELINE / "steady.clock.json").read_text())["start"]
    factories.timed_capture(process_=ranks[0], group=group, offset_s=0.0)
    factories.timed_capture("periodic_checkpoint", process_=ranks[1], group=group,
                            shift_s=first + 50.4 - other, offset_s=-50.0)  # fmt: skip
    factories.timed_capture("steady", process_=ranks[2], group=group, shift_s=first + 0.2 - steady,
                            offset_s=0.0)  # fmt: skip
    group_report.group_report_update(group_id=group.pk)
    return group


def test_screenshots_of_a_hung_jobs_dump_and_the_timelines(
    open_tab, owner, owner_client, monkeypatch
):
    hung = dumped_job(owner_client, monkeypatch, "own_code")
    run = factories.job_run(ranks=1, name="periodic_job.py: evaluate() every 88 steps")
    timed = factories.timed_capture(process_=run.processes.get())
    job = timed_job()
    tab = open_tab(owner)
    page = tab.goto(hung.get_absolute_url())
    page.wait_for_selector("#stacks-verdict[data-kind='stuck']")
    shoot(page, "dump_all")
    page = tab.goto(timed.get_absolute_url())
    page.wait_for_selector("#timeline[data-ready='1']")
    drag(page, page.locator("#timeline rect.tl-burst").nth(1), -0.1, 1.1)
    page.wait_for_selector("#tl-window[data-ready='1']")
    page.wait_for_timeout(900)
    # The strips, the window's flamegraph and its states; not the top-frame lists below.
    card = page.locator("#timeline-card").bounding_box()
    states = page.locator("#tl-window .grid2").first.bounding_box()
    top = card["y"] + page.evaluate("window.scrollY")  # the clip is on the whole page
    height = states["y"] + states["height"] + 8 - card["y"]
    page.screenshot(path=str(SCREENSHOTS / "capture_timeline.png"), full_page=True,
                    clip={**card, "y": top, "height": height})  # fmt: skip
    page = tab.goto(job.get_absolute_url())
    page.wait_for_selector("#group-timeline[data-ready='1']")
    page.wait_for_timeout(900)
    card = page.locator("#group-timeline-card")
    card.screenshot(path=str(SCREENSHOTS / "group_timeline.png"))
