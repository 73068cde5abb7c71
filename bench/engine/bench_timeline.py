"""Time features at scale: a 10-minute, 100 Hz, 8-thread capture (issue 39's figure).

Builds a synthetic py-spy `--format speedscope --idle --threads --native` capture of a
training job: a step thread (DataLoader wait, 24 layers of forward with varied torch ops
and native tails, autograd backward, a DDP all-reduce wait, an AdamW step, `.item()`;
every 60 steps a 1 s evaluation), two loader threads, three collective/worker threads
that mostly wait, a logger and an async checkpoint thread; the running op changes every
few samples. Then prints, best of --runs:
- split: speedscope -> raw text + time track (the worker's cost, once per capture);
- the stored sizes: raw text and track, plain and gzip, and the track's gzip against the
  raw text's (target: at most 2x);
- timeline server time: read the stored gzip'd track (with the states the analysis
  stored per record; no raw text), bucket every thread (target < 300 ms);
- a window's flamegraph from what is stored: read raw text and track, window, parse,
  flamegraph tree (target < 300 ms), and with the full `analyze` (states, findings, top
  frames) beside it;
- periodic stalls (once per capture, in the pipeline);
- peak memory (RSS) of a fresh process doing the server path, and of this one.

Run: `.venv/bin/python bench/engine/bench_timeline.py [--minutes 10] [--rate 100] [--runs 3]`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from profiles.pyspy import AnalysisOptions, analyze, parse_profile_text  # noqa: E402
from profiles.pyspy.formats.split import split_speedscope  # noqa: E402
from profiles.pyspy.formats.time_track import load_track, track_json  # noqa: E402
from profiles.pyspy.timed.design_effects import design_effects  # noqa: E402
from profiles.pyspy.timed.periodic_stalls import periodic_stalls  # noqa: E402
from profiles.pyspy.timed.timed_capture import TimedCapture, with_states  # noqa: E402
from profiles.pyspy.timed.timeline import timeline  # noqa: E402
from profiles.pyspy.timed.window import window_flamegraph, window_text  # noqa: E402

MODULE = "torch/nn/modules/module.py"
OPS = [
    "linear",
    "layer_norm",
    "gelu",
    "softmax",
    "matmul",
    "dropout",
    "scaled_dot_product_attention",
]
DISPATCH = [
    "at::_ops::{op}::call (libtorch_cpu.so)",
    "c10::Dispatcher::call (libtorch_cpu.so)",
    "torch::autograd::VariableType::(anonymous namespace)::{op} (libtorch_cpu.so)",
    "at::_ops::{op}::redispatch (libtorch_cpu.so)",
    "at::(anonymous namespace)::wrapper_CUDA_{op} (libtorch_cuda.so)",
]
NATIVE_TAILS = [
    [
        *DISPATCH,
        "at::native::{op}_out_cuda (libtorch_cuda.so)",
        "at::cuda::blas::gemm (libtorch_cuda.so)",
        "cublasLtMatmul (libcublasLt.so.12)",
        "0x7f3a{n:04x} (libcublasLt.so.12)",
        "cuLaunchKernel (libcuda.so.1)",
    ],
    [
        *DISPATCH,
        "at::native::{op}_kernel_cuda (libtorch_cuda.so)",
        "cudaLaunchKernel (libcudart.so.12)",
        "0x7f3a{n:04x} (libcudart.so.12)",
        "cuLaunchKernel (libcuda.so.1)",
    ],
    [
        *DISPATCH,
        "at::native::empty_cuda (libtorch_cuda.so)",
        "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc (libc10_cuda.so)",
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc (libc10_cuda.so)",
    ],
    [*DISPATCH[:2], "0x7f3a{n:04x} (libtorch_cuda.so)"],
]
ROOT_FRAMES = ["<module> (train.py:212)", "main (train.py:190)", "train (train.py:160)"]


def _call(name: str, line: int) -> list[str]:
    return [f"_wrapped_call_impl ({MODULE}:1736)", f"_call_impl ({MODULE}:1747)", f"{name}:{line})"]


def step_stacks(rng: random.Random) -> dict[str, list[list[str]]]:
    """The step thread's stacks by phase; each a list of distinct stacks."""
    step = [*ROOT_FRAMES, "train_step (train.py:120)"]
    forward = []
    for layer in range(24):
        block = [
            *step,
            *_call("forward (model.py", 88),
            *_call("forward (model.py", 40 + layer % 3),
        ]
        for sub, line in (("attention", 61), ("mlp", 75), ("norm", 30)):
            for op in OPS:
                for tail in NATIVE_TAILS:
                    native = [f.format(op=op, n=rng.randrange(1 << 16)) for f in tail]
                    frame = f"{op} (torch/nn/functional.py:{2000 + len(op) * 7})"
                    forward.append([*block, *_call(f"{sub} (model.py", line), frame, *native])
    engine = "torch::autograd::Engine::{f} (libtorch_cpu.so)"
    backward = [
        [
            *step,
            "backward (torch/_tensor.py:626)",
            "backward (torch/autograd/__init__.py:347)",
            "_engine_run_backward (torch/autograd/graph.py:823)",
            engine.format(f="execute"),
            engine.format(f="thread_main"),
            f"torch::autograd::generated::{op.title()}Backward0::apply (libtorch_cpu.so)",
            *[f.format(op=op, n=rng.randrange(1 << 16)) for f in tail],
        ]
        for op in OPS
        for tail in NATIVE_TAILS
    ]
    optimizer = [
        [
            *step,
            "wrapper (torch/optim/optimizer.py:487)",
            "step (torch/optim/adamw.py:220)",
            f"_multi_tensor_adamw (torch/optim/adamw.py:{600 + i})",
            "at::_ops::_foreach_mul_::call (libtorch_cpu.so)",
            f"0x7f3a{rng.randrange(1 << 16):04x} (libtorch_cuda.so)",
        ]
        for i in range(40)
    ]
    data = [
        [
            *ROOT_FRAMES,
            "__next__ (torch/utils/data/dataloader.py:701)",
            "_next_data (torch/utils/data/dataloader.py:1448)",
            "_get_data (torch/utils/data/dataloader.py:1402)",
            "get (queue.py:180)",
            "wait (threading.py:359)",
            "pthread_cond_timedwait (libc.so.6)",
        ]
    ]
    allreduce = [
        [
            *step,
            "backward (torch/_tensor.py:626)",
            "_engine_run_backward (torch/autograd/graph.py:823)",
            engine.format(f="execute"),
            "c10d::Reducer::finalize_backward (libtorch_cpu.so)",
            "c10d::Work::wait (libtorch_cpu.so)",
            "std::condition_variable::wait (libstdc++.so.6)",
            "pthread_cond_wait (libc.so.6)",
            f"0x7f3a{rng.randrange(1 << 16):04x} (libc.so.6)",
        ]
        for _ in range(4)
    ]
    item = [
        [
            *step,
            "item (train.py:131)",
            "at::_ops::_local_scalar_dense::call (libtorch_cpu.so)",
            "cudaStreamSynchronize (libcudart.so.12)",
            "0x7f3a0011 (libcuda.so.1)",
        ]
    ]
    evaluate = [
        [*ROOT_FRAMES, "evaluate (train.py:71)", *s[len(step) :]] for s in rng.sample(forward, 300)
    ]
    return {
        "forward": forward,
        "backward": backward,
        "optimizer": optimizer,
        "data": data,
        "item": item,
        "allreduce": allreduce,
        "evaluate": evaluate,
    }


WAITS = {
    "pin_memory": [
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:59)",
            "get (queue.py:180)",
            "wait (threading.py:359)",
            "pthread_cond_timedwait (libc.so.6)",
        ],
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_pin_memory_loop (torch/utils/data/_utils/pin_memory.py:62)",
            "pin_memory (torch/utils/data/_utils/pin_memory.py:78)",
            "cudaHostAlloc (libcudart.so.12)",
        ],
    ],
    "QueueFeederThread": [
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_feed (multiprocessing/queues.py:231)",
            "wait (threading.py:355)",
            "pthread_cond_wait (libc.so.6)",
        ],
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_feed (multiprocessing/queues.py:250)",
            "dumps (multiprocessing/reduction.py:51)",
        ],
    ],
    "gloo-0": [
        [
            "c10d::ProcessGroupGloo::runLoop (libtorch_cpu.so)",
            "std::condition_variable::wait (libstdc++.so.6)",
            "pthread_cond_wait (libc.so.6)",
            "0x7f3a1234 (libc.so.6)",
        ]
    ],
    "gloo-1": [
        [
            "c10d::ProcessGroupGloo::runLoop (libtorch_cpu.so)",
            "std::condition_variable::wait (libstdc++.so.6)",
            "pthread_cond_wait (libc.so.6)",
            "0x7f3a1234 (libc.so.6)",
        ]
    ],
    "autograd-0": [
        [
            "torch::autograd::Engine::thread_init (libtorch_cpu.so)",
            "torch::autograd::ReadyQueue::pop (libtorch_cpu.so)",
            "pthread_cond_wait (libc.so.6)",
        ]
    ],
    "logger": [
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_run (logger.py:40)",
            "get (queue.py:171)",
            "wait (threading.py:355)",
            "pthread_cond_wait (libc.so.6)",
        ],
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_run (logger.py:44)",
            "write (logger.py:60)",
            "write (libc.so.6)",
        ],
    ],
    "checkpoint": [
        [
            "_bootstrap (threading.py:1002)",
            "run (threading.py:982)",
            "_save_loop (checkpoint.py:22)",
            "wait (threading.py:629)",
            "pthread_cond_wait (libc.so.6)",
        ],
    ],
}
STEP_PLAN = [
    ("data", 0.05),
    ("forward", 0.35),
    ("backward", 0.38),
    ("allreduce", 0.07),
    ("optimizer", 0.13),
    ("item", 0.02),
]
STEP_S = 0.3
EVAL_EVERY = 60


def step_samples(rounds: int, rate: int, rng: random.Random) -> list[list[str]]:
    """The step thread's samples: the op in progress changes every 2-8 samples."""
    stacks = step_stacks(rng)
    out: list[list[str]] = []
    step, current, current_phase, left, eval_left = 0, [], "", 0, 0
    while len(out) < rounds:
        t = len(out) / rate
        if eval_left:
            eval_left -= 1
            phase = "evaluate"
        else:
            phase = _phase(t)
            if int(t / STEP_S) != step:
                step = int(t / STEP_S)
                if step % EVAL_EVERY == 0:
                    eval_left, phase = rate - 1, "evaluate"  # one second of evaluation
        if not left or phase != current_phase:
            current, current_phase, left = rng.choice(stacks[phase]), phase, rng.randrange(2, 8)
        out.append(current)
        left -= 1
    return out


def _phase(t: float) -> str:
    at, offset = t % STEP_S / STEP_S, 0.0
    for name, share in STEP_PLAN:
        offset += share
        if at < offset:
            return name
    return STEP_PLAN[-1][0]


def synthetic(minutes: float, rate: int, seed: int = 1) -> bytes:
    """The capture as py-spy writes it (speedscope JSON, samples root first)."""
    rng = random.Random(seed)
    rounds = int(minutes * 60 * rate)
    frames: dict[str, int] = {}
    threads = [("MainThread", step_samples(rounds, rate, rng))]
    for name, stacks in WAITS.items():
        samples, current = [], stacks[0]
        for _ in range(rounds):
            if rng.random() < 0.02:
                current = rng.choice(stacks)
            samples.append(current)
        threads.append((name, samples))
    profiles = []
    for tid, (name, samples) in enumerate(threads, 4000):
        head = [f"thread ({tid}): {name}"]
        rendered: dict[int, str] = {}
        parts = []
        for stack in samples:
            text = rendered.get(id(stack))
            if text is None:
                ids = [frames.setdefault(f, len(frames)) for f in head + stack]
                text = rendered[id(stack)] = "[" + ",".join(map(str, ids)) + "]"
            parts.append(text)
        profiles.append(
            f'{{"type":"sampled","name":"Thread {tid} \\"{name}\\"","unit":"seconds",'
            f'"startValue":0.0,"endValue":{rounds / rate},"samples":[{",".join(parts)}],'
            f'"weights":[{",".join([str(1 / rate)] * rounds)}]}}'
        )
    shared = json.dumps({"frames": [_frame(f) for f in frames]})
    doc = f'{{"$schema":"https://www.speedscope.app/file-format-schema.json","profiles":[{",".join(profiles)}],"shared":{shared}}}'
    return doc.encode()


def _frame(text: str) -> dict:
    name, _, rest = text.rpartition(" (")
    file, _, line = rest[:-1].rpartition(":")
    if file and line.isdigit():
        return {"name": name, "file": file, "line": int(line), "col": None}
    return {"name": name, "file": rest[:-1], "line": 0, "col": None}


def best(runs: int, fn):
    took, value = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        value = fn()
        took = min(took, time.perf_counter() - start)
    return took, value


def server_timeline(track_gz: bytes) -> dict:
    """The API's `timeline/`: the track alone, with the states the analysis stored."""
    return timeline(TimedCapture(None, load_track(track_gz)))


def server_window(raw_gz: bytes, track_gz: bytes, begin: float, end: float) -> dict:
    """The API's `flamegraph/?from=&to=` from what is stored: read, cut, parse, tree."""
    capture = TimedCapture(gzip.decompress(raw_gz).decode(), load_track(track_gz))
    return window_flamegraph(capture, begin, end)


def window_stats(raw_gz: bytes, track_gz: bytes, begin: float, end: float) -> dict:
    """The window's full statistics (states, findings, top frames, flamegraph)."""
    capture = TimedCapture(gzip.decompress(raw_gz).decode(), load_track(track_gz))
    return analyze(parse_profile_text(window_text(capture, begin, end)), AnalysisOptions())


CHILD = """
import gzip, resource, sys
sys.path.insert(0, {root!r})
from profiles.pyspy.timed.timed_capture import TimedCapture
from profiles.pyspy.timed.timeline import timeline
from profiles.pyspy.formats.time_track import load_track
from profiles.pyspy.timed.window import window_flamegraph
raw = gzip.decompress(open({raw!r}, "rb").read()).decode()
capture = TimedCapture(raw, load_track(open({track!r}, "rb").read()))
timeline(capture)
window_flamegraph(capture, {begin}, {begin} + 60)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    data = synthetic(args.minutes, args.rate)
    print(
        f"capture: {args.minutes:g} min at {args.rate} Hz, 8 threads; speedscope "
        f"{len(data) / 1e6:.1f} MB, built in {time.perf_counter() - start:.1f} s"
    )
    clock = {"start": 1_790_000_000.0, "end": 1_790_000_000.0 + args.minutes * 60}
    took, split = best(1, lambda: split_speedscope(data, **clock, rate=args.rate, idle=True))
    print(f"split (speedscope -> raw text + track): {took:.2f} s")
    raw_gz = gzip.compress(split.raw_text.encode(), 6)
    took, track = best(1, lambda: with_states(split.track, split.raw_text))
    print(f"states per record, stored in the track (analysis time): {took * 1000:.0f} ms")
    track_text = track_json(track)
    track_gz = gzip.compress(track_text.encode(), 6)
    records = split.track.records
    print(
        f"raw text: {len(split.raw_text) / 1e6:.2f} MB, {records} records, gzip "
        f"{len(raw_gz) / 1e3:.0f} kB"
    )
    ratio = len(track_gz) / len(raw_gz)
    print(
        f"track: {len(track_text) / 1e6:.2f} MB, gzip {len(track_gz) / 1e3:.0f} kB = "
        f"{ratio:.2f}x the raw text's gzip (target <= 2x)"
    )
    took, line = best(args.runs, lambda: server_timeline(track_gz))
    buckets = len(line["threads"][0]["dominant"])
    print(
        "timeline server time (the track with its stored states, no raw text, "
        f"{len(line['threads'])} threads x {buckets} buckets of {line['bucket_s']} s): "
        f"{took * 1000:.0f} ms (target < 300 ms)"
    )
    length = args.minutes * 60
    for begin, end in ((length / 6, length / 6 + 10), (length / 6, length / 6 + 60), (0, length)):
        took, tree = best(args.runs, lambda b=begin, e=end: server_window(raw_gz, track_gz, b, e))
        full, _ = best(args.runs, lambda b=begin, e=end: window_stats(raw_gz, track_gz, b, e))
        print(
            f"window [{begin:g}, {end:g}) s flamegraph ({tree['value']} samples): "
            f"{took * 1000:.0f} ms (target < 300 ms); with full analyze {full * 1000:.0f} ms"
        )
    took, found = best(1, lambda: periodic_stalls(TimedCapture(split.raw_text, split.track)))
    titles = "; ".join(f["title"] for f in found) or "none"
    print(f"periodic stalls: {took * 1000:.0f} ms: {titles}")
    took, effects = best(1, lambda: design_effects(TimedCapture(split.raw_text, split.track)))
    step = effects["step"] if effects else {}
    print(
        f"design effects: {took * 1000:.0f} ms ({len(step.get('states', {}))} states, "
        f"{len(step.get('functions', {}))} functions over {effects and effects['blocks']} "
        "blocks; once per analysis)"
    )
    with tempfile.TemporaryDirectory() as folder:
        raw_path, track_path = Path(folder, "raw.txt.gz"), Path(folder, "track.json.gz")
        raw_path.write_bytes(raw_gz)
        track_path.write_bytes(track_gz)
        code = CHILD.format(
            root=str(ROOT), raw=str(raw_path), track=str(track_path), begin=length / 6
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        peak = int(done.stdout.strip() or 0) / 1024
    print(
        f"peak memory: server path (timeline + a 60 s window's flamegraph) {peak:.0f} MB; "
        f"this process (with the split) "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )


if __name__ == "__main__":
    main()
