"""torch: CUDA visible, matmul TFLOP/s, device copy bandwidth, cuDNN, a mixed-precision step.

Timings use CUDA events around repeated runs after a warm-up and report the
median, so a first-call cuBLAS/cuDNN set-up or a clock ramp does not count.
The CPU matmul runs everywhere, so a CPU-only build still proves it computes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import NO_GPU, Timer, emit, gpu_device_present
else:
    from smokelib import NO_GPU, Timer, emit, gpu_device_present

MATMUL_N = 8192  # 2*N^3 = 1.1 TFLOP per product: long enough to swamp launch overhead
MATMUL_WARMUP, MATMUL_REPEATS = 3, 10
COPY_BYTES = 1 << 30  # well past the 50-60 MB L2 of current data-centre parts
COPY_WARMUP, COPY_REPEATS = 3, 20
CPU_N = 1024  # the speed-up matmul, small so the CPU side stays under a second


def cuda_unavailable_reason(torch: Any) -> str:
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None)"
    if not gpu_device_present():
        return f"torch.cuda.is_available() is False: {NO_GPU} (/dev/nvidiactl missing)"
    try:
        torch.cuda.init()
    except Exception as exc:  # the driver's own words say why (too old, mismatch...)
        return f"torch.cuda.is_available() is False: {exc}"
    return "torch.cuda.is_available() is False"


def gpu_seconds(torch: Any, fn: Callable[[], object], warmup: int, repeats: int) -> float:
    """Median seconds of one `fn()` on the current GPU, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples: list[float] = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return statistics.median(samples)


def cpu_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def cpu_matmul(torch: Any) -> float:
    t = Timer()
    a = torch.randn(CPU_N, CPU_N)
    b = torch.randn(CPU_N, CPU_N)
    secs = cpu_seconds(lambda: a @ b, 3)
    # Checked against a product computed another way: a matmul that returns garbage fast
    # must not pass.
    c = a @ b
    ref = (a[:8].unsqueeze(2) * b.unsqueeze(0)).sum(1)
    ok = bool(torch.allclose(c[:8], ref, rtol=1e-3, atol=1e-2))
    gflops = 2 * CPU_N**3 / secs / 1e9
    emit(
        "torch/cpu-matmul",
        "pass" if ok else "fail",
        f"fp32 {CPU_N}^3 on {torch.get_num_threads()} CPU threads"
        + ("" if ok else ": result differs from the reference"),
        value=round(gflops, 2),
        unit="GFLOP/s",
        seconds=t.seconds,
        details={"n": CPU_N, "seconds": secs, "threads": torch.get_num_threads()},
    )
    return secs


def matmul(torch: Any, dtype_name: str, gpu_name: str) -> None:
    t = Timer()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype_name]
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        secs = gpu_seconds(torch, lambda: a @ b, MATMUL_WARMUP, MATMUL_REPEATS)
        tflops = 2 * MATMUL_N**3 / secs / 1e12
        status, reason = "pass", f"{MATMUL_N}^3, median of {MATMUL_REPEATS}"
    except Exception as exc:
        tflops, status, reason = None, "fail", f"{type(exc).__name__}: {exc}"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    emit(
        f"torch/matmul-{dtype_name}",
        status,
        reason,
        value=None if tflops is None else round(tflops, 1),
        unit="TFLOP/s",
        seconds=t.seconds,
        details={"metric": f"{dtype_name}_tflops", "gpu": gpu_name, "n": MATMUL_N},
    )


def copy_bandwidth(torch: Any, gpu_name: str) -> None:
    t = Timer()
    try:
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        secs = gpu_seconds(torch, lambda: dst.copy_(src), COPY_WARMUP, COPY_REPEATS)
        ok = bool(torch.equal(dst, src))
        tbs = 2 * COPY_BYTES / secs / 1e12  # every byte is read once and written once
        status = "pass" if ok else "fail"
        reason = f"{COPY_BYTES >> 20} MiB copied, read+write counted" + (
            "" if ok else "; the copy differs from its source"
        )
    except Exception as exc:
        tbs, status, reason = None, "fail", f"{type(exc).__name__}: {exc}"
    emit(
        "torch/copy",
        status,
        reason,
        value=None if tbs is None else round(tbs, 3),
        unit="TB/s",
        seconds=t.seconds,
        details={"metric": "copy_tbs", "gpu": gpu_name, "bytes": COPY_BYTES},
    )


def cudnn_conv(torch: Any) -> None:
    t = Timer()
    F = torch.nn.functional
    if not torch.backends.cudnn.is_available():
        emit(
            "torch/cudnn-conv",
            "fail",
            "torch.backends.cudnn.is_available() is False",
            seconds=t.seconds,
        )
        return
    try:
        torch.backends.cudnn.allow_tf32 = False  # so the CPU reference can match closely
        x = torch.randn(4, 16, 32, 32)
        w = torch.randn(32, 16, 3, 3)
        want = F.conv2d(x, w, padding=1)
        got = F.conv2d(x.cuda(), w.cuda(), padding=1).cpu()
        ok = bool(torch.allclose(got, want, rtol=1e-3, atol=1e-3))
        # A ResNet-sized bf16 layer for a throughput figure.
        xb = torch.randn(64, 256, 56, 56, device="cuda", dtype=torch.bfloat16)
        wb = torch.randn(256, 256, 3, 3, device="cuda", dtype=torch.bfloat16)
        xb = xb.to(memory_format=torch.channels_last)
        wb = wb.to(memory_format=torch.channels_last)
        secs = gpu_seconds(torch, lambda: F.conv2d(xb, wb, padding=1), 3, 10)
        tflops = 2 * 64 * 256 * 56 * 56 * 256 * 9 / secs / 1e12
        status = "pass" if ok else "fail"
        reason = (
            f"cuDNN {torch.backends.cudnn.version()}: fp32 conv matches the CPU; "
            "bf16 3x3 256->256 on 64x56x56"
        )
        if not ok:
            reason = "cuDNN convolution differs from the CPU reference"
    except Exception as exc:
        tflops, status, reason = None, "fail", f"{type(exc).__name__}: {exc}"
    finally:
        torch.backends.cudnn.allow_tf32 = True
    emit(
        "torch/cudnn-conv",
        status,
        reason,
        value=None if tflops is None else round(tflops, 1),
        unit="TFLOP/s",
        seconds=t.seconds,
        details={"cudnn": torch.backends.cudnn.version()},
    )


def amp_train_step(torch: Any, device: str = "cuda", hidden: int = 4096) -> None:
    """A few optimiser steps of a small MLP under autocast; the loss must fall and stay finite."""
    t = Timer()
    nn = torch.nn
    try:
        torch.manual_seed(0)
        bf16 = device == "cpu" or torch.cuda.is_bf16_supported()
        dtype = torch.bfloat16 if bf16 else torch.float16
        model = nn.Sequential(nn.Linear(1024, hidden), nn.GELU(), nn.Linear(hidden, 1))
        model = model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        # GradScaler only for fp16: bf16 has fp32's range, so gradients do not underflow.
        scaler = torch.amp.GradScaler(device, enabled=not bf16)
        x = torch.randn(512, 1024, device=device)
        y = x[:, :8].sum(1, keepdim=True)
        losses = []
        for _ in range(30):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=dtype):
                loss = nn.functional.mse_loss(model(x).float(), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(float(loss.detach()))
        finite = all(v == v and abs(v) != float("inf") for v in losses)
        fell = losses[-1] < 0.5 * losses[0]
        status = "pass" if finite and fell else "fail"
        reason = (
            f"{'bf16' if bf16 else 'fp16 + GradScaler'} autocast, 30 AdamW steps, "
            f"loss {losses[0]:.3g} -> {losses[-1]:.3g}"
        )
        if not finite:
            reason = "loss became NaN or inf: " + reason
        elif not fell:
            reason = "loss did not fall by half: " + reason
        value = round(losses[-1] / losses[0], 4)
    except Exception as exc:
        status, reason, value = "fail", f"{type(exc).__name__}: {exc}", None
    emit("torch/amp-train", status, reason, value=value, unit="loss ratio", seconds=t.seconds)


def speedup(torch: Any, cpu_secs: float) -> None:
    t = Timer()
    a = torch.randn(CPU_N, CPU_N, device="cuda")
    b = torch.randn(CPU_N, CPU_N, device="cuda")
    secs = gpu_seconds(torch, lambda: a @ b, 3, 20)
    ratio = cpu_secs / secs
    status = "pass" if ratio > 1 else "fail"
    reason = f"fp32 {CPU_N}^3: CPU {cpu_secs * 1e3:.2f} ms, GPU {secs * 1e3:.3f} ms"
    if ratio <= 1:
        reason = "the GPU is not faster than the CPU: " + reason
    emit("torch/gpu-speedup", status, reason, value=round(ratio, 1), unit="x", seconds=t.seconds)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("all", "matmul"), default="all")
    ap.add_argument("--count", type=int, default=None, help="GPUs the inventory declares")
    args = ap.parse_args()
    t = Timer()
    try:
        import torch
    except ImportError as exc:
        emit("torch", "skip", f"torch is not importable here: {exc}", seconds=t.seconds)
        return 0
    if getattr(torch, "STAND_IN", False):
        # gpunode lab's stand-in wheel: it installs like torch but computes nothing
        emit(
            "torch",
            "skip",
            f"torch {torch.__version__} here is gpunode lab's stand-in: nothing to compute",
            seconds=t.seconds,
            details={"torch": torch.__version__, "cuda": torch.version.cuda},
        )
        return 0
    return run(torch, args.part, args.count)


def run(torch: Any, part: str, count: int | None) -> int:
    t = Timer()
    cpu_secs = cpu_matmul(torch)
    if not torch.cuda.is_available():
        emit(
            "torch/cuda",
            "skip",
            cuda_unavailable_reason(torch),
            seconds=t.seconds,
            details={"torch": torch.__version__, "cuda": torch.version.cuda},
        )
        return 0
    n = torch.cuda.device_count()
    names = [torch.cuda.get_device_name(i) for i in range(n)]
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "names": names,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": None,
    }
    with contextlib.suppress(Exception):  # a build without NCCL
        info["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
    status, reason = (
        "pass",
        (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees {n}: {', '.join(names)}"),
    )
    if count is not None and n < count:
        status, reason = "fail", f"torch sees {n} GPUs, the inventory expects {count}"
    emit(
        "torch/cuda",
        status,
        reason,
        value=n,
        expected=count,
        unit="GPUs",
        seconds=t.seconds,
        details=info,
    )
    gpu_name = names[0]
    for dtype_name in ("bf16", "fp16", "tf32"):
        matmul(torch, dtype_name, gpu_name)
    speedup(torch, cpu_secs)
    if part == "all":
        copy_bandwidth(torch, gpu_name)
        cudnn_conv(torch)
        amp_train_step(torch)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
    raise SystemExit(main())
