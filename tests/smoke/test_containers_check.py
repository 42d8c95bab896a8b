"""The containers smoke test's readers: `nvidia-smi -L` lines and `nvidia-ctk cdi list`."""

from __future__ import annotations

import sys
from pathlib import Path

from gpunode.smoke import suite

# the suite's scripts import smokelib beside them, as they do on a host
sys.path.insert(0, str(Path(suite.__file__).parent))
from gpunode.smoke.suite.check_containers import cdi_names, gpu_lines, missing_cdi

SMI_L = (
    "GPU 0: NVIDIA H200 (UUID: GPU-b0e8c9c4-49e6-4d7e-9a0b-0c1d2e3f4a5b)\n"
    "GPU 1: NVIDIA H200 (UUID: GPU-c1f9dad5-5af7-4e8f-8b1c-1d2e3f4a5b6c)\n"
)
CDI_LIST = (
    "nvidia.com/gpu=0\nnvidia.com/gpu=1\n"
    "nvidia.com/gpu=GPU-b0e8c9c4-49e6-4d7e-9a0b-0c1d2e3f4a5b\nnvidia.com/gpu=all\n"
)


def test_gpu_lines() -> None:
    assert gpu_lines(SMI_L) == ["0", "1"]
    assert gpu_lines("No devices were found\n") == []
    assert gpu_lines("GPU 0: NVIDIA H200\n") == []  # no UUID: not nvidia-smi -L's shape


def test_cdi_names_skip_log_lines() -> None:
    text = "INFO[0000] Found 4 CDI devices\n" + CDI_LIST
    assert cdi_names(text) == CDI_LIST.split()


def test_missing_cdi() -> None:
    names = cdi_names(CDI_LIST)
    assert missing_cdi(names, 2) == []
    assert missing_cdi(names, 3) == ["nvidia.com/gpu=2"]
    assert missing_cdi(["nvidia.com/gpu=0"], 1) == ["nvidia.com/gpu=all"]
