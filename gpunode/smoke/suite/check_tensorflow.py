"""tensorflow: GPUs listed, memory growth set, a matmul placed on the GPU and checked."""

from __future__ import annotations

import importlib
import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import NO_GPU, Timer, emit, gpu_device_present
else:
    from smokelib import NO_GPU, Timer, emit, gpu_device_present

N = 4096


def main() -> int:
    t = Timer()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep its start-up chatter off stderr
    try:
        tf: Any = importlib.import_module("tensorflow")
    except ImportError as exc:
        emit("tensorflow", "skip", f"tensorflow is not importable here: {exc}", seconds=t.seconds)
        return 0
    gpus = tf.config.list_physical_devices("GPU")
    info = {
        "tensorflow": tf.__version__,
        "built_with_cuda": tf.test.is_built_with_cuda(),
        "gpus": [g.name for g in gpus],
    }
    if not gpus:
        why = NO_GPU if not gpu_device_present() else "tensorflow lists no GPU"
        if not tf.test.is_built_with_cuda():
            why = f"tensorflow {tf.__version__} is built without CUDA"
        emit("tensorflow/gpus", "skip", why, value=0, unit="GPUs", seconds=t.seconds, details=info)
        return 0
    try:
        # Must come before the GPUs are initialised; otherwise TF takes all their memory.
        for g in gpus:
            tf.config.experimental.set_memory_growth(g, True)
        growth = all(tf.config.experimental.get_memory_growth(g) for g in gpus)
    except RuntimeError as exc:
        growth = False
        info["memory_growth_error"] = str(exc)
    emit(
        "tensorflow/gpus",
        "pass" if growth else "warn",
        f"tensorflow {tf.__version__} lists {len(gpus)}"
        + ("; memory growth set" if growth else "; memory growth could not be set"),
        value=len(gpus),
        unit="GPUs",
        seconds=t.seconds,
        details=info,
    )

    t = Timer()
    try:
        with tf.device("/GPU:0"):
            a = tf.random.normal((N, N))
            b = tf.random.normal((N, N))
            c = tf.matmul(a, b)
            _ = c.numpy()  # the first run also builds the kernels; time the next ones
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                tf.matmul(a, b).numpy()
                samples.append(time.perf_counter() - t0)
        on_gpu = "GPU" in c.device
        # One row checked against numpy: the GPU's answer, not just its speed.
        want = a[:1].numpy() @ b.numpy()
        ok = on_gpu and bool(abs(c[:1].numpy() - want).max() < 1e-2 * max(1.0, abs(want).max()))
        secs = sorted(samples)[len(samples) // 2]
        tflops = 2 * N**3 / secs / 1e12
        reason = f"fp32 {N}^3 on {c.device}, checked against numpy (includes the copy back)"
        if not on_gpu:
            reason = f"the matmul ran on {c.device}, not on a GPU"
        elif not ok:
            reason = "the GPU matmul differs from numpy's"
        emit(
            "tensorflow/matmul",
            "pass" if ok else "fail",
            reason,
            value=round(tflops, 2),
            unit="TFLOP/s",
            seconds=t.seconds,
        )
    except Exception as exc:
        emit("tensorflow/matmul", "fail", f"{type(exc).__name__}: {exc}", seconds=t.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
