"""Generate a large py-spy-style raw file with deep native stacks (for the memory bench).

Usage: python bench/support/gen_raw.py [OUT=/tmp/flamedeck_100mb.txt] [MB=100]
Stacks imitate `py-spy record --format raw --threads --native` of a torch job:
thread frame, libc/pthread entry, 20-60 Python frames from a random walk over a
fixed call graph, then 5-30 native frames (libtorch, libcuda, bare addresses).
Deterministic (seeded); nearly every line is a distinct stack, as in real output.
"""

import random
import sys

MODULES = ["torch/nn/modules/module.py", "train.py", "model/block.py", "data/loader.py"]
NATIVE_LIBS = ["libtorch_cpu.so", "libtorch_cuda.so", "libc10_cuda.so", "libcuda.so.1"]
NATIVE_NAMES = [
    "cuLaunchKernel",
    "cuStreamSynchronize",
    "at::native::add_out",
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
    "at::_ops::linear::call",
    "torch::autograd::Engine::evaluate_function",
    "pthread_cond_wait",
    "_PyEval_EvalFrameDefault",
]


def python_frame(rng: random.Random, index: int) -> str:
    module = MODULES[index % len(MODULES)]
    return f"Block{index % 40}.forward_{index % 7} ({module}:{100 + index % 300})"


def native_frame(rng: random.Random) -> str:
    if rng.random() < 0.4:
        lib = rng.choice(["libc.so.6", "libcuda.so.1"])
        return f"0x7f{rng.randrange(16**8):08x}{rng.randrange(16**2):02x} ({lib})"
    return f"{rng.choice(NATIVE_NAMES)} ({rng.choice(NATIVE_LIBS)})"


def stack(rng: random.Random) -> str:
    thread = rng.randrange(8)
    frames = [f"thread ({5000 + thread}): target-{thread}", "0x7fc0eb8a71f5 (libc.so.6)"]
    frames.append("thread_run (libpython3.11.so.1.0)")
    node = thread
    for _ in range(rng.randrange(20, 60)):
        node = (node * 3 + rng.randrange(3)) % 997  # a call graph with fan-out 3
        frames.append(python_frame(rng, node))
    frames.extend(native_frame(rng) for _ in range(rng.randrange(5, 30)))
    return ";".join(frames)


def main(out: str, megabytes: float) -> None:
    rng = random.Random(1234)
    limit, written = int(megabytes * 1024 * 1024), 0
    with open(out, "w", encoding="utf-8") as fh:
        while written < limit:
            line = f"{stack(rng)} {rng.randrange(1, 6)}\n"
            fh.write(line)
            written += len(line)
    print(f"wrote {out}: {written / 1e6:.1f} MB")


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "/tmp/flamedeck_100mb.txt",
        float(sys.argv[2]) if len(sys.argv) > 2 else 100,
    )
