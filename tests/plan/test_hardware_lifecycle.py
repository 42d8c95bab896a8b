"""The driver lifecycle's facts as a real H200 machine reported them
(tests/fixtures/hardware/h200x1-lifecycle, made there by bench/hardware-lifecycle.sh: its
`gpunode facts --json`, `plan` and `top --once --json`), and the plan gpunode makes of them."""

from __future__ import annotations

import json
from pathlib import Path

from gpunode.facts.model import HostFacts
from gpunode.views.schemas import validate
from tests.plan.planhelpers import host_from, plan_host

HERE = Path(__file__).parent.parent / "fixtures" / "hardware" / "h200x1-lifecycle"
DOC = json.loads((HERE / "facts.json").read_text())
FACTS = HostFacts.model_validate(DOC["hosts"]["gpu-local"]["facts"])


def test_the_captured_outputs_are_in_their_envelopes() -> None:
    assert (DOC["kind"], DOC["schema"]) == ("facts", 1)
    validate("facts", (HERE / "facts.json").read_text())
    validate("plan", (HERE / "plan.json").read_text())
    sample = (HERE / "top.json").read_text().splitlines()[0]
    assert validate("top-sample", sample) is not None
    assert json.loads(sample)["gpus"][0]["driver"] == "580.159.04"


def test_a_machine_without_kernel_trees_or_dkms_reads_as_such() -> None:
    """A container-like host: the module comes from outside, no /lib/modules, no dkms."""
    assert FACTS.module.version == "580.159.04"
    assert FACTS.kernels.installed == [] and FACTS.kernels.next_boot is None
    assert FACTS.dkms == [] and FACTS.gpu_processes == [] and FACTS.gpunode_holds == []
    assert "persistence on" in (HERE / "facts.txt").read_text()


def test_its_own_stack_plans_only_the_upgrade_blacklist_as_it_did_there() -> None:
    """No headers, no DKMS check, no busy refusal and no reboot for a driver that is
    already loaded; the admin's holds on cuDNN and NCCL are not touched."""
    host = host_from((HERE / "inventory.yaml").read_text(), "gpu-local")
    plan = plan_host(host, FACTS, probes={"systemd": False})
    assert plan.refused is None, plan
    assert [(c.role, c.op) for c in plan.changes] == [("unattended_upgrades", "template")]
    real = (HERE / "plan.txt").read_text()
    assert "1 change pending on 1 host" in real and "[plan exit 7]" in real
    assert "/etc/apt/apt.conf.d/51gpunode-unattended-upgrades missing" in real
