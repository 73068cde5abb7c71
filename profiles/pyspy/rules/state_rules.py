"""The default thread-state rule table: plain records, read by states.py.

Each record says which frames identify a state (docs/states.md explains the table
and how to extend it). Fields:
- `state`: one of state_rules.STATES, or "transparent" for frames that say nothing about
  what the thread does (the interpreter, binding layers, thread entry points);
- `name`: the function name, whole: a glob (`*` is any run of characters) or
  `re:REGEX` (full match). Native names are compared without their template
  arguments, parameter lists and ` [clone .cold]` suffixes, so
  `pybind11::cpp_function::initialize<..., gil_scoped_release, ...>` is
  `pybind11::cpp_function::initialize<>` here and names no GIL;
- `file`: optional glob over the frame's file or library (`queue.py`,
  `torch/distributed/distributed_c10d.py`, `libpython*`), matched whole or after
  any `/`, so py-spy's shortened names and full paths both match;
- `caller`: optional condition on the frame directly above: `python` (a Python or
  interpreter frame) or a name glob; `caller_file` the same for its file;
- `level`: `decide` (the innermost such frame decides), `primitive` (decides unless
  a `decide` frame above already did: GPU driver calls inside `.item()` stay
  host_sync) or `fallback` (only when nothing above decided anything, compute
  included: a condition wait inside a torch op stays compute).
Within one frame, the first matching record wins (user rules come first).
Evidence for each group: the captures in tests/data/pyspy/ (SOURCES.md).
"""

from __future__ import annotations

from typing import NamedTuple

STATES: tuple[str, ...] = (
    "compute",
    "gpu_launch",
    "gpu_sync",
    "host_sync",
    "allocator",
    "collective",
    "data_wait",
    "backpressure",
    "gil",
    "idle",
    "unknown",
)
"""The vocabulary, in the order every list of states follows (its one home)."""


class StateRule(NamedTuple):
    """One row of the table (see the module doc for each field)."""

    state: str
    name: str
    file: str = ""
    caller: str = ""
    caller_file: str = ""
    level: str = "decide"
    kind: str = ""
    framework: str = ""
    """Rows with state "step" or "phase" only: the framework (framework_rules.py)."""
    phase: str = ""
    """...and the words shown beside the frame ("training step", "DDP backward")."""


def _rows(state: str, names: str, level: str = "decide", file: str = "") -> tuple[StateRule, ...]:
    """Python-frame rows: one per name, all in `file`."""
    return tuple(StateRule(state, n, file=file, level=level, kind="python") for n in names.split())


def _native(state: str, names: str, level: str = "decide", file: str = "") -> tuple[StateRule, ...]:
    """Native-frame rows: a Python function called `read` or `free` is not libc's."""
    return tuple(StateRule(state, n, file=file, level=level, kind="native") for n in names.split())


_C10D_PY = "torch/distributed/distributed_c10d.py"
_COND_WAIT = "re:pthread_cond_(timed|clock)?wait"
# Interpreter lock functions: a condition wait under them is a Python lock wait, not the GIL.
_PY_LOCKS = "re:(lock_)?PyThread_acquire_lock.*|rlock_acquire|acquire_timed|PyCOND_.*|_?PyMutex_.*"

DEFAULT_RULES: tuple[StateRule, ...] = (
    # The GIL. py-spy hides take_gil in most builds: a GIL wait then shows as a condition
    # wait right under Python, the interpreter or torch's bindings (libtorch_python), which
    # release the GIL around every op. pybind11's gil_scoped_release *destructor* and
    # gil_scoped_acquire *constructor* take the GIL back; the release constructor only
    # signals (pthread_cond_signal), so it is no wait.
    StateRule("idle", _COND_WAIT, caller=_PY_LOCKS, level="fallback", kind="native"),
    *_native("gil", "take_gil PyEval_RestoreThread PyEval_AcquireThread PyEval_AcquireLock"),
    *_native("gil", "PyGILState_Ensure pybind11::gil_scoped_acquire::gil_scoped_acquire"),
    *_native("gil", "pybind11::gil_scoped_release::~gil_scoped_release"),
    *_native("gil", "pybind11::gil_scoped_acquire_simple::gil_scoped_acquire_simple"),
    StateRule("gil", _COND_WAIT, caller="python", kind="native"),
    StateRule("gil", _COND_WAIT, caller_file="libtorch_python.so*", kind="native"),
    # Collectives: NCCL, gloo and c10d (ProcessGroup*, Work::wait, TCPStore, the DDP
    # reducer), and the Python API when no native frame is visible.
    *_native("collective", "nccl* c10d::* gloo::*"),
    *_rows(
        "collective",
        "all_reduce* all_gather* reduce_scatter* broadcast* barrier monitored_barrier reduce "
        "gather* scatter* all_to_all* send recv isend irecv batch_isend_irecv *_object_list",
        file=_C10D_PY,
    ),
    *_rows(
        "collective",
        "wait_tensor all_reduce* all_gather* reduce_scatter* all_to_all*",
        file="torch/distributed/_functional_collectives.py",
    ),
    # Host syncs: the host reads a device value (`.item()`, `.cpu()`, `.tolist()`,
    # `.numpy()`, `if tensor:`, a blocking copy, nonzero on CUDA, a device op falling
    # back to the CPU through `_to_cpu`, as torch's lazy device does).
    *_native(
        "host_sync",
        "at::*_local_scalar_dense* at::native::item at::_ops::item::* c10::cuda::memcpy_and_sync "
        "at::native::nonzero_cuda at::native::nonzero_out_cuda at::native::_to_cpu "
        "torch::utils::tensor_to_list "
        "torch::utils::tensor_to_numpy "
        "re:(torch::autograd::)?THPVariable_(item|cpu|tolist|numpy|(bool|float|integral|index)_scalar)",
    ),
    # Explicit GPU syncs from Python, and torch's own sync helpers.
    *_rows("gpu_sync", "synchronize", file="torch/cuda/__init__.py"),
    *_rows("gpu_sync", "Event.synchronize Stream.synchronize", file="torch/cuda/streams.py"),
    *_native(
        "gpu_sync",
        "c10::cuda::device_synchronize c10::cuda::stream_synchronize "
        "c10::cuda::CUDAStream::synchronize at::cuda::CUDAEvent::synchronize",
    ),
    # Blocking frees wait for the device: cudaFree synchronizes it before freeing (the
    # caching allocator exists to avoid that: PyTorch's "CUDA semantics, memory
    # management"), the allocator's synchronize_and_free_events waits on every pending
    # event, and ExpandableSegment::unmapHandles synchronizes the stream first ("unlike
    # cudaFree, MemUnmap and MemRelease do not appear to synchronize": all three in
    # c10/cuda/CUDACachingAllocator.cpp). With NCCL a wait for a slow peer can surface
    # there too, so they are gpu_sync, ahead of the allocator rows below. Stream-ordered
    # frees (cudaFreeAsync, cuMemFreeAsync) do not block and stay allocator.
    *_native(
        "gpu_sync",
        "cudaFree cudaFreeHost re:cuMemFree(Host)?(_v2)? "
        "*::CUDACachingAllocator::*::synchronize_and_free_events "
        "*::CUDACachingAllocator::*ExpandableSegment::unmapHandles",
    ),
    # Allocators: the CUDA caching allocator, CUDA/host allocation calls, host malloc.
    *_native(
        "allocator",
        "*::CUDACachingAllocator::* *CachingHostAllocator* re:cuda(Malloc|Free|HostAlloc).* "
        "re:cuMem(Alloc|Free|HostAlloc|Create|Map|Unmap|Release|AddressReserve).* "
        "malloc free calloc realloc posix_memalign aligned_alloc memalign cfree "
        "c10::alloc_cpu c10::free_cpu",
    ),
    # Input: a consumer blocked on its queue, pipe or DataLoader workers.
    *_rows("data_wait", "Queue.get get _PySimpleQueue.get", file="queue.py"),
    *_rows("data_wait", "Queue.get SimpleQueue.get", file="multiprocessing/queues.py"),
    *_rows(
        "data_wait",
        "Connection.recv* Connection._recv* Connection.poll Connection._poll wait",
        file="multiprocessing/connection.py",
    ),
    *_rows(
        "data_wait",
        "_MultiProcessingDataLoaderIter._get_data _MultiProcessingDataLoaderIter._try_get_data",
        file="torch/utils/data/dataloader.py",
    ),
    *_native("data_wait", "re:_queue_SimpleQueue_get.*|simplequeue_get.*"),
    # Backpressure: a producer blocked on a full queue.
    *_rows("backpressure", "Queue.put put", file="queue.py"),
    *_rows("backpressure", "Queue.put", file="multiprocessing/queues.py"),
    # Explicit idling.
    *_native("idle", "time_sleep pysleep"),
    *_rows("idle", "Thread.join Thread._wait_for_tstate_lock", file="threading.py"),
    # GPU driver primitives: kernel launches and async copies enqueue work; blocking
    # copies and synchronize calls wait for the device.
    *_native(
        "gpu_launch",
        "re:cu(da)?LaunchKernel.* re:cu(da)?LaunchCooperativeKernel.* re:cu(da)?GraphLaunch.* "
        "re:cu(da)?Memcpy.*Async.* re:cu(da)?Memset.*Async.*",
        level="primitive",
    ),
    *_native(
        "gpu_sync",
        "re:cu(da)?(Stream|Event|Ctx|Device|Thread)Synchronize.* "
        "re:cudaMemcpy(2D|3D|Peer|FromSymbol|ToSymbol)?(_v2)? "
        "re:cuMemcpy(DtoH|HtoD|DtoD|2D|3D|Peer)?(_v2)?",
        level="primitive",
    ),
    # Generic waits: idle only when nothing above says more (`c10d::Work::wait` above
    # `pthread_cond_wait` is collective; a wait inside a torch op is part of that op).
    *_native(
        "idle",
        f"{_COND_WAIT} {_PY_LOCKS} std::condition_variable::* std::__condvar::* "
        "clock_nanosleep nanosleep __nanosleep usleep sleep select __select pselect* poll __poll "
        "ppoll epoll_wait epoll_pwait* sem_wait sem_timedwait sem_clockwait __new_sem_wait* "
        "do_futex_wait* futex_wait* __futex_abstimed_wait* __lll_lock_wait* *pthread_mutex_lock "
        "*pthread_mutex_timedlock pthread_rwlock_*lock sched_yield read __libc_read recv "
        "__libc_recv recvfrom recvmsg accept accept4 waitpid __waitpid wait4 __wait4 sigwait* "
        "sigtimedwait pause __libc_pause",
        level="fallback",
    ),
    *_rows(
        "idle",
        "Condition.wait Event.wait Semaphore.acquire BoundedSemaphore.acquire Barrier.wait "
        "Barrier._wait",
        level="fallback",
        file="threading.py",
    ),
    *_rows("idle", "*Selector.select", level="fallback", file="selectors.py"),
    *_rows("idle", "Queue.join", level="fallback", file="queue.py"),
    *_rows("idle", "Future.result wait as_completed", "fallback", "concurrent/futures/_base.py"),
    # Frames that say nothing: the interpreter, torch's and pybind11's binding layers,
    # thread entry points. An unmatched symbolised native frame elsewhere is compute.
    *_native("transparent", "*", file="libpython*"),
    *_native("transparent", "*", file="re:python[0-9.]*"),
    *_native("transparent", "*", file="libtorch_python.so*"),
    *_native(
        "transparent",
        "pybind11::* start_thread clone clone3 __clone* __libc_start_main __libc_start_call_main "
        "_start execute_native_thread_routine std::thread::* std::__invoke* "
        "std::_Function_handler*",
    ),
)
