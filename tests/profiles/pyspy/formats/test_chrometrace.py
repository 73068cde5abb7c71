"""py-spy's chrometrace read as samples with times (profiles.pyspy.formats.chrometrace), and a
time track that places its rounds there (timetrack `times`). The files are written here
the way py-spy's src/chrometrace.rs writes them: per sample, `E` for each frame that
left the thread's stack and `B` for each that came, nothing when it did not change,
and at the write every thread's last stack closed."""

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiles.pyspy.errors import ProfileError
from profiles.pyspy.formats.chrometrace import chrometrace_samples, is_chrometrace
from profiles.pyspy.formats.split import split_speedscope
from profiles.pyspy.formats.time_track import load_track, track_json
from profiles.pyspy.timed.timed_capture import TimedCapture
from profiles.pyspy.timed.timeline import timeline
from tests.support.requirements import require

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))

MAIN = ("thread (11): MainThread", "")
MAIN_PTHREAD = 1400
WORK = [MAIN, ("<module>", "/job/train.py", 9), ("train", "/job/train.py", 20)]
EVAL = [MAIN, ("<module>", "/job/train.py", 9), ("evaluate", "/job/train.py", 40)]
WAIT = [*WORK, ("wait", "/usr/lib/python3.11/threading.py", 320)]


def _event(frame: tuple, ph: str, ts: int, tid: int = MAIN_PTHREAD) -> dict:
    name, file, *line = frame
    return {"args": {"filename": file, "line": line[0] if line else 0}, "cat": "py-spy",
            "name": name, "ph": ph, "pid": 10, "tid": tid, "ts": ts}  # fmt: skip


def chrometrace(samples: list[tuple[int, list]], write_us: int) -> bytes:
    """(ts µs, stack root first) per round of one thread, as py-spy writes them."""
    events, previous = [], []
    for ts, stack in samples:
        same = 0
        while same < min(len(previous), len(stack)) and previous[same] == stack[same]:
            same += 1
        events += [_event(f, "E", ts) for f in reversed(previous[same:])]
        events += [_event(f, "B", ts) for f in stack[same:]]
        previous = stack
    events += [_event(f, "E", write_us) for f in previous]
    return json.dumps(events).encode()


def _job() -> tuple[bytes, list[int]]:
    """20 ms rounds: work that changes line every round, a 1 s wait whose stack never
    changes (its rounds are not in the file), then an evaluation."""
    rounds, times = [], []
    for k in range(150):
        ts = 500_000 + 20_000 * k
        if k < 50:
            stack = [*WORK[:-1], ("train", "/job/train.py", 20 + k % 2)]
        elif k < 100:
            stack = WAIT
        else:
            stack = [*EVAL[:-1], ("evaluate", "/job/train.py", 40 + k % 2)]
        rounds.append((ts, stack))
        times.append(ts)
    return chrometrace(rounds, write_us=times[-1] + 20_000), times


def test_a_speedscope_record_is_not_taken_for_a_chrometrace():
    assert is_chrometrace(b' [{"ph": "B"}]') and not is_chrometrace(b'{"profiles": []}')


def test_the_rounds_no_stack_changed_in_are_counted_from_py_spys_total():
    data, truth = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    assert samples.shown == 101  # the wait shows once, when it began
    assert len(samples.times) == 150
    # Every round shown is where py-spy took it; the hidden ones fill the wait evenly.
    assert samples.times[:51] == [t / 1e6 for t in truth[:51]]
    assert samples.times[100:] == [t / 1e6 for t in truth[100:]]
    assert max(abs(a - b / 1e6) for a, b in zip(samples.times, truth, strict=True)) < 0.001
    doc = json.loads(samples.speedscope)
    (profile,) = doc["profiles"]
    assert profile["name"] == 'Thread 11 "MainThread"' and len(profile["samples"]) == 150


def test_without_py_spys_count_the_hidden_rounds_come_from_the_rate():
    data, _ = _job()
    assert len(chrometrace_samples(data, rate=50).times) == 150


def test_its_track_places_the_evaluation_where_py_spy_took_it():
    data, truth = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0 + first, end=1000.0 + samples.end_s, rate=50,
        idle=True, times=[t - first for t in samples.times],
    )  # fmt: skip
    track = load_track(track_json(split.track))
    assert track.times is not None and track.rounds == 150
    # The wait (rounds 50-99) lies in [1, 2) s, the evaluation from 2 s on.
    assert track.round_at(1.0) == 50 and track.round_at(2.0) == 100
    assert track.at(100) == pytest.approx(2.0)
    line = timeline(TimedCapture(split.raw_text, track), 1.0)
    (main,) = line["threads"]
    assert len(main["dominant"]) == 3 and None not in main["dominant"]
    assert split.raw_text.count("wait (/usr/lib/python3.11/threading.py:320) 50") == 1


def test_a_whole_job_window_cuts_at_py_spys_times():
    data, _ = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0, end=1000.0 + samples.end_s - first, rate=50,
        idle=True, times=[t - first for t in samples.times], window_from=1002.0,
    )  # fmt: skip
    assert split.track.rounds == 50 and split.track.start == pytest.approx(1002.0)
    assert split.track.times[0] == 0 and split.track.at(49) == pytest.approx(0.98)


def test_a_thread_first_seen_after_the_first_round_is_cut_where_its_rounds_lie():
    """A thread that starts mid-capture holds the last rounds: the window's cut takes
    only its rounds before the instant, and every round keeps its time (it once stayed
    whole, came out longer than the cut main thread, and the track lost its times)."""
    data, _ = _job()
    helper = [("thread (12): helper", ""), ("run", "/job/helper.py", 5)]
    events = json.loads(data)
    for k in range(75, 150):  # from round 75 (2.0 s) on, its line changes each round
        ts = 500_000 + 20_000 * k
        if k > 75:
            events.append(_event((*helper[1][:2], 5 + (k - 1) % 2), "E", ts, tid=1401))
        events.append(_event((*helper[1][:2], 5 + k % 2), "B", ts, tid=1401) if k > 75 else
                      _event(helper[0], "B", ts, tid=1401))  # fmt: skip
        if k == 75:
            events.append(_event((*helper[1][:2], 5), "B", ts, tid=1401))
    events.sort(key=lambda e: e["ts"])
    samples = chrometrace_samples(json.dumps(events), rate=50, samples_reported=225)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0, end=1000.0 + samples.end_s - first, rate=50,
        idle=True, times=[t - first for t in samples.times], window_from=1002.0,
    )  # fmt: skip
    track = split.track
    assert track.rounds == 50 and track.times is not None and len(track.times) == 50
    by_name = {t.name: t.samples for t in track.threads}
    assert by_name == {"MainThread": 50, "helper": 50}  # the rounds from 2.0 s on, each


@pytest.mark.parametrize(
    "data",
    [b"[1, 2]", b'[{"ph": "X", "ts": 1, "pid": 1, "tid": 1, "name": "a"}]', b"[", b"{}"],
)
def test_input_that_is_not_py_spys_chrometrace_is_a_clear_error(data):
    with pytest.raises(ProfileError):
        chrometrace_samples(data, rate=50)


def test_a_track_whose_times_do_not_fit_its_rounds_is_refused():
    data, _ = _job()
    samples = chrometrace_samples(data, rate=50, samples_reported=150)
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1.0, end=1.0 + samples.end_s, rate=50, idle=True,
        times=[t - first for t in samples.times],
    )  # fmt: skip
    doc = json.loads(track_json(split.track))
    doc["times"] = ",".join(doc["times"].split(",")[:-1])
    with pytest.raises(ProfileError, match="one time per round"):
        load_track(json.dumps(doc))
    doc["times"] = "5" + ",1" * 149
    with pytest.raises(ProfileError, match="the first 0"):
        load_track(json.dumps(doc))


def test_rounds_no_stack_changed_in_end_where_py_spy_was_told_to_stop_not_at_its_write():
    """A loaded host writes seconds after the stop: no round is placed in between."""
    data, truth = _job()
    late = json.loads(data)
    for event in late[-len(EVAL) :]:
        event["ts"] += 8_000_000
    stop_s = (truth[-1] + 20_000) / 1e6
    samples = chrometrace_samples(json.dumps(late), rate=50, stopped_s=stop_s)
    assert samples.end_s == pytest.approx(stop_s) and samples.times[-1] < stop_s
    assert len(samples.times) == 150


# --subprocesses (py-spy 0.4.3, measured on a forked child and on torch DataLoader
# workers): py-spy keys a thread's previous stack by its pthread handle alone, which a
# forked child's threads share with its parent's; each event carries the pid of the
# sample being written, and the process chain (`process PARENT`, `process CHILD`) and
# `thread (TID)` frames are at the root of every stack.
PARENT, CHILD = 10, 20
RANK = (f'process {PARENT}:"python train.py"', "")
WORKER = (f'process {CHILD}:"python train.py"', "")
LOOP = ("_worker_loop", "/torch/utils/data/_utils/worker.py", 300)


def _rank_main(k: int) -> list:
    """The rank's main thread: waiting for a batch, the same stack every round."""
    return [RANK, ("thread (10): MainThread", ""), ("<module>", "/job/train.py", 9),
            ("_next_data", "/torch/utils/data/dataloader.py", 1300)]  # fmt: skip


def _worker_main(k: int) -> list:
    """The worker's main thread: tokenizing, on a line that changes every round."""
    return [RANK, WORKER, ("thread (20): MainThread", ""), LOOP,
            ("tokenize", "/job/data.py", 30 + k % 2)]  # fmt: skip


def pyspy_chrometrace(rounds: list[tuple[int, list]], write_us: int) -> bytes:
    """What py-spy 0.4.3's src/chrometrace.rs writes for `rounds` of (ts µs, [(pid,
    handle, stack root first), ...] in the order py-spy takes them): per sample, `E`
    for each frame past the part in common with the previous sample under the same
    handle (whatever its process) and `B` for each new one, each sample 1 µs after the
    one before; at the write, `E` for the last stack under every handle."""
    events, previous = [], {}
    for ts, samples in rounds:
        for n, (pid, handle, stack) in enumerate(samples):
            before = previous.get(handle, [])
            same = 0
            while same < min(len(before), len(stack)) and before[same] == stack[same]:
                same += 1
            at = ts + n
            events += [_event(f, "E", at, handle) | {"pid": pid} for f in reversed(before[same:])]
            events += [_event(f, "B", at, handle) | {"pid": pid} for f in stack[same:]]
            previous[handle] = stack
    for handle, stack in previous.items():
        events += [_event(f, "E", write_us, handle) for f in reversed(stack)]
    return json.dumps(events).encode()


def _profiles(samples) -> dict[str, list[list[str]]]:  # noqa: ANN001
    """Each thread's samples as frame names, root first, by its speedscope name."""
    doc = json.loads(samples.speedscope)
    names = [f["name"] for f in doc["shared"]["frames"]]
    return {p["name"]: [[names[i] for i in s] for s in p["samples"]] for p in doc["profiles"]}


def _forked_job(child_rounds: range, rounds: int = 150) -> tuple[bytes, int]:
    """A rank whose main thread never changes stack, and a worker forked from it
    (sampled from its first round to its last): 20 ms rounds. Returns the file and
    py-spy's `Samples: N`."""
    taken, count = [], 0
    for k in range(rounds):
        samples = [(PARENT, MAIN_PTHREAD, _rank_main(k))]
        if k in child_rounds:
            samples.append((CHILD, MAIN_PTHREAD, _worker_main(k)))
        taken.append((500_000 + 20_000 * k, samples))
        count += len(samples)
    return pyspy_chrometrace(taken, write_us=500_000 + 20_000 * rounds), count


def test_a_forked_worker_py_spy_stopped_seeing_ends_there_not_at_the_end():
    """The worker's MainThread has the rank's handle: py-spy writes both in every round
    (each differs from the other's sample before it), and once the worker is gone the
    rank's next sample is written again under the handle. The worker's samples are the
    50 rounds it lived, each of its own stack; the rank keeps every round."""
    data, reported = _forked_job(range(20, 70))
    samples = chrometrace_samples(data, rate=50, samples_reported=reported)
    by_name = _profiles(samples)
    worker = by_name[f'Process {CHILD} Thread 20 "MainThread"']
    rank = by_name[f'Process {PARENT} Thread 10 "MainThread"']
    assert len(worker) == 50 and len(rank) == 150
    assert len(worker) + len(rank) == reported  # py-spy's own count, to the sample
    # Each sample is one thread's stack: the other's frames, closed under the other's
    # pid, are not left on it (they once were, and stacks grew every round).
    assert {tuple(s[:3]) for s in worker} == {(RANK[0], WORKER[0], "thread (20): MainThread")}
    assert {len(s) for s in worker} == {5} and {len(s) for s in rank} == {4}
    # Every round the worker lived was written (none hidden there), at py-spy's times.
    truth = [(500_000 + 20_000 * k) / 1e6 for k in range(150)]
    assert samples.times == pytest.approx(truth, abs=2e-6)


def test_a_forked_worker_that_lived_to_the_end_keeps_every_round_it_was_sampled_in():
    data, reported = _forked_job(range(20, 150))
    by_name = _profiles(chrometrace_samples(data, rate=50, samples_reported=reported))
    assert len(by_name[f'Process {CHILD} Thread 20 "MainThread"']) == 130
    assert len(by_name[f'Process {PARENT} Thread 10 "MainThread"']) == 150


def test_a_process_whose_main_thread_ended_ends_with_its_other_threads():
    """The worker's helper thread has a handle of its own, never written again: it ends
    with the worker, whose MainThread py-spy stopped seeing."""
    helper = [RANK, WORKER, ("thread (21): QueueFeederThread", ""),
              ("_feed", "/usr/lib/python3.11/multiprocessing/queues.py", 230)]  # fmt: skip
    taken, reported = [], 0
    for k in range(150):
        samples = [(PARENT, MAIN_PTHREAD, _rank_main(k))]
        if 20 <= k < 70:
            samples += [(CHILD, MAIN_PTHREAD, _worker_main(k)), (CHILD, 1402, helper)]
        taken.append((500_000 + 20_000 * k, samples))
        reported += len(samples)
    samples = chrometrace_samples(pyspy_chrometrace(taken, 3_600_000), rate=50,
                                  samples_reported=reported)  # fmt: skip
    by_name = _profiles(samples)
    assert len(by_name[f'Process {CHILD} Thread 21 "QueueFeederThread"']) == 50
    assert len(by_name[f'Process {CHILD} Thread 20 "MainThread"']) == 50
    assert sum(map(len, by_name.values())) == reported


def test_a_thread_whose_handle_a_new_thread_got_ended_by_the_new_ones_first_round():
    """One process: a helper's stack never changes, so when it ended is not written;
    py-spy writes the next thread given its handle, which says it was gone by then."""
    old = [("thread (12): loader", ""), ("wait", "/usr/lib/python3.11/threading.py", 320)]
    new = [("thread (13): loader", ""), ("wait", "/usr/lib/python3.11/threading.py", 320)]
    taken, reported = [], 0
    for k in range(150):
        line = ("train", "/job/train.py", 20 + k % 2)
        samples = [(PARENT, MAIN_PTHREAD, [*WORK[:-1], line])]
        if k < 50:
            samples.append((PARENT, 1401, old))
        if k >= 80:
            samples.append((PARENT, 1401, new))
        taken.append((500_000 + 20_000 * k, samples))
        reported += len(samples)
    by_name = _profiles(chrometrace_samples(pyspy_chrometrace(taken, 3_600_000), rate=50,
                                            samples_reported=reported))  # fmt: skip
    # It ended by round 80: at most the 30 rounds between are counted as its.
    assert len(by_name['Thread 12 "loader"']) == 80
    assert len(by_name['Thread 13 "loader"']) == 70
    assert len(by_name['Thread 11 "MainThread"']) == 150


@pytest.mark.parametrize("late_us", [1_500, 4_000, 30_000])
def test_a_round_py_spy_was_held_up_amid_is_still_one_round(late_us):
    """py-spy stamps a sample when it writes it: on a loaded host it can stop amid a
    round for milliseconds (here before the worker's samples of every 10th round), and
    the next round can follow at once. Each round is still one round."""
    taken, reported = [], 0
    for k in range(150):
        ts = 500_000 + 40_000 * k
        rank = (PARENT, MAIN_PTHREAD, _rank_main(k))
        worker = (CHILD, MAIN_PTHREAD, _worker_main(k))
        if k % 10 == 5:
            taken += [(ts, [rank]), (ts + late_us, [worker])]
        else:
            taken.append((ts, [rank, worker]))
        reported += 2
    samples = chrometrace_samples(pyspy_chrometrace(taken, 6_600_000), rate=25,
                                  samples_reported=reported)  # fmt: skip
    assert len(samples.times) == 150
    assert {len(s) for s in _profiles(samples).values()} == {150}


def test_a_window_keeps_each_threads_rounds_from_its_start_on():
    """A whole-job window (py-spy started early): a worker that ended before the window
    keeps none of its samples, one sampled across it those from it on."""
    taken, reported = [], 0
    gone = [RANK, (f'process {CHILD + 1}:"python train.py"', ""),
            ("thread (21): MainThread", ""), LOOP]  # fmt: skip
    for k in range(150):
        samples = [(PARENT, MAIN_PTHREAD, _rank_main(k))]
        if 60 <= k < 120:
            samples.append((CHILD, MAIN_PTHREAD, _worker_main(k)))
        if k < 40:
            samples.append((CHILD + 1, MAIN_PTHREAD, gone))
        taken.append((500_000 + 20_000 * k, samples))
        reported += len(samples)
    samples = chrometrace_samples(pyspy_chrometrace(taken, 3_500_000), rate=50,
                                  samples_reported=reported, window_s=2.0)  # fmt: skip
    assert samples.times[0] == pytest.approx(2.0) and len(samples.times) == 75
    by_name = _profiles(samples)
    assert set(by_name) == {f'Process {PARENT} Thread 10 "MainThread"',
                            f'Process {CHILD} Thread 20 "MainThread"'}  # fmt: skip
    assert len(by_name[f'Process {CHILD} Thread 20 "MainThread"']) == 45  # rounds 75-119
    assert len(by_name[f'Process {PARENT} Thread 10 "MainThread"']) == 75


FORKS = textwrap.dedent("""
    import os, time

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    def child_work():
        spin(1.0)

    def waiting(pid):
        os.waitpid(pid, 0)

    def after():
        spin(1.5)

    spin(0.3)
    pid = os.fork()
    if pid == 0:
        child_work()
        os._exit(0)
    waiting(pid)
    after()
""")


def test_py_spys_own_chrometrace_of_a_forked_child_ends_it_when_it_exited(tmp_path):
    """Real py-spy (`--subprocesses --idle --threads`, 100 Hz) on a process whose child
    works 1 s and exits: the parent leaves `waiting` for `after` the moment it has. The
    child's samples end within 0.1 s before that, on py-spy's own clock (read as before,
    its last stack lasted the 1.5 s to the end), and every sample of both adds up to
    py-spy's own count."""
    require(PY_SPY, "py-spy", "make setup")
    (tmp_path / "forks.py").write_text(FORKS)
    out = tmp_path / "forks.json"
    done = subprocess.run(
        [PY_SPY, "record", "--format", "chrometrace", "--subprocesses", "--idle",
         "--threads", "--rate", "100", "--duration", "10", "--output", str(out), "--",
         sys.executable, str(tmp_path / "forks.py")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    wrote = re.search(r"Samples: (\d+)", done.stdout + done.stderr)
    assert done.returncode == 0 and wrote, (done.returncode, done.stdout, done.stderr)
    samples = chrometrace_samples(out.read_bytes(), rate=100, samples_reported=int(wrote[1]))
    by_name = _profiles(samples)
    (parent,) = [n for n, stacks in by_name.items() if any("after" in s for s in stacks)]
    (child,) = [n for n, stacks in by_name.items() if any("child_work" in s for s in stacks)]
    at = samples.firsts[parent] + next(i for i, s in enumerate(by_name[parent]) if "after" in s)
    child_last = samples.firsts[child] + len(by_name[child]) - 1
    gone = samples.times[at] - samples.times[child_last]
    assert 0 <= gone <= 0.1, (gone, len(by_name[child]))
    assert sum("child_work" in s for s in by_name[child]) >= 0.9 * len(by_name[child])
    reported = int(wrote[1])
    assert abs(sum(map(len, by_name.values())) - reported) <= max(2, reported // 100)


@pytest.mark.parametrize("write_us", [3_500_000, 4_500_000])
def test_a_worker_forked_in_the_last_round_ends_nothing(write_us):
    """The rank's stack has not changed for a while when a worker is first written
    under its handle, in py-spy's last round: nothing says the rank was gone (it was
    sampled before the worker, its stack unchanged), so it keeps every round, as do its
    other threads, however late py-spy wrote the file; it once ended there, with its
    whole process, and the track lost its times."""
    helper = [RANK, ("thread (12): helper", ""), ("wait", "/usr/lib/python3.11/threading.py", 320)]
    taken, reported = [], 0
    for k in range(150):
        samples = [(PARENT, MAIN_PTHREAD, _rank_main(k)), (PARENT, 1401, helper)]
        if k == 149:
            samples.append((CHILD, MAIN_PTHREAD, _worker_main(k)))
        taken.append((500_000 + 20_000 * k, samples))
        reported += len(samples)
    samples = chrometrace_samples(pyspy_chrometrace(taken, write_us), rate=50,
                                  samples_reported=reported)  # fmt: skip
    by_name = _profiles(samples)
    rounds = len(samples.times)
    assert len(by_name[f'Process {PARENT} Thread 10 "MainThread"']) == rounds
    assert len(by_name[f'Process {PARENT} Thread 12 "helper"']) == rounds
    if write_us == 3_500_000:  # written as it stopped: every round where py-spy took it
        assert rounds == 150 and len(by_name[f'Process {CHILD} Thread 20 "MainThread"']) == 1


def test_the_rounds_before_py_spy_first_sampled_the_rank_are_cut():
    """py-spy attaches to each process on its own: its first round held only a worker
    (once, on the real job of tests/profiles/jobs/test_workers_torch.py). The rank's
    threads hold every round kept, so its timeline keeps py-spy's times (it lost them)."""
    taken, reported = [], 0
    for k in range(150):
        samples = [(CHILD, MAIN_PTHREAD, _worker_main(k))]
        if k:
            samples.insert(0, (PARENT, MAIN_PTHREAD, _rank_main(k)))
        taken.append((500_000 + 20_000 * k, samples))
        reported += len(samples)
    samples = chrometrace_samples(pyspy_chrometrace(taken, 3_500_000), rate=50,
                                  samples_reported=reported)  # fmt: skip
    assert samples.times[0] == pytest.approx(0.52) and len(samples.times) == 149
    by_name = _profiles(samples)
    assert {len(s) for s in by_name.values()} == {149}
    first = samples.times[0]
    split = split_speedscope(
        samples.speedscope, start=1000.0 + first, end=1000.0 + samples.end_s, rate=50,
        idle=True, times=[t - first for t in samples.times],
    )  # fmt: skip
    assert split.track.times is not None
    assert {t.name for t in split.track.timed()} == {"MainThread"} and len(split.track.timed()) == 2
