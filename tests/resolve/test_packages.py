"""The one version policy (gpunode.resolve.packages) for every package component: cuDNN and
NCCL now have `update` and `hold` as TensorRT and the container toolkit do."""

from __future__ import annotations

from typing import Any

import pytest

from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host
from gpunode.resolve.resolver import resolve

WHERE = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
OFFERED = {
    "libcudnn9-cuda-12": ["9.8.0.87-1", "9.10.2.21-1", "9.14.0.64-1"],
    "libnccl2": ["2.21.5-1+cuda12.4", "2.26.2-1+cuda12.8", "2.26.5-1+cuda12.9"],
}


class Index:
    where = WHERE
    how = "Packages, fetched"

    def versions(self, name: str) -> list[str]:
        return list(OFFERED.get(name, []))

    def names(self) -> list[str]:
        return sorted(OFFERED)


def host(**stack: Any) -> Host:
    stack = {"cuda": {"toolkits": ["12.8"]}, **stack}
    return Host.model_validate({"name": "h", "address": "192.0.2.1", "stack": stack})


def facts(**installed: str) -> HostFacts:
    pkgs = {n: {"name": n, "version": v} for n, v in installed.items()}
    pkgs["cuda-toolkit-12-8"] = {"name": "cuda-toolkit-12-8", "version": "12.8.1-1"}
    return HostFacts.model_validate({"packages": pkgs})


@pytest.mark.parametrize(("update", "want"), [("keep", "9.10.2.21-1"), ("latest", "9.14.0.64-1")])
def test_cudnn_update_latest_moves_an_installed_one(update: str, want: str) -> None:
    h = host(cudnn={"version": "9", "update": update})
    pin = resolve(h, facts(**{"libcudnn9-cuda-12": "9.10.2.21-1"}), Index, None).cudnn
    assert pin is not None and pin.version == want
    assert pin.packages == ("libcudnn9-cuda-12", "libcudnn9-dev-cuda-12")
    assert pin.hold == ("libcudnn9-cuda-12",)  # the runtime alone, as before


def test_nccl_hold_is_declared_not_hard_coded() -> None:
    held = resolve(host(nccl="2.26"), facts(), Index, None).nccl
    unheld = resolve(host(nccl={"version": "2.26", "hold": False}), facts(), Index, None).nccl
    assert held is not None and unheld is not None
    assert held.version == unheld.version == "2.26.2-1+cuda12.8"  # the build that fits 12.8
    assert held.hold == ("libnccl2", "libnccl-dev") and unheld.hold == ()


def test_an_exact_version_cannot_move() -> None:
    with pytest.raises(ValueError, match="exact version cannot move"):
        host(nccl={"version": "2.26.2-1+cuda12.8", "update": "latest"})
