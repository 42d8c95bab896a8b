"""nccl-allreduce: bus bandwidth of an all-reduce across this host's GPUs, one process each.

busbw = algbw * 2(n-1)/n, as nccl-tests reports it: the figure that compares
with the links' bandwidth whatever the GPU count. The processes meet on a
TCP store on 127.0.0.1; nothing leaves the host.
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import NO_GPU, NO_MULTICAST, Timer, emit, gpu_device_present
else:
    from smokelib import NO_GPU, NO_MULTICAST, Timer, emit, gpu_device_present

SIZES = (64 << 20, 1 << 30)
WARMUP, REPEATS = 5, 20


def bus_bandwidth(size_bytes: int, seconds: float, ranks: int) -> float:
    """GB/s on the bus for one all-reduce of `size_bytes` that took `seconds`."""
    algbw = size_bytes / seconds / 1e9
    return algbw * 2 * (ranks - 1) / ranks


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker(rank: int, world: int, port: int, queue: Any, backend: str, sizes: list[int]) -> None:
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")

    gpu = backend == "nccl"
    if gpu:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        device_id=device if gpu else None,
    )
    try:
        rows: list[dict[str, Any]] = []
        for size in sizes:
            x = torch.empty(size // 4, dtype=torch.float32, device=device)
            # Correctness first: each rank adds rank+1, so every element is n(n+1)/2.
            x.fill_(rank + 1)
            dist.all_reduce(x)
            want = world * (world + 1) / 2
            correct = bool((x == want).all())
            for _ in range(WARMUP):
                dist.all_reduce(x)
            dist.barrier()
            if gpu:
                torch.cuda.synchronize()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
            t0 = time.perf_counter()
            for _ in range(REPEATS):
                dist.all_reduce(x)
            if gpu:
                end.record()
                end.synchronize()
                secs = start.elapsed_time(end) / 1e3 / REPEATS
            else:
                secs = (time.perf_counter() - t0) / REPEATS
            rows.append({"size": size, "seconds": secs, "correct": correct})
            del x
        if rank == 0:
            queue.put(rows)
    finally:
        dist.destroy_process_group()


def run_allreduce(backend: str, ranks: int, sizes: list[int]) -> list[dict[str, Any]]:
    mp: Any = importlib.import_module("torch.multiprocessing")

    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(
        worker,
        args=(ranks, free_port(), queue, backend, sizes),
        nprocs=ranks,
        join=True,
        start_method="spawn",
    )
    rows: list[dict[str, Any]] = queue.get()
    return rows


def size_label(size: int) -> str:
    return f"{size >> 30}GiB" if size >= 1 << 30 else f"{size >> 20}MiB"


def main() -> int:
    ap = argparse.ArgumentParser()
    # gloo on CPU processes runs the same code path without a GPU (for tests).
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    ap.add_argument("--ranks", type=int, default=None, help="default: one per GPU")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="bytes, a,b,...")
    args = ap.parse_args()
    os.environ.update(NO_MULTICAST)
    t = Timer()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as exc:
        emit("nccl-allreduce", "skip", f"torch is not importable here: {exc}", seconds=t.seconds)
        return 0
    if args.backend == "nccl":
        if not torch.cuda.is_available():
            why = NO_GPU if not gpu_device_present() else "torch.cuda.is_available() is False"
            if torch.version.cuda is None:
                why = f"torch {torch.__version__} is a CPU-only build (no NCCL)"
            emit("nccl-allreduce", "skip", why, seconds=t.seconds)
            return 0
        n = torch.cuda.device_count()
        if n < 2:
            emit(
                "nccl-allreduce",
                "skip",
                f"an all-reduce needs 2 or more GPUs; this host has {n}",
                value=n,
                unit="GPUs",
                seconds=t.seconds,
            )
            return 0
        if not torch.distributed.is_nccl_available():
            emit(
                "nccl-allreduce", "fail", "torch.distributed has no NCCL backend", seconds=t.seconds
            )
            return 0
        ranks = args.ranks or n
        device = torch.cuda.get_device_name(0)
        version = "NCCL " + ".".join(str(p) for p in torch.cuda.nccl.version())
    else:
        ranks = args.ranks or 2
        device, version = "cpu", "gloo"
    try:
        rows = run_allreduce(args.backend, ranks, sizes)
    except Exception as exc:
        emit("nccl-allreduce", "fail", f"all-reduce workers failed: {exc}", seconds=t.seconds)
        return 0
    for row in rows:
        size, label = row["size"], size_label(row["size"])
        ok = row["correct"]
        emit(
            f"nccl-allreduce/{label}",
            "pass" if ok else "fail",
            (
                f"{ranks} ranks, {version}, fp32 {label}, mean of {REPEATS}"
                if ok
                else f"all-reduce of {label} gave a wrong sum"
            ),
            value=round(bus_bandwidth(size, row["seconds"], ranks), 2),
            unit="GB/s",
            seconds=t.seconds,
            details={
                "metric": "allreduce_busbw_gbs",
                "gpu": device,
                "ranks": ranks,
                "bytes": size,
                "algbw_gbs": round(size / row["seconds"] / 1e9, 2),
                "graded": size == max(SIZES),
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
