"""The wait model of the job report: with NCCL a rank waits for a slow peer at its next
device sync, so the straggler rule counts collective + gpu_sync + host_sync there, and
says when host stacks cannot tell a slow peer from a slow device.

Stacks are real: the captures of tests/data/gpu/ (a CUDA training loop on an NCCL
process group, H200; README.md there says how they were made and where every frame name
below comes from), or ranks assembled from frames copied out of those captures, root
first, with template wrapper frames between them left out.
"""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiles.pyspy import AnalysisOptions, analyze, parse_raw_lines
from profiles.pyspy.job.rank_stats import well_formed
from profiles.pyspy.job.report import analyze_job
from profiles.pyspy.job.straggler import (
    BLOCKING_WAITS,
    find_straggler,
    is_device_frame,
    rank_view,
)
from profiles.pyspy.jobcli import analyze_rank

ROOT = Path(__file__).resolve().parents[4]
GPU = ROOT / "tests" / "data" / "gpu"
CAPTURES = {"nccl_step": GPU / "gpu_nccl_step.txt.gz", "slow_device": GPU / "gpu_slow_device.txt"}

# From gpu_slow_device.txt: `.item()` on a CUDA tensor waits in cudaStreamSynchronize.
ITEM = (
    "torch::autograd::THPVariable_item (libtorch_python.so)",
    "at::_ops::item::call (libtorch_cpu.so)",
    "at::native::item (libtorch_cpu.so)",
    "at::native::_local_scalar_dense_cuda (libtorch_cuda.so)",
    "cudaStreamSynchronize (libcudart.so.13)",
    "cuStreamSynchronize (libcuda.so.580.159.04)",
    "0x7f690c15d157 (libcuda.so.580.159.04)",
)
# From gpu_nccl_step.txt.gz, ending in NCCL's own API call (NCCL docs, Collective
# Operations: ncclAllReduce; libnccl.so.2 is the library of the nvidia-nccl wheel).
ALL_REDUCE = (
    "_exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)",
    "all_reduce (torch/distributed/distributed_c10d.py:3068)",
    "c10d::ProcessGroup::allreduce (libtorch_cpu.so)",
    "c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)",
    "c10d::ProcessGroupNCCL::allreduce_impl (libtorch_cuda.so)",
    "ncclAllReduce (libnccl.so.2)",
)
# From gpu_nccl_step.txt.gz: a forward op launching its kernel.
LAUNCH = (
    "GELU.forward (torch/nn/modules/activation.py:816)",
    "torch::autograd::THPVariable_gelu (libtorch_python.so)",
    "at::(anonymous namespace)::wrapper_CUDA_gelu (libtorch_cuda.so)",
    "cudaLaunchKernel (libcudart.so.13)",
    "cuLaunchKernel (libcuda.so.580.159.04)",
    "0x7f7a9a75e007 (libcuda.so.580.159.04)",
)
_ALLOC = "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::"
# From gpu_nccl_step.txt.gz: torch.cuda.empty_cache() freeing blocks with cudaFree.
EMPTY_CACHE = (
    "empty_cache (torch/cuda/memory.py:224)",
    "THCPModule_emptyCache (libtorch_python.so)",
    "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache (libc10_cuda.so)",
    f"{_ALLOC}release_blocks (libc10_cuda.so)",
    f"{_ALLOC}release_block (libc10_cuda.so)",
    "cudaFree (libcudart.so.13)",
    "cuMemFree_v2 (libcuda.so.580.159.04)",
    "ioctl (libc.so.6)",
)
# PyTorch c10/cuda/CUDACachingAllocator.cpp: a malloc that misses frees the cache first
# (release_cached_blocks -> synchronize_and_free_events, which waits on each pending
# event: cudaEventSynchronize, CUDA runtime API, Event Management).
FREE_EVENTS = (
    f"{_ALLOC}malloc (libc10_cuda.so)",
    f"{_ALLOC}release_cached_blocks (libc10_cuda.so)",
    f"{_ALLOC}synchronize_and_free_events (libc10_cuda.so)",
    "cudaEventSynchronize (libcudart.so.13)",
)
# From gpu_nccl_step.txt.gz: the caching allocator asking the driver for memory.
MALLOC = (f"{_ALLOC}malloc (libc10_cuda.so)", "cudaMalloc (libcudart.so.13)")
# DESIGN.md's real gloo stack: all_reduce blocks the host in Work::wait.
GLOO = (
    "all_reduce (torch/distributed/distributed_c10d.py:3252)",
    "c10d::Work::wait (libtorch_cpu.so)",
    "std::condition_variable::wait (libstdc++.so.6)",
    "pthread_cond_wait (libc.so.6)",
)
# PyTorch aten/src/ATen/native/Scalar.cpp: `.item()` of a CPU tensor.
CPU_ITEM = (
    "torch::autograd::THPVariable_item (libtorch_python.so)",
    "at::native::item (libtorch_cpu.so)",
    "at::native::_local_scalar_dense_cpu (libtorch_cpu.so)",
)
SLEEP = (
    "wait_for_lock (train.py:62)",
    "time_sleep (libpython3.12.so.1.0)",
    "clock_nanosleep (libc.so.6)",
)
METRIC = ("metric_per_sample (train.py:40)",)
COMPUTE = ("forward (train.py:60)", "at::native::addmm_out_cpu (libtorch_cpu.so)")
OPTIONS = AnalysisOptions(keywords=(), include_flamegraph=False, idle=True)


def state_of(*frames: str) -> str:
    stats = analyze(parse_raw_lines([";".join(frames) + " 1"]), OPTIONS)
    (row,) = [s for s in stats["states"] if s["samples"]]
    return row["state"]


def rank(**parts: int) -> dict:
    """One rank's stats: a step thread with `parts` samples of each stack above (by
    lower-case name), each under its own line of train_step."""
    tails = {"item": ITEM, "nccl": ALL_REDUCE, "launch": LAUNCH, "empty_cache": EMPTY_CACHE,
             "gloo": GLOO, "sleep": SLEEP, "metric": METRIC, "compute": COMPUTE,
             "cpu_item": CPU_ITEM}  # fmt: skip
    lines = [
        ";".join(["thread (700): MainThread", "<module> (train.py:120)",
                  f"train_step (train.py:{70 + i})", *tails[name]]) + f" {n}"
        for i, (name, n) in enumerate(parts.items()) if n
    ]  # fmt: skip
    return dict(analyze(parse_raw_lines(lines), OPTIONS))


def findings(report: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in report["findings"]}


# --- real CUDA stacks ---


@pytest.mark.parametrize(
    "frames, state",
    [(ITEM, "host_sync"), (ALL_REDUCE, "collective"), (LAUNCH, "gpu_launch"),
     (EMPTY_CACHE, "gpu_sync"), (FREE_EVENTS, "gpu_sync"), (MALLOC, "allocator"),
     ((*MALLOC[:1], "cudaFreeAsync (libcudart.so.13)"), "allocator")],
)  # fmt: skip
def test_real_cuda_frames_classify_into_their_states(frames, state):
    assert state_of("train_step (train.py:70)", *frames) == state


def _stacks(path: Path):
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as fh:
        for line in fh:
            frames, _, count = line.rstrip("\n").rpartition(" ")
            yield line, frames.split(";"), int(count)


LIBC_ALLOC = ("malloc (libc.so.6)", "calloc (libc.so.6)", "free (libc.so.6)")


def _expected(frames: list[str]) -> str | None:
    """The state a real stack must be in, from the frames it passes through (None: not
    one this test is about). A libc malloc/free at the end is allocator churn inside."""
    text = ";".join(frames)
    if "THPVariable_item" in text:
        return "host_sync"
    if any(f in frames for f in LIBC_ALLOC):
        return None
    if "cudaFree (libcudart" in text:
        return "gpu_sync"
    if "cudaMalloc (libcudart" in text:
        return "allocator"
    if "c10d::ProcessGroupNCCL::" in text:
        return "collective"
    if "cuLaunchKernel" in text and "CUDACachingAllocator" not in text:
        return "gpu_launch"
    return None


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_every_real_stack_through_a_device_call_is_in_its_state(name):
    checked = set()
    for line, frames, _count in _stacks(CAPTURES[name]):
        expected = _expected(frames)
        if expected is not None:
            assert state_of(*frames) == expected, line[:300]
            checked.add(expected)
    wanted = {"nccl_step": {"gpu_sync", "allocator", "collective", "gpu_launch"},
              "slow_device": {"host_sync", "collective"}}  # fmt: skip
    assert wanted[name] <= checked  # each kind of device call is in the capture


def real_rank(name: str) -> dict:
    path = CAPTURES[name]
    return analyze_rank(str(path), f"{str(path).removesuffix('.gz')}.log", ())


def test_the_slow_device_capture_waits_at_item_on_its_step_thread():
    stats = real_rank("slow_device")
    (main,) = [t for t in stats["threads"] if t["name"] == "MainThread"]
    host_sync = next(s for s in main["states"] if s["state"] == "host_sync")
    assert host_sync["samples"] > 0.9 * main["samples"]
    assert host_sync["user_callers"][0]["frame"] == "run_slowdev (train.py:78)"


def test_the_real_gpu_captures_are_judged_with_the_async_wait_model():
    report = analyze_job([(name, real_rank(name)) for name in sorted(CAPTURES)])
    model = report["wait_model"]
    assert model["kind"] == "async" and model["ranks"] == sorted(CAPTURES)
    assert model["waiting_states"] == ["collective", "gpu_sync", "host_sync"]
    slow = next(r for r in report["ranks"] if r["name"] == "slow_device")
    assert slow["detected_by"] == "device"  # its collectives are too short to show


def test_the_job_cli_prints_the_wait_model_of_real_gpu_captures():
    files = [str(CAPTURES[n]) for n in sorted(CAPTURES)]
    logs = [f.removesuffix(".gz") + ".log" for f in files]
    done = subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", "job", *files, "--log", *logs],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["wait_model"]["kind"] == "async"


def test_the_real_dump_of_the_slow_device_job_stands_at_its_item_line():
    done = subprocess.run(
        [sys.executable, "-m", "profiles.pyspy", "stacks", str(GPU / "gpu_slow_device.dump.json"),
         "--names", "rank-0"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["ranks"]
    assert (row["state"], row["user_frame"]) == ("host_sync", "run_slowdev (train.py:78)")


@pytest.mark.parametrize(
    "frame, device",
    [("cuLaunchKernel (libcuda.so.1)", True), ("0x7f7a9a75e007 (libcuda.so.580.159.04)", True),
     ("cudaLaunchKernel (libtorch_cuda.so)", True), ("ncclGroupEnd (libnccl.so.2)", True),
     ("c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)", True),
     ("cudaStreamSynchronize (/usr/lib/x86_64-linux-gnu/libcudart.so.12)", True),
     ("c10d::ProcessGroupGloo::allreduce (libtorch_cpu.so)", False),
     ("cudnnConvolutionForward (libcudnn_cnn.so.9)", False),
     ("cuda_helper (train.py:3)", False), ("ncclAllReduce (nccl_shim.py:9)", False),
     ("cudaLaunchKernel" + "<" * 10_000 + " (libcuda.so.1)", False)],
)  # fmt: skip
def test_device_frames_are_cuda_and_nccl_native_frames_only(frame, device):
    assert is_device_frame(frame) is device


# --- the straggler rule under each wait model ---


def test_a_rank_the_others_wait_for_at_item_is_the_straggler_only_with_async_waits():
    waiting = {"item": 500, "nccl": 50, "launch": 150, "compute": 300}
    ranks = [(f"rank-{i}", rank(**waiting)) for i in range(3)]
    ranks.append(("rank-3", rank(item=50, nccl=50, launch=150, compute=300, metric=450)))
    report = analyze_job(ranks)
    assert report["wait_model"]["kind"] == "async"
    straggler = report["straggler"]
    assert straggler["name"] == "rank-3"
    assert (straggler["wait_percent"], straggler["others_wait_percent"]) == (10.0, 55.0)
    assert straggler["explanation"][0]["function"] == "metric_per_sample (train.py)"
    # Counting collectives alone (5% on every rank), nobody would be named.
    views = [rank_view(n, well_formed(s), ()) for n, s in ranks]
    assert find_straggler(views, BLOCKING_WAITS) is None
    found = findings(report)
    assert "device syncs" in found["straggler"]["title"]
    assert found["host_sync"]["ranks"] == ["rank-0", "rank-1", "rank-2"]
    advice = found["host_sync"]["advice"]
    assert "is where ranks 0-2 wait for rank-3" in advice and "not the cause" in advice
    assert "peer_or_device" not in found


def test_ranks_waiting_at_device_syncs_alike_are_said_to_be_untold_not_blamed():
    ranks = [(f"rank-{i}", rank(item=480 + 10 * i, nccl=50, compute=470 - 10 * i))
             for i in range(4)]  # fmt: skip
    report = analyze_job(ranks)
    assert report["straggler"] is None
    assert report["wait_model"]["kind"] == "async"  # from the frame lists: no launch states
    untold = findings(report)["peer_or_device"]
    assert untold["title"].startswith("The ranks wait at device syncs alike: a slow device or")
    assert untold["severity"] == "info" and untold["ranks"] == [n for n, _ in ranks]
    assert "from 48% on rank-0 to 51% on rank-3" in untold["advice"]
    assert untold["frames"][0] == "train_step (train.py:70)"
    host_sync = findings(report)["host_sync"]
    assert (
        "cannot tell" in host_sync["advice"] and "read the value every N" not in host_sync["advice"]
    )


def test_a_gloo_job_of_the_same_shape_keeps_the_blocking_model_and_its_advice():
    ranks = [(f"rank-{i}", rank(gloo=500, compute=500)) for i in range(3)]
    ranks.append(("rank-3", rank(gloo=50, compute=500, metric=450)))
    report = analyze_job(ranks)
    assert report["wait_model"] == {**report["wait_model"], "kind": "blocking", "ranks": []}
    assert report["straggler"]["name"] == "rank-3"
    assert (
        findings(report)["straggler"]["title"] == "The other ranks wait for rank-3 in collectives"
    )


def test_host_syncs_without_cuda_frames_are_not_counted_as_waiting():
    """A CPU `.item()` (no CUDA frame) is a host sync, not a wait for a peer."""
    ranks = [(f"rank-{i}", rank(cpu_item=500, gloo=50, compute=450)) for i in range(3)]
    ranks.append(("rank-3", rank(cpu_item=50, gloo=50, compute=450, metric=450)))
    report = analyze_job(ranks)
    assert report["wait_model"]["kind"] == "blocking"
    assert report["straggler"] is None  # 5% in collectives on every rank
    assert findings(report)["host_sync"]["advice"].endswith("or keep it on the device.")


def test_blocking_frees_count_as_waiting_for_a_peer_with_async_waits():
    ranks = [(f"rank-{i}", rank(empty_cache=500, launch=200, compute=300)) for i in range(3)]
    ranks.append(("rank-3", rank(empty_cache=50, launch=200, compute=300, metric=450)))
    report = analyze_job(ranks)
    assert report["straggler"]["name"] == "rank-3"
    assert findings(report)["gpu_sync"]["advice"].startswith("`train.py:70` (in `train_step`) is")


def test_ranks_waiting_out_the_window_at_item_for_a_hung_peer_are_stuck_not_untold():
    ranks = [(f"rank-{i}", rank(item=995, nccl=5)) for i in (0, 1, 3)]
    ranks.append(("rank-2", rank(sleep=1000)))
    found = findings(analyze_job(sorted(ranks)))
    assert found["stuck"]["ranks"] == ["rank-2"]
    assert "wait at device syncs and in collectives" in found["stuck"]["title"]
    assert "straggler" not in found and "peer_or_device" not in found
