"""Thread states of single stacks: which frame decides, and where it points in user code.

Frames are copied from real captures (tests/data/pyspy/, DESIGN.md's gloo stacks) or
from the symbols of torch 2.13 and libc.
"""

import json

import pytest

from profiles.pyspy import AnalysisOptions, analyze, parse_raw_lines
from profiles.pyspy.rules.rule_table import (
    load_state_rules,
    normalise_native_name,
)
from profiles.pyspy.rules.state_rules import STATES
from profiles.pyspy.rules.states import classify

TRAIN = "train_step (train.py:77)"
ALL_REDUCE = "all_reduce (torch/distributed/distributed_c10d.py:3252)"
LOGGER = "_exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)"
PYBIND = (
    "pybind11::cpp_function::initialize<c10::intrusive_ptr<c10d::Work> (*)(c10d::Work&), "
    "pybind11::call_guard<pybind11::gil_scoped_release>>::{lambda(pybind11::detail::"
    "function_call&)#3}::operator() (libtorch_python.so)"
)
COND = "pthread_cond_wait (libc.so.6)"
LIBC = "0x7f6a22ca3f16 (libc.so.6)"
ITEM = "torch::autograd::THPVariable_item (libtorch_python.so)"
GIL_BACK = "pybind11::gil_scoped_release::~gil_scoped_release (libtorch_python.so)"
ADDMM = "at::native::addmm_out_cpu (libtorch_cpu.so)"


def state_of(*frames, rules=None, library=()):
    """(state, user caller) of one stack given root first."""
    stats = analyze(
        parse_raw_lines([";".join(frames) + " 1"]),
        AnalysisOptions(state_rules=rules, library=library, include_flamegraph=False),
    )
    (row,) = [s for s in stats["states"] if s["samples"]]
    return row["state"], row["user_callers"][0]["frame"]


def test_a_collective_wait_is_collective_and_points_at_the_users_train_step():
    stack = [TRAIN, LOGGER, ALL_REDUCE, PYBIND, "c10d::Work::wait (libtorch_cpu.so)"]
    stack += ["std::condition_variable::wait (libstdc++.so.6)", COND, LIBC]
    assert state_of(*stack) == ("collective", TRAIN)


def test_a_pybind11_template_argument_naming_the_gil_is_no_gil_wait():
    assert state_of(TRAIN, PYBIND, COND, LIBC) == ("gil", TRAIN)  # under binding code: the GIL
    assert state_of(TRAIN, PYBIND, "std::condition_variable::wait (libstdc++.so.6)", COND)[0] == (
        "idle"
    )
    assert normalise_native_name(PYBIND.rsplit(" (", 1)[0]) == (
        "pybind11::cpp_function::initialize<>::{lambda()#3}::operator()"
    )


@pytest.mark.parametrize(
    "frames",
    [
        ["take_gil (libpython3.11.so.1.0)", "pthread_cond_timedwait (libc.so.6)"],
        ["PyEval_RestoreThread (libpython3.11.so.1.0)", LIBC],
        [ITEM, GIL_BACK, "pthread_cond_timedwait (libc.so.6)"],  # after .item() returns
        ["time_sleep (libpython3.11.so.1.0)", "pthread_cond_timedwait (libc.so.6)"],
        ["torch::autograd::THPVariable_relu (libtorch_python.so)", "pthread_cond_timedwait (x)"],
        [COND, LIBC],  # right under Python: take_gil inlined (every such wait in our captures)
    ],
)
def test_waiting_for_the_gil_is_gil_whatever_the_caller_was_doing(frames):
    assert state_of(TRAIN, *frames)[0] == "gil"


def test_a_condition_wait_inside_a_python_lock_is_a_lock_wait_not_the_gil():
    lock = "PyThread_acquire_lock_timed (libpython3.11.so.1.0)"
    assert state_of(TRAIN, lock, "pthread_cond_timedwait (libc.so.6)")[0] == "idle"


@pytest.mark.parametrize(
    ("frames", "state"),
    [
        (["Queue.get (queue.py:180)", "Condition.wait (threading.py:331)"], "data_wait"),
        (["Queue.put (queue.py:149)", "Condition.wait (threading.py:331)", LIBC], "backpressure"),
        (
            ["Queue.get (multiprocessing/queues.py:103)", "wait (multiprocessing/connection.py:1)"],
            "data_wait",
        ),
        (["time_sleep (libpython3.11.so.1.0)", "clock_nanosleep (libc.so.6)"], "idle"),
        (
            ["Thread.join (threading.py:1112)", "lock_PyThread_acquire_lock (libpython3.11.so)"],
            "idle",
        ),
        (["select (libc.so.6)"], "idle"),
        (["epoll_wait (libc.so.6)", LIBC], "idle"),
        (["EpollSelector.select (selectors.py:468)"], "idle"),
        (["std::condition_variable::wait (libstdc++.so.6)", COND, LIBC], "idle"),
        (["Condition.wait (threading.py:331)"], "idle"),
    ],
)
def test_python_stdlib_waits(frames, state):
    # A condition wait right under Python is the GIL (the next test); these are not.
    assert state_of("main (loader.py:5)", *frames)[0] == state


@pytest.mark.parametrize(
    ("frames", "state"),
    [
        (
            [ADDMM, "cublasSgemm_v2 (libcublas.so.12)", "cuLaunchKernel (libcuda.so.1)"],
            "gpu_launch",
        ),
        (["cudaLaunchKernel (libcudart.so.12)", "0x7f00 (libcudart.so.12)"], "gpu_launch"),
        (["cudaMemcpyAsync (libcudart.so.12)"], "gpu_launch"),
        (
            ["synchronize (torch/cuda/__init__.py:985)", "cudaDeviceSynchronize (libcudart.so)"],
            "gpu_sync",
        ),
        (["cuStreamSynchronize (libcuda.so.1)", "sched_yield (libc.so.6)"], "gpu_sync"),
        (["cuEventSynchronize (libcuda.so.1)"], "gpu_sync"),
        (["cudaMemcpy (libcudart.so.12)", "0x1 (libcuda.so.1)"], "gpu_sync"),
        (
            [
                ITEM,
                "at::_ops::_local_scalar_dense::call (libtorch_cpu.so)",
                "at::native::_local_scalar_dense_cuda (libtorch_cuda.so)",
                "cudaMemcpyAsync (libcudart.so)",
                "cudaStreamSynchronize (libcudart.so)",
            ],
            "host_sync",
        ),
        (["torch::autograd::THPVariable_tolist (libtorch_python.so)"], "host_sync"),
        (
            [
                "torch::lazy::ts_eager_fallback (libtorch_cpu.so)",
                "at::native::_to_cpu (libtorch_cpu.so)",
                "torch::lazy::LazyGraphExecutor::SyncTensorsGraph (x.so)",
            ],
            "host_sync",
        ),
        (
            [
                "torch::autograd::THPVariable_cpu (libtorch_python.so)",
                "c10::cuda::memcpy_and_sync (libc10_cuda.so)",
                "cudaStreamSynchronize (libcudart.so)",
            ],
            "host_sync",
        ),
        (
            [
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc "
                "(libc10_cuda.so)",
                "cudaMalloc (libcudart.so)",
            ],
            "allocator",
        ),
        (
            [
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free (x.so)",
                "cudaEventSynchronize (libcudart.so)",
            ],
            "allocator",
        ),
        (["ncclAllReduce (libnccl.so.2)", "cuLaunchKernelEx (libcuda.so.1)"], "collective"),
        (
            [
                "c10d::ProcessGroupNCCL::WorkNCCL::wait (libtorch_cuda.so)",
                "c10d::ProcessGroupNCCL::WorkNCCL::synchronizeStream (libtorch_cuda.so)",
                "cudaStreamWaitEvent (libcudart.so)",
            ],
            "collective",
        ),
        (["c10d::ProcessGroupGloo::AsyncWork::wait (libtorch_cpu.so)", COND], "collective"),
        (["gloo::transport::tcp::UnboundBuffer::waitRecv (libtorch_cpu.so)", LIBC], "collective"),
        (["barrier (torch/distributed/distributed_c10d.py:4100)"], "collective"),
        (["broadcast (torch/distributed/distributed_c10d.py:2800)"], "collective"),
    ],
)
def test_cuda_nccl_gloo_c10d_and_torch_frames(frames, state):
    assert state_of(TRAIN, *frames)[0] == state


@pytest.mark.parametrize(
    ("frames", "state"),
    [
        ([ADDMM], "compute"),  # a symbolised native leaf
        ([], "compute"),  # a Python leaf
        ([ADDMM, "GOMP_parallel (libgomp.so.1)", "0x7f02 (libgomp.so.1)"], "compute"),
        ([ADDMM, "at::internal::invoke_parallel (libtorch_cpu.so)", COND, LIBC], "compute"),
        (["thread_run (libpython3.11.so.1.0)", LIBC], "unknown"),
        ([LIBC, "0x7f03 (libc.so.6)"], "unknown"),
        (["_PyEval_EvalFrameDefault (libpython3.11.so.1.0)"], "compute"),
    ],
)
def test_compute_is_a_symbolised_leaf_or_an_op_and_an_address_with_nothing_above_unknown(
    frames, state
):
    assert state_of(TRAIN, *frames)[0] == state


def test_an_address_takes_the_state_of_its_nearest_classifying_ancestor():
    assert state_of(TRAIN, "Queue.get (queue.py:180)", LIBC, "0x1 (libc.so.6)")[0] == "data_wait"
    assert state_of(TRAIN, ADDMM, "0x7f02 (libgomp.so.1)")[0] == "compute"
    assert state_of("<module> (train.py:3)", LIBC)[0] == "unknown"


def test_user_functions_named_like_libc_or_the_c10d_api_are_their_own_compute():
    for name in ("read", "free", "malloc", "select", "sleep", "broadcast", "barrier"):
        assert state_of(TRAIN, f"{name} (mylib.py:3)") == ("compute", f"{name} (mylib.py:3)")


def test_names_match_whole_never_a_part_or_the_file():
    assert state_of(TRAIN, "mallocator_stats (libfoo.so)")[0] == "compute"
    assert state_of(TRAIN, "load (freelist.py:3)")[0] == "compute"
    assert state_of(TRAIN, "myselect (libfoo.so)")[0] == "compute"
    assert state_of(TRAIN, "take_gil_stats (libfoo.so)")[0] == "compute"


def test_user_callers_skip_the_standard_library_packages_and_configured_library_code():
    stack = [
        "<module> (train.py:90)",
        TRAIN,
        "step (vendorlib/core/pipeline.py:10)",
        "Thread.join (threading.py:1112)",
    ]
    assert state_of(*stack) == ("idle", "step (vendorlib/core/pipeline.py:10)")
    assert state_of(*stack, library=("vendorlib",)) == ("idle", TRAIN)
    assert state_of("thread_run (libpython3.11.so)", "Thread.join (threading.py:1112)") == (
        "idle",
        "(no user frame)",
    )


def test_a_state_running_through_several_frames_points_above_the_outermost():
    # all_reduce (Python) already decides collective; c10d::Work::wait keeps it.
    stack = [TRAIN, "helper (train.py:50)", ALL_REDUCE, "c10d::Work::wait (x.so)", COND]
    assert state_of(*stack) == ("collective", "helper (train.py:50)")


def test_user_rules_come_first_and_innermost_decides(tmp_path):
    text = tmp_path / "rules.txt"
    text.write_text(
        "# our prefetcher\ndata_wait: Prefetcher.next in loader.py\n"
        "compute: my_spin_kernel [fallback]\n",
        encoding="utf-8",
    )
    rules = load_state_rules(text)
    stack = [TRAIN, "Prefetcher.next (loader.py:40)", "helper (loader.py:9)"]
    assert state_of(*stack) == ("compute", "helper (loader.py:9)")
    assert state_of(*stack, rules=rules) == ("data_wait", "Prefetcher.next (loader.py:40)")
    assert state_of(*stack, "time_sleep (libpython3.11.so)", rules=rules)[0] == "idle"
    as_json = tmp_path / "rules.json"
    as_json.write_text(json.dumps([{"state": "collective", "name": "my_allreduce*"}]), "utf-8")
    assert (
        state_of(TRAIN, "my_allreduce_fused (libmine.so)", COND, rules=load_state_rules(as_json))[0]
        == "collective"
    )


def test_caller_dependent_rules_are_resolved_once_per_frame_and_caller():
    lines = [
        f"{TRAIN};pthread_cond_timedwait (libc.so.6) 1",
        "main (train.py:1);pthread_cond_timedwait (libc.so.6) 1",
        f"{TRAIN};PyThread_acquire_lock_timed (libpython3.11.so);pthread_cond_timedwait (x) 1",
    ]
    profile = parse_raw_lines(lines)
    classified = classify(profile)
    assert classify(profile) is classified  # cached on the profile
    ends = [n for n, own in enumerate(profile.self_count) if own]
    assert [STATES[classified.state[n]] for n in ends] == ["gil", "gil", "idle"]
