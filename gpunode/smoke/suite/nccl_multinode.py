"""nccl-multinode: an all-reduce sweep across hosts, one process per GPU, started by torchrun.

gpunode starts `torchrun` on every host of the run; torchrun's c10d rendezvous
gives each process RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and
GROUP_RANK. Each size is all-reduced across every process (across the hosts),
then within each host. busbw = algbw * 2(n-1)/n, as nccl-tests reports it.
The first process of each host prints one line, `GPUNODE-NCCL {json}`; NCCL's
own INFO lines (NCCL_DEBUG=INFO) go to the same stdout and tell which
transport it chose. Without CUDA (`--backend auto`) it runs gloo on the CPU, so
the script itself can be tried anywhere torch is.

On the first host gpunode runs it as `--hold-store TORCHRUN ARGS...` first: it holds the
run's c10d store on 127.0.0.1 and prints its port (`GPUNODE-STORE PORT`) before it starts
torchrun; the workers then use that store (GPUNODE_STORE_PORT) under the run id's prefix.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

MARK = "GPUNODE-NCCL "
STORE_MARK = "GPUNODE-STORE "
PORT_HOLDER = "@PORT@"


def hold_store(argv: list[str]) -> int:
    """`--hold-store TORCHRUN ARGS...` (the first host): the run's c10d store, listening
    on 127.0.0.1 only, on a port the kernel picks (no window for anyone to take it first),
    then TORCHRUN ARGS with @PORT@ filled in. torch's own store would listen on every
    interface: it is handed a socket already bound to loopback instead."""
    dist: Any = importlib.import_module("torch.distributed")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    store = dist.TCPStore(  # noqa: F841 (served while this process lives)
        "127.0.0.1", port, is_master=True, multi_tenant=True, wait_for_workers=False,
        master_listen_fd=listener.fileno(),
    )  # fmt: skip
    os.environ["GPUNODE_STORE_PORT"] = str(port)
    print(STORE_MARK + str(port), flush=True)
    return subprocess.call([a.replace(PORT_HOLDER, str(port)) for a in argv])


def store_of_run(dist: Any) -> dict[str, Any]:
    """init_process_group's store: the run's own (GPUNODE_STORE_PORT on this host's
    loopback), under the run id's prefix; without it (a plain torchrun by hand), env://."""
    port = os.environ.get("GPUNODE_STORE_PORT")
    if not port:
        return {}
    client = dist.TCPStore("127.0.0.1", int(port), is_master=False, timeout=timedelta(minutes=5))
    run = os.environ["TORCHELASTIC_RUN_ID"]
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return {
        "store": dist.PrefixStore(f"gpunode.{run}.{restart}.workers", client),
        "rank": int(os.environ["RANK"]),
        "world_size": int(os.environ["WORLD_SIZE"]),
    }


def bus_bandwidth(size_bytes: int, seconds: float, ranks: int) -> float:
    """GB/s on the bus for one all-reduce of `size_bytes` that took `seconds`."""
    return size_bytes / seconds / 1e9 * 2 * (ranks - 1) / ranks


class Clock:
    """Elapsed time of the work queued between `start` and `stop`: CUDA events on a GPU."""

    def __init__(self, torch: Any, gpu: bool) -> None:
        self.torch, self.gpu = torch, gpu

    def start(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()
            self.begin = self.torch.cuda.Event(enable_timing=True)
            self.end = self.torch.cuda.Event(enable_timing=True)
            self.begin.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self) -> float:
        if self.gpu:
            self.end.record()
            self.end.synchronize()
            return float(self.begin.elapsed_time(self.end)) / 1e3
        return time.perf_counter() - self.t0


def sweep(
    torch: Any, dist: Any, device: Any, group: Any, sizes: list[int], warmup: int, iters: int
) -> tuple[list[dict[str, Any]], bool]:
    """One row per size (the slowest rank's time), and whether every sum was right."""
    ranks = dist.get_world_size(group)
    me = dist.get_rank(group)
    clock = Clock(torch, device.type == "cuda")
    rows, correct = [], True
    for size in sizes:
        x = torch.empty(size // 4, dtype=torch.float32, device=device)
        x.fill_(me + 1)  # every element must end as n(n+1)/2
        dist.all_reduce(x, group=group)
        want = ranks * (ranks + 1) / 2
        correct = correct and bool(torch.all(x == want).item())
        for _ in range(warmup):
            dist.all_reduce(x, group=group)
        clock.start()
        for _ in range(iters):
            dist.all_reduce(x, group=group)
        seconds = torch.tensor([clock.stop() / iters], dtype=torch.float64, device=device)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=group)
        t = float(seconds.item())
        rows.append(
            {
                "bytes": size,
                "seconds": t,
                "algbw_gbps": round(size / t / 1e9, 3),
                "busbw_gbps": round(bus_bandwidth(size, t, ranks), 3),
            }
        )
        del x
    return rows, correct


def node_groups(torch: Any, dist: Any, device: Any, group_rank: int) -> Any:
    """This host's processes as a group (every process creates every host's, in order)."""
    parts = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, torch.tensor([group_rank], dtype=torch.int64, device=device))
    nodes = [int(p.item()) for p in parts]
    mine = None
    for node in sorted(set(nodes)):
        ranks = [r for r, n in enumerate(nodes) if n == node]
        group = dist.new_group(ranks)
        if node == group_rank:
            mine = group
    return mine


def nccl_version(torch: Any) -> str:
    """The NCCL torch runs: a tuple (2, 28, 9) in recent torch, an int (22809) before."""
    version = torch.cuda.nccl.version()
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mib", default="8,64,256,1024")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    args = ap.parse_args(argv)
    sizes = [int(s) << 20 for s in args.sizes_mib.split(",")]
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")

    local_rank = int(os.environ["LOCAL_RANK"])
    group_rank = int(os.environ.get("GROUP_RANK", "0"))
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        if not torch.cuda.is_available():
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
            raise RuntimeError(
                f"NCCL needs CUDA: torch {torch.__version__} sees no GPU "
                f"(CUDA_VISIBLE_DEVICES={visible})"
            )
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device, **store_of_run(dist))
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", **store_of_run(dist))
    try:
        inter, ok_inter = sweep(torch, dist, device, None, sizes, args.warmup, args.iters)
        local = node_groups(torch, dist, device, group_rank)
        intra: list[dict[str, Any]] = []
        ok_intra = True
        if dist.get_world_size(local) > 1:
            intra, ok_intra = sweep(torch, dist, device, local, sizes, args.warmup, args.iters)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if local_rank == 0:
        gpu = backend == "nccl"
        report = {
            "rank": int(os.environ.get("RANK", "0")),
            "world": int(os.environ.get("WORLD_SIZE", "1")),
            "group_rank": group_rank,
            "nodes": int(os.environ.get("GROUP_WORLD_SIZE", "1")),
            "local_world": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            "backend": backend,
            "torch": str(torch.__version__),
            "nccl": nccl_version(torch) if gpu else None,
            "device": torch.cuda.get_device_name(device) if gpu else "cpu",
            "correct": ok_inter and ok_intra,
            "inter": inter,
            "intra": intra,
        }
        print(MARK + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--hold-store"]:
        sys.exit(hold_store(sys.argv[2:]))
    sys.exit(main())
