"""Scale benchmark: 100 hosts x 8 GPUs at 1 Hz into the real GPU view, headless.

A feeder thread does what the sampler threads do (parse nvidia-smi CSV lines,
write the board), spread evenly over each second; the app redraws on its own
timer. Reports the process's CPU time (app + feeder) per wall second, and how
long each view refresh took.

    python bench/tui_scale.py --hosts 100 --gpus 8 --seconds 20 --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import threading
import time

from gpunode.monitor import Board
from gpunode.monitor.parse import parse_gpu_line
from gpunode.tui.app import GpunodeApp
from gpunode.tui.gpu_view import GpuView


def csv_line(gpu: int, tick: int, host_no: int) -> str:
    util = (tick * 7 + gpu * 13 + host_no * 3) % 101
    return (
        f"{gpu}, NVIDIA H200, GPU-{host_no:04d}-{gpu}, {util}, {1024 + tick % 512}, 143771,"
        f" {36 + util // 5}, {83.46 + 6 * util:.2f}, 700.00, {1980 if util > 5 else 345},"
        " 580.159.04"
    )


def feeder(board: Board, hosts: list[str], gpus: int, stop: threading.Event) -> None:
    """Every host sends its GPUs once a second; hosts are spread over the second."""
    slots = 20
    tick = 0
    start = time.monotonic()
    while not stop.is_set():
        for slot in range(slots):
            for hn in range(slot, len(hosts), slots):
                now = time.time()
                samples = [
                    parse_gpu_line(csv_line(g, tick, hn), hosts[hn], now) for g in range(gpus)
                ]
                board.add_samples(hosts[hn], [s for s in samples if s is not None])
            target = start + tick + (slot + 1) / slots
            stop.wait(max(0.0, target - time.monotonic()))
            if stop.is_set():
                return
        tick += 1


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def one_run(
    n_hosts: int, gpus: int, seconds: float, mode: str, interval: float
) -> dict[str, float]:
    hosts = [f"gpu-{i:03d}" for i in range(n_hosts)]
    board = Board(hosts)
    app = GpunodeApp(mode="top", board=board, gpu_interval=interval)
    stop = threading.Event()
    ticks: list[float] = []
    async with app.run_test(size=(200, 60)) as pilot:
        view = app.query_one(GpuView)
        original = view.refresh_data

        def timed(full: bool = False) -> None:
            t = time.perf_counter()
            original(full)
            ticks.append(time.perf_counter() - t)

        view.refresh_data = timed  # type: ignore[method-assign]
        feed = threading.Thread(target=feeder, args=(board, hosts, gpus, stop), daemon=True)
        feed.start()
        await pilot.pause(2.0)  # warm up: first rows, column layout
        if not board.view(hosts[0]).gpus:  # a line the parser refuses would measure nothing
            raise SystemExit(f"the board got no sample from {csv_line(0, 0, 0)!r}")
        if mode == "host":
            await pilot.press("o")
        ticks.clear()
        c0, w0 = cpu(), time.monotonic()
        cells0 = view.cells_written
        # Keys still answer under load: time a sort change end to end.
        await pilot.pause(seconds / 2)
        k0 = time.perf_counter()
        await pilot.press("s")
        key_ms = (time.perf_counter() - k0) * 1000
        await pilot.pause(seconds / 2)
        c1, w1 = cpu(), time.monotonic()
        cells = view.cells_written - cells0
        stop.set()
        feed.join()
    return {
        "cores": (c1 - c0) / (w1 - w0),
        "tick_ms_median": statistics.median(ticks) * 1000,
        "tick_ms_max": max(ticks) * 1000,
        "key_ms": key_ms,
        "cells_per_s": cells / (w1 - w0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mode", choices=("lab", "host"), default="lab")
    ap.add_argument("--interval", type=float, default=0.5, help="view refresh period (s)")
    args = ap.parse_args()
    results = []
    for i in range(args.runs):
        r = asyncio.run(one_run(args.hosts, args.gpus, args.seconds, args.mode, args.interval))
        results.append(r)
        print(f"run {i + 1}: " + "  ".join(f"{k}={v:.3f}" for k, v in r.items()), flush=True)
    print(
        "median: "
        + "  ".join(f"{k}={statistics.median(r[k] for r in results):.3f}" for k in results[0])
    )


if __name__ == "__main__":
    main()
