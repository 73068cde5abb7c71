"""A small CUDA training loop on an NCCL process group, for py-spy captures.

Modes:
  step     MLP of many small layers, bf16 autocast; per step: forward, backward,
           one NCCL all_reduce per gradient, SGD, `loss.item()` (a planted host
           sync), a 256 MiB scratch tensor then `torch.cuda.empty_cache()` (a real
           cudaMalloc and blocking cudaFree through the caching allocator).
  slowdev  per step a chain of large bf16 matmuls, an all_reduce, then `.item()`:
           the host waits for a slow device.
  pair     like step, as one of two ranks on the same GPU (NCCL usually refuses).
Writes READY_FILE after the first completed step; runs until killed or SECONDS.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

DRY = bool(os.environ.get("DRY"))  # a CPU/gloo dry run of this script's logic
DEV = "cpu" if DRY else "cuda"


def main() -> None:
    mode, seconds, ready = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    if DRY:
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    if mode == "slowdev":
        run_slowdev(seconds, ready)
    else:
        run_step(seconds, ready)
    dist.destroy_process_group()


def run_step(seconds: float, ready: str) -> None:
    layers = [nn.Sequential(nn.Linear(1024, 1024), nn.GELU()) for _ in range(24)]
    model = nn.Sequential(*layers, nn.Linear(1024, 1)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device=DEV)
    y = torch.randn(512, 1, device=DEV)
    end, step = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV, dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        value = loss.item()
        scratch = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
        del scratch
        if not DRY:
            torch.cuda.empty_cache()
        step += 1
        if step == 1:
            open(ready, "w").write(f"{os.getpid()} {value}\n")
    print(f"rank {dist.get_rank()}: {step} steps", flush=True)


def run_slowdev(seconds: float, ready: str) -> None:
    N = 512 if DRY else 16384
    a = torch.randn(N, N, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(N, N, device=DEV, dtype=torch.bfloat16)
    end, step = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        c = a
        for _ in range(8):
            c = (c @ b) * 1e-3
        total = c.float().sum()
        dist.all_reduce(total)
        value = total.item()
        step += 1
        if step == 1:
            open(ready, "w").write(f"{os.getpid()} {value}\n")
    print(f"rank {dist.get_rank()}: {step} steps", flush=True)


if __name__ == "__main__":
    main()
