"""Version specs against a real H200 machine's facts (tests/fixtures/hardware/
h200x1-versions: `gpunode facts --json` there, and what `gpunode plan` said there)."""

from __future__ import annotations

import json
from pathlib import Path

from gpunode.facts.model import HostFacts
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import catalog, host_from, plan_host

HERE = Path(__file__).parent.parent / "fixtures" / "hardware" / "h200x1-versions"
FACTS = HostFacts.model_validate(
    json.loads((HERE / "facts.json").read_text())["hosts"]["gpu-local"]["facts"]
)


def inventory(repos: str, *stack: str) -> str:
    lines = "\n".join(f"      {s}" for s in stack)
    return (
        "hosts:\n  gpu-local:\n    connection: local\n    become: none\n"
        f"    repos: {repos}\n    stack:\n{lines}\n"
    )


UNMANAGED = "{nvidia: null}"
TK = 'cuda: {toolkits: ["13.0"]}'
UU_BLACKLIST = "/etc/apt/apt.conf.d/51gpunode-unattended-upgrades"


def untouched() -> Catalog:
    raise AssertionError("a converged host needs no index")


def test_the_machine_as_it_is_needs_no_index_and_only_the_upgrade_blacklist() -> None:
    """The capture predates gpunode's unattended-upgrades blacklist: that file alone is new."""
    for stack in (
        ('driver: {branch: "580", flavor: open}', TK, 'cudnn: "9"', 'nccl: "2.28"'),
        ('driver: {version: "580.159.04", flavor: open}', TK, 'cudnn: "9.14.0.64-1"',
         'nccl: "2.28.3-1+cuda13.0"'),
    ):  # fmt: skip
        host = host_from(inventory(UNMANAGED, *stack), "gpu-local")
        plan = plan_host(host, FACTS, probes={"systemd": False}, catalog=untouched)
        assert plan.refused is None, plan
        assert [c.path for c in plan.changes] == [UU_BLACKLIST], plan
    # the same answer the real machine gave
    assert (HERE / "plans.txt").read_text().count("gpu-local: nothing to do") == 2


def test_cudnn_9_10_with_9_14_installed_is_not_a_match() -> None:
    """Once planned as "nothing to do": now refused (nothing to install it from) or a
    downgrade from the repository."""
    host = host_from(inventory(UNMANAGED, TK, 'cudnn: "9.10"'), "gpu-local")
    plan = plan_host(host, FACTS, probes={"systemd": False})
    assert plan.refused is not None
    assert plan.refused.startswith("stack.cudnn: cuDNN 9.10 for CUDA 13.0 is not installed")
    assert f"gpu-local: refused: {plan.refused}" in (HERE / "plans.txt").read_text()
    nvidia = "{nvidia: https://developer.download.nvidia.com/compute/cuda/repos}"
    host = host_from(inventory(nvidia, TK, 'cudnn: "9.12"'), "gpu-local")
    plan = plan_host(host, FACTS, probes={"systemd": False}, catalog=catalog)
    # the machine's image held libcudnn9-cuda-13, not gpunode: a downgrade needs the flag
    assert plan.refused is not None
    assert "libcudnn9-cuda-13 held by the admin" in plan.refused
    assert "--allow-change-held" in plan.refused
    plan = plan_host(
        host, FACTS, probes={"systemd": False}, catalog=catalog, allow_change_held=True
    )
    assert plan.refused is None
    cmds = " ".join(s.command for c in plan.changes for s in c.steps)
    assert "libcudnn9-cuda-13=9.12.0.46-1" in cmds
    assert any("downgrade from 9.14.0.64-1" in n for n in plan.notes)
