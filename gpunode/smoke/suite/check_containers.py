"""containers: a GPU container runs, or the CDI spec lists every GPU.

With a container image given (one the host already has: nothing is pulled) and docker
installed, `docker run --rm --gpus all IMAGE nvidia-smi -L` must list every GPU; where
docker has no nvidia runtime but the CDI spec is there, the GPUs come in as the CDI
device `nvidia.com/gpu=all`. Without docker or an image, `nvidia-ctk cdi list` must name
`nvidia.com/gpu=<index>` for each GPU and `nvidia.com/gpu=all`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import Timer, emit
else:
    from smokelib import Timer, emit

GPU_LINE = re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")


def gpu_lines(text: str) -> list[str]:
    """The indices `nvidia-smi -L` lists ("GPU 0: NVIDIA H200 (UUID: GPU-...)")."""
    return [m.group(1) for m in map(GPU_LINE.match, text.splitlines()) if m]


def cdi_names(text: str) -> list[str]:
    """The device names `nvidia-ctk cdi list` prints, one a line (its log goes to stderr)."""
    return [ln.strip() for ln in text.splitlines() if re.fullmatch(r"\S+/\S+=\S+", ln.strip())]


def missing_cdi(names: list[str], count: int) -> list[str]:
    want = [f"nvidia.com/gpu={i}" for i in range(count)] + ["nvidia.com/gpu=all"]
    return [w for w in want if w not in names]


def run(argv: list[str]) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} did not answer within 120 s"
    return p.returncode, p.stdout if p.returncode == 0 else (p.stderr or p.stdout).strip()


def expected_count(given: int | None) -> int | None:
    if given is not None:
        return given
    code, out = run(["nvidia-smi", "-L"]) if shutil.which("nvidia-smi") else (1, "")
    return len(gpu_lines(out)) if code == 0 else None


def container_run(image: str, count: int, t: Timer) -> bool:
    """`docker run` the image with every GPU: the nvidia runtime first, else CDI; False
    (the CDI spec is checked instead) when the host does not have the image."""
    have, said = run(["docker", "image", "inspect", image])
    if have != 0:
        last = said.splitlines()[-1] if said else ""
        reason = f"{image} is not on the host (nothing is pulled): {last}"
        emit("containers/run", "skip", reason, seconds=t.seconds)
        return False
    smi = [image, "nvidia-smi", "-L"]
    how = "--gpus all"
    code, out = run(["docker", "run", "--rm", "--gpus", "all", *smi])
    if code != 0 and os.path.exists("/etc/cdi/nvidia.yaml"):
        how = "--device nvidia.com/gpu=all"
        code, out = run(["docker", "run", "--rm", "--device", "nvidia.com/gpu=all", *smi])
    n = len(gpu_lines(out)) if code == 0 else 0
    if code != 0:
        status, reason = "fail", f"docker run {how} {image} failed: {out[-300:]}"
    elif n < count:
        status, reason = "fail", f"the container sees {n} GPUs of {count} ({how})"
    else:
        status, reason = "pass", f"the container sees {n} GPUs ({how}, {image})"
    emit("containers/run", status, reason, value=n, expected=count, unit="GPUs", seconds=t.seconds)
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=None, help="GPUs the inventory declares")
    ap.add_argument("--image", default=None, help="an image the host has, to run")
    args = ap.parse_args()
    t = Timer()
    count = expected_count(args.count)
    if count is None:
        emit("containers", "fail", "nvidia-smi lists no GPU on the host", seconds=t.seconds)
        return 0
    if args.image and shutil.which("docker") and container_run(args.image, count, t):
        return 0
    if not shutil.which("nvidia-ctk"):
        reason = "nvidia-ctk not found: the container toolkit is not installed"
        emit("containers/cdi", "fail", reason, seconds=t.seconds)
        return 0
    code, out = run(["nvidia-ctk", "cdi", "list"])
    names = cdi_names(out) if code == 0 else []
    lost = missing_cdi(names, count)
    if code != 0:
        status, reason = "fail", f"nvidia-ctk cdi list failed: {out[-300:]}"
    elif lost:
        status, reason = "fail", f"the CDI spec lacks {', '.join(lost)}"
    else:
        status, reason = "pass", f"the CDI spec lists {count} GPUs and nvidia.com/gpu=all"
    emit("containers/cdi", status, reason, value=len(names), expected=count + 1,
         unit="devices", seconds=t.seconds, details={"devices": names})  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
