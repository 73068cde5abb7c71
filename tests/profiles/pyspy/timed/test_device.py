"""The rank's device beside its stacks (profiles/pyspy/timed/device.py): real recorded stacks
(tests/data: the H200 `.item()` sync of gpu_slow_device, the starved job's trainer)
placed in time, against device series the tests describe."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.rules.state_rules import STATES
from profiles.pyspy.thresholds import DEVICE_BUSY_SHARE, DEVICE_STARVED_SHARE
from profiles.pyspy.timed.device import (
    device_buckets,
    device_findings,
    device_window,
    straggler_device,
    with_device,
)
from profiles.pyspy.timed.timed_capture import TimedCapture
from tests.support.speedscope_doc import speedscope

DATA = Path(__file__).resolve().parents[3] / "data"
START, RATE, SECONDS = 1_764_410_000.0, 50, 20


def _stacks(path: Path, thread: str) -> list[tuple[int, list[str]]]:
    """(count, frames below the thread frame) of a raw file's stacks of `thread`."""
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    found = []
    for line in text.decode().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if frames[0].startswith("thread (") and frames[0].endswith(f": {thread}"):
            found.append((int(count), frames[1:]))
    return found


def _states(stacks: list[list[str]]) -> list[str]:
    timed = _timed([("MainThread", stacks)], len(stacks))
    return [STATES[s] for s in timed.sample_states(timed.timed()[0])]


def real_stack(path: Path, thread: str, state: str) -> list[str]:
    """The most sampled stack of `thread` in `state`, as py-spy recorded it."""
    stacks = sorted(_stacks(path, thread), key=lambda cs: -cs[0])
    kinds = _states([frames for _, frames in stacks])
    return next(frames for (_, frames), kind in zip(stacks, kinds, strict=True) if kind == state)


def _timed(threads: list[tuple[str, list[list[str]]]], rounds: int) -> TimedCapture:
    doc = speedscope([(i + 1, name, s) for i, (name, s) in enumerate(threads)], rate=RATE)
    split = split_speedscope(doc, start=START, end=START + rounds / RATE, rate=RATE, idle=True)
    return TimedCapture(split.raw_text, split.track)


STARVED = DATA / "jobs" / "starved" / "rank-0.txt"
SYNC = real_stack(DATA / "gpu" / "gpu_slow_device.txt", "MainThread", "host_sync")
WAIT = real_stack(STARVED, "trainer", "data_wait")
BACKWARD = real_stack(STARVED, "trainer", "compute")


def capture(pattern) -> TimedCapture:
    """The step thread in pattern(t) at each round of SECONDS at RATE."""
    rounds = SECONDS * RATE
    return _timed([("MainThread", [pattern(k / RATE) for k in range(rounds)])], rounds)


def device(util, *, shift: float = 0.13, source: str = "compute-apps", every: float = 0.25):
    """A stored device series (runs/gpu.py's shape): util(t) each `every` seconds, its
    clock `shift` seconds after the stacks' first round."""
    points = [{"t": round(i * every, 3), "util": util(shift + i * every)}
              for i in range(int(SECONDS / every))]  # fmt: skip
    return {"start": START + shift, "interval_ms": int(every * 1000),
            "gpus": [{"index": 0, "uuid": "GPU-0", "points": points}],
            "mapping": {"source": source, "gpus": [0], "note": None}}  # fmt: skip


def half(first, second, period: float = 1.0):
    return lambda t: first if (t % period) < period / 2 else second


def rules(found) -> dict[str, dict]:
    return {f["rule"]: f for f in found}


def test_a_device_idle_while_the_step_waits_for_data_is_starved_and_says_by_what():
    timed = capture(half(WAIT, BACKWARD))
    summary, found = device_findings(timed, device(half(0.0, 95.0)))
    starved = rules(found)["device_starved"]
    assert starved["state"] == "data_wait"
    assert starved["interval"][0] >= DEVICE_STARVED_SHARE
    assert 40 <= starved["value"] <= 60  # half the time idle in data_wait, a little in compute
    assert any("train.py" in f for f in starved["frames"])  # the user frame that held it
    assert "device_bound" not in rules(found)
    assert summary["available"] and 40 <= summary["util_percent"] <= 55
    assert summary["idle_by_state"]["data_wait"] > summary["idle_by_state"].get("compute", 0)


def test_the_same_stacks_beside_a_busy_device_are_not_starved():
    timed = capture(half(WAIT, BACKWARD))
    assert rules(device_findings(timed, device(lambda t: 97.0))[1]) == {}


def test_a_busy_device_the_host_waits_for_in_syncs_is_device_bound():
    timed = capture(lambda t: SYNC if (t % 1.0) < 0.8 else BACKWARD)
    _, found = device_findings(timed, device(lambda t: 98.0))
    bound = rules(found)["device_bound"]
    assert bound["interval"][0] >= DEVICE_BUSY_SHARE
    assert 70 <= bound["sync_percent"] <= 85
    assert "kernels" in bound["advice"] and "not at Python" in bound["advice"]
    assert "device_starved" not in rules(found)


def test_syncs_beside_an_idle_device_are_not_device_bound():
    """The host waits at a sync while the device idles: a peer or something else, not
    the device, sets the pace (with NCCL a slow peer surfaces at the next sync)."""
    timed = capture(lambda t: SYNC if (t % 1.0) < 0.8 else BACKWARD)
    assert "device_bound" not in rules(device_findings(timed, device(lambda t: 30.0))[1])


def test_readings_that_say_n_a_are_left_out_never_read_as_zero():
    timed = capture(half(WAIT, BACKWARD))
    summary, found = device_findings(timed, device(lambda t: None))
    assert found == [] and summary["available"] is False and "util_percent" not in summary


def test_every_gpu_of_an_unmapped_host_is_read_by_no_rule():
    timed = capture(half(WAIT, BACKWARD))
    summary, found = device_findings(timed, device(half(0.0, 95.0), source="host"))
    assert found == [] and summary["available"] is False


def test_the_device_lands_on_the_timelines_buckets_by_its_own_clock():
    step = lambda t: 90.0 if t >= 5.0 else 10.0  # noqa: E731
    got = device_buckets(device(step, shift=0.6), START, 1.0, SECONDS)
    util = got["gpus"][0]["util"]
    assert util[3] == 10 and util[4] == 10 and util[5] == 90 and util[6] == 90
    assert got["source"] == "compute-apps"


def test_a_window_gives_the_devices_mean_utilisation():
    series = device(lambda t: 80.0 if 2.0 <= t < 4.0 else 20.0, shift=0.0)
    assert device_window(series, START + 2.0, START + 4.0)["util"] == pytest.approx(80.0)
    assert device_window(series, START + 10.0, START + 12.0)["util"] == pytest.approx(20.0)


def test_the_stragglers_explanation_says_its_device_is_the_one_that_idles():
    devices = {
        "rank-0": {"available": True, "util_percent": 41.0, "idle_by_state": {"data_wait": 50.0}},
        "rank-1": {"available": True, "util_percent": 91.0, "idle_by_state": {}},
        "rank-2": {"available": True, "util_percent": 93.0, "idle_by_state": {}},
    }
    said = straggler_device("rank-0", devices)
    assert said["says"] == "idles" and "data_wait" in said["explanation"]
    busy = straggler_device(
        "rank-1", {**devices, "rank-0": {**devices["rank-0"], "util_percent": 50}}
    )
    assert busy["says"] == "busy"
    assert (
        straggler_device("rank-2", {k: {**v, "util_percent": 90.0} for k, v in devices.items()})[
            "says"
        ]
        is None
    )


def test_the_job_names_the_ranks_whose_device_starved():
    timed = capture(half(WAIT, BACKWARD))
    summary, found = device_findings(timed, device(half(0.0, 95.0)))
    report = {"straggler": {"name": "rank-0"}, "findings": []}
    out = with_device(report, {"rank-0": (summary, found), "rank-1": (summary, []),
                               "rank-10": (summary, found)})  # fmt: skip
    (job,) = [f for f in out["findings"] if f["rule"] == "device_starved"]
    assert job["ranks"] == ["rank-0", "rank-10"] and "(2 of 3 ranks)" in job["title"]
    assert out["straggler"]["device"]["util_percent"] == summary["util_percent"]


def test_a_whole_job_rank_carries_its_gpus_mean_on_the_jobs_buckets_and_clock():
    from profiles.pyspy.timed.device import rank_strip

    series = device(lambda t: 90.0 if t >= 5.0 else 10.0, shift=0.0)
    series["gpus"].append({**series["gpus"][0], "index": 1})
    # The job's clock reads this host's plus 2 s: bucket 0 starts at the host's START - 2.
    line = {"start": START, "bucket_s": 1.0, "ranks": [{"threads": [{"dominant": [None] * 12}]}]}
    strip = rank_strip(series, line, offset_s=2.0)
    assert strip["gpus"] == [0, 1] and len(strip["util"]) == 12
    assert strip["util"][2] == 10 and strip["util"][7] == 90 and strip["util"][0] is None
