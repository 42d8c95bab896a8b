"""NVSwitches and the fabric state: the parsers on real strings.

The N/A answers are captures from a real H200 machine without NVSwitch
(tests/fixtures/facts/h200-fabric, and the -q text of tests/fixtures/facts/h200-ubuntu2404);
the NVSwitch lspci line is the published one of an HGX H100 board (the same NVSwitch,
10de:22a3, is on HGX H200 boards). No NVSwitch board was at hand: the Completed and
In Progress states are the values NVML documents, in the layout the captures show.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from gpunode.facts.model import Fabric, GpuFabric, HostFacts, Package
from gpunode.facts.parse import parse_fabric, parse_facts

FIX = Path(__file__).parent.parent / "fixtures" / "facts"
SCRIPT = Path(__file__).parent.parent.parent / "gpunode" / "facts" / "script.sh"

HGX_LSPCI = """\
0000:07:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)
0000:08:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)
0000:1b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)
"""
HGX_PCI = """\
0000:07:00.0 0x10de 0x22a3 0x068000
0000:08:00.0 0x10de 0x22a3 0x068000
0000:1b:00.0 0x10de 0x2335 0x030200
"""
# An nForce chipset's NVIDIA bridge (old desktops): class 0680 too, but no NVSwitch.
MCP_LSPCI = "0000:00:07.0 Bridge [0680]: nVidia Corporation MCP61 Ethernet [10de:03ef] (rev a2)\n"


def facts(**sections: str) -> HostFacts:
    text = "".join(f"### {k.replace('_', '-')}\n{v}\n" for k, v in sections.items())
    return parse_facts(text + "### end\n")


def test_query_answer_of_a_real_h200_without_fabric() -> None:
    text = (FIX / "h200-fabric" / "fabric-query.txt").read_text()
    fabric = parse_fabric(text.replace("rc=0", ""))
    assert fabric == Fabric(gpus=[GpuFabric(bus_id="00000000:00:06.0", state="N/A", status="N/A")])
    assert not fabric.completed


def test_the_scripts_awk_reads_the_real_q_text() -> None:
    """The awk program of script.sh's fabric section, run on a real `nvidia-smi -q`."""
    section = SCRIPT.read_text().split("section fabric", 1)[1]
    program = re.search(r"awk '([^']*)'", section)
    assert program is not None
    q = (FIX / "h200-ubuntu2404" / "nvidia-smi-q.txt").read_text()
    out = subprocess.run(["awk", program.group(1)], input=q, capture_output=True, text=True)
    assert out.stdout == (FIX / "h200-fabric" / "fabric-q.txt").read_text()
    fabric = parse_fabric(out.stdout)
    assert [(g.bus_id, g.state, g.status) for g in fabric.gpus] == [
        ("00000000:00:06.0", "N/A", "N/A")
    ]


def test_completed_only_when_every_gpu_registered() -> None:
    done = "00000000:00:06.0, Completed, Success\n00000000:00:07.0, Completed, Success\n"
    assert parse_fabric(done).completed
    waiting = done.replace("07.0, Completed, Success", "07.0, In Progress, N/A")
    assert not parse_fabric(waiting).completed
    q_form = "GPU 00000000:00:06.0\n        State   : In Progress\n        Status  : N/A\n"
    assert parse_fabric(q_form).gpus == [
        GpuFabric(bus_id="00000000:00:06.0", state="In Progress", status="N/A")
    ]
    assert not Fabric().completed  # nothing read is not completed


def test_nvidia_smi_failing_is_an_error() -> None:
    said = (
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"
    )
    fabric = parse_fabric(said)
    assert (
        fabric.gpus == []
        and fabric.error == "Failed to initialize NVML: Driver/library version mismatch"
    )
    # an nvidia-smi without the fields: its refusal, then -q's lines
    old = 'Field "fabric.state" is not a valid field to query.\n\nGPU 00000000:00:06.0\n'
    old += "        State   : Completed\n        Status  : Success\n"
    assert parse_fabric(old).completed and parse_fabric(old).error is None


def test_nvswitches_from_sysfs_and_lspci() -> None:
    f = facts(pci=HGX_PCI, lspci=HGX_LSPCI)
    assert [(s.slot, s.device_id) for s in f.nvswitches] == [
        ("0000:07:00.0", "22a3"),
        ("0000:08:00.0", "22a3"),
    ]
    assert "[H100 NVSwitch]" in f.nvswitches[0].description
    assert [g.slot for g in f.pci_gpus] == ["0000:1b:00.0"]  # bridges are not GPUs
    # no sysfs (a container): lspci alone
    assert len(facts(lspci=HGX_LSPCI).nvswitches) == 2
    # a newer NVSwitch whose id gpunode does not know: lspci's name says it
    newer = HGX_LSPCI.replace("22a3", "2901").replace("H100 NVSwitch", "B200 NVSwitch")
    assert len(facts(pci=HGX_PCI.replace("22a3", "2901"), lspci=newer).nvswitches) == 2


def test_an_old_chipsets_nvidia_bridge_is_no_nvswitch() -> None:
    f = facts(pci="0000:00:07.0 0x10de 0x03ef 0x068000\n", lspci=MCP_LSPCI)
    assert f.nvswitches == []


def test_a_real_h200_machine_has_no_nvswitch() -> None:
    """The 1x H200 machine's bus: the GPU alone. (The 2x one, a VM given two GPUs of an
    NVSwitch board, reports fabric Completed, set up outside the VM, and no NVSwitch.)"""
    pci = (FIX / "h200-fabric" / "pci.txt").read_text()
    query = (FIX / "h200-fabric" / "fabric-query.txt").read_text()
    f = facts(pci=pci, fabric=query.replace("rc=0", ""))
    assert [g.device_id for g in f.pci_gpus] == ["2335"] and f.nvswitches == []
    assert f.fabric.gpus[0].state == "N/A"


def test_installed_fabricmanager_of_any_branch() -> None:
    f = HostFacts(
        packages={
            "nvidia-fabricmanager-580": Package(
                name="nvidia-fabricmanager-580", version="580.95.05-1"
            ),
            "nvidia-fabricmanager-dev-580": Package(
                name="nvidia-fabricmanager-dev-580", version="1"
            ),
        }
    )
    assert f.fabricmanager is not None and f.fabricmanager.version == "580.95.05-1"
    assert HostFacts().fabricmanager is None


def test_facts_view_shows_the_fabric_and_a_fabric_manager_left_behind() -> None:
    from gpunode.facts.model import KernelModule
    from gpunode.views.facts import render

    f = facts(pci=HGX_PCI, lspci=HGX_LSPCI, fabric="00000000:1b:00.0, In Progress, N/A\n")
    f.module = KernelModule(loaded=True, version="580.95.05", flavor="open")
    f.packages["nvidia-fabricmanager-580"] = Package(
        name="nvidia-fabricmanager-580", version="580.65.06-1", status="hold ok installed"
    )
    text = " ".join(render("hgx1", f).split())  # the label column's width is the view's
    assert "nvswitches 2: 0000:07:00.0, 0000:08:00.0" in text
    assert "fabric In Progress, N/A (1 GPUs)" in text
    assert (
        "fabric manager nvidia-fabricmanager-580 580.65.06-1 (held): not the loaded module's"
        " release 580.95.05"
    ) in text
    assert "nvswitches" not in render(
        "h200", facts(pci=(FIX / "h200-fabric" / "pci.txt").read_text())
    )
