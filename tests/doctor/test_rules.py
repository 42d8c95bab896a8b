"""The doctor's rules over recorded outputs: the real H200 captures are healthy; real-format
kernel lines and `nvidia-smi -q` blocks with one value changed give each finding, its
severity, its evidence line and its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Finding, health
from gpunode.doctor.probe import kernel_lines, parse_probe
from gpunode.doctor.rules import RULES, diagnose
from gpunode.facts.model import CondaEnvFacts, Disk, DkmsModule, HostFacts
from gpunode.facts.parse import parse_facts
from gpunode.inventory.model import Host

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SMI_Q = (FIX / "facts" / "h200-ubuntu2404" / "nvidia-smi-q.txt").read_text()
FACTS = (FIX / "facts" / "h200x2-ubuntu2404" / "facts-assembled.txt").read_text()

# Real kernel lines: NVIDIA/open-gpu-kernel-modules issue 1151 (Xid 79 and the bus line);
# stas00/ml-engineering compute/accelerator/nvidia/debug.md (Xid 63); NVIDIA's Xid catalog
# https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html names the codes.
XID_79 = "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
BUS = "May 18 19:02:39 kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus."
XID_63 = ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
          "remapping, reset gpu to activate.")  # fmt: skip


def probe_text(smi_q: str = SMI_Q, klog: str = "", login: str | None = None,
               ldconfig: str | None = None) -> str:  # fmt: skip
    parts = [f"### kernel-log\n{klog}", f"### smi-q\n{smi_q}\nrc=0"]
    if ldconfig is not None:
        parts.append(f"### ldconfig\n{ldconfig}")
    if login is not None:
        parts.append(f"### login-shell\n{login}")
    return "\n".join(parts) + "\n### end\n"


def host(**kw: object) -> Host:
    return Host.model_validate({"name": "gpu-01", "connection": "local", **kw})


def run(facts: HostFacts | None = None, h: Host | None = None, **probe: str) -> list[Finding]:
    f = facts if facts is not None else parse_facts(FACTS)
    return diagnose(Inputs(h or host(), f, parse_probe(probe_text(**probe))))  # type: ignore[arg-type]


def one(findings: list[Finding], rule: str) -> Finding:
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, findings
    return hits[0]


def test_the_real_h200_captures_are_healthy() -> None:
    findings = run(h=host(gpus={"count": 1}))
    assert health(findings) == "healthy", findings


def test_rule_ids_are_unique_and_named_by_subject() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(i.split(".")[0] in {"driver", "gpu", "cuda", "disk"} for i in ids)


def test_xid_79_and_the_bus_line_are_errors_with_their_lines() -> None:
    findings = run(klog=f"dmesg {XID_79}\ndmesg {BUS}")
    x = one(findings, "gpu.xid")
    assert (x.severity, x.evidence) == ("error", XID_79)
    assert "fallen off the bus" in x.title and "reboot" in x.fix
    bus = one(findings, "gpu.fallen-off-bus")
    assert (bus.severity, bus.evidence) == ("error", BUS)


def test_xid_63_is_a_warning_to_reset() -> None:
    x = one(run(klog=f"dmesg {XID_63}"), "gpu.xid")
    assert x.severity == "warning" and "reset the GPU" in x.fix and x.evidence == XID_63


def test_kern_log_keeps_this_boot_only_and_each_message_once() -> None:
    text = "\n".join([
        f"kern.log Nov 1 kernel: {XID_79.split('kernel: ')[1]}",  # an earlier boot
        "kern.log Nov 2 kernel: Linux version 6.8.0-45-generic (buildd@lcy02)",
        f"kern.log Nov 2 kernel: {XID_63}",
        f"dmesg [  12.5] {XID_63}",
    ])  # fmt: skip
    assert kernel_lines(text) == [f"[  12.5] {XID_63}"]


def smi(replace: str, by: str) -> str:
    assert replace in SMI_Q
    return SMI_Q.replace(replace, by, 1)


@pytest.mark.parametrize(
    ("old", "new", "rule", "severity", "evidence"),
    [
        ("DRAM Uncorrectable                         : 0",
         "DRAM Uncorrectable                         : 2", "gpu.ecc-uncorrectable", "error",
         "DRAM Uncorrectable                         : 2"),
        ("        Pending                                        : No",
         "        Pending                                        : Yes",
         "gpu.retirement-pending", "warning", "Pending          "),
        ("Remapping Failure Occurred                     : No",
         "Remapping Failure Occurred                     : Yes", "gpu.remap-failed", "error",
         "Remapping Failure Occurred                     : Yes"),
        ("                Current                                : 16x",
         "                Current                                : 8x", "gpu.pcie-degraded",
         "warning", "Link Width: Current 8x, Max 16x"),
        ("HW Thermal Slowdown                        : Not Active",
         "HW Thermal Slowdown                        : Active", "gpu.clocks-throttled",
         "warning", "HW Thermal Slowdown                        : Active"),
        ("GPU T.Limit Temp                               : 47 C",
         "GPU T.Limit Temp                               : 2 C",
         "gpu.temperature-near-slowdown", "warning", "GPU T.Limit Temp"),
        ("Persistence Mode                                   : Enabled",
         "Persistence Mode                                   : Disabled",
         "driver.persistence-off", "warning", "Persistence Mode"),
    ],
)  # fmt: skip
def test_smi_q_findings(old: str, new: str, rule: str, severity: str, evidence: str) -> None:
    f = one(run(smi_q=smi(old, new)), rule)
    assert f.severity == severity
    assert f.evidence.startswith(evidence) and f.evidence.endswith("(GPU 00000000:00:06.0)")


def test_pcie_generation_below_max_at_idle_is_only_info() -> None:
    text = smi("                Current                                : 5",
               "                Current                                : 1")  # fmt: skip
    text = text.replace("Performance State                                  : P0",
                        "Performance State                                  : P8")  # fmt: skip
    assert one(run(smi_q=text), "gpu.pcie-degraded").severity == "info"


def test_fewer_gpus_than_the_inventory() -> None:
    f = one(run(h=host(gpus={"count": 8})), "gpu.fewer-than-inventory")
    assert f.severity == "error" and "gpus.count is 8" in f.evidence


def test_module_not_loaded_and_nouveau() -> None:
    facts = parse_facts(FACTS)
    facts.module.loaded = False
    facts.module.nouveau_loaded = True
    findings = run(facts)
    assert one(findings, "driver.module-not-loaded").severity == "error"
    nv = one(findings, "driver.nouveau-loaded")
    assert "nouveau" in nv.evidence and "gpunode apply INVENTORY --limit gpu-01" in nv.fix


def test_dkms_not_built_for_the_next_kernel_is_a_warning_the_running_an_error() -> None:
    facts = parse_facts(FACTS)
    facts.kernel = "6.8.0-45-generic"
    facts.kernels.next_boot = "6.8.0-50-generic"
    facts.dkms = [DkmsModule(module="nvidia", version="580.159.04", kernel="6.8.0-45-generic",
                             arch="x86_64", state="installed")]  # fmt: skip
    f = one(run(facts), "driver.dkms-not-built")
    assert f.severity == "warning" and "6.8.0-50-generic" in f.title
    facts.kernels.next_boot = None
    facts.dkms[0].state = "built"  # built, not installed: the module is not in the kernel's tree
    f = one(run(facts), "driver.dkms-not-built")
    assert f.severity == "error" and "running kernel" in f.title
    assert f.evidence == "nvidia/580.159.04, 6.8.0-45-generic, x86_64: built"


def test_login_shell_without_cuda() -> None:
    findings = run(login="CUDA_HOME=\nPATH=/usr/bin:/bin\nnvcc=\n", ldconfig="")
    assert one(findings, "cuda.home-unset").fix.startswith("set `cuda_env: true`")
    assert "PATH=/usr/bin:/bin" in one(findings, "cuda.not-on-path").evidence
    libs = [f.title for f in findings if f.rule == "cuda.lib-not-found"]
    assert libs == [
        "cudart not found by the dynamic linker",
        "cuDNN not found by the dynamic linker",
    ]


def test_a_fix_names_the_inventory_and_never_asks_for_what_it_already_sets() -> None:
    login = "CUDA_HOME=\nPATH=/usr/bin:/bin\nnvcc=\n"
    inputs = Inputs(host(stack={"cuda_env": True}), parse_facts(FACTS),
                    parse_probe(probe_text(login=login, ldconfig="")))  # fmt: skip
    findings = diagnose(inputs, inventory="/srv/gpu fleet/site.yaml")
    for rule in ("cuda.home-unset", "cuda.not-on-path", "cuda.lib-not-found"):
        for f in (f for f in findings if f.rule == rule):
            assert "set `cuda_env: true`" not in f.fix
            assert f.fix.startswith("the inventory already sets `cuda_env: true`: gpunode apply "
                                    "'/srv/gpu fleet/site.yaml' --limit gpu-01 writes")  # fmt: skip
            assert "new login shell" in f.fix


def test_login_shell_with_cuda_is_healthy() -> None:
    login = "CUDA_HOME=/usr/local/cuda\nPATH=/usr/local/cuda/bin:/usr/bin\n"
    login += "nvcc=/usr/local/cuda/bin/nvcc\n"
    ld = ("\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.13\n"
          "\tlibcudnn.so.9 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudnn.so.9\n")  # fmt: skip
    assert health(run(login=login, ldconfig=ld)) == "healthy"


def test_toolkit_and_torch_newer_than_the_driver() -> None:
    facts = parse_facts(FACTS)
    facts.smi.driver_version = "535.183.01"
    facts.module.version = "535.183.01"
    facts.conda.envs = [
        CondaEnvFacts(name="train", path="/opt/conda/envs/train", torch="2.9.0+cu130")
    ]
    findings = run(facts)
    tk = one(findings, "cuda.toolkit-newer-than-driver")
    assert tk.severity == "error" and "driver 535.183.01" in tk.evidence
    assert "stack.driver.branch" in tk.fix
    torch = one(findings, "cuda.torch-newer-than-driver")
    assert "train: torch 2.9.0+cu130 (CUDA 13.0)" in torch.evidence


def test_cudnn_for_another_cuda_major() -> None:
    facts = parse_facts(FACTS)
    facts.packages["libcudnn9-cuda-12"] = facts.packages.pop("libcudnn9-cuda-13").model_copy(
        update={"name": "libcudnn9-cuda-12"})  # fmt: skip
    f = one(run(facts), "cuda.lib-other-cuda")
    assert "built for CUDA 12" in f.title and f.evidence.startswith("libcudnn9-cuda-12\t")


def test_tensorrt_for_another_cuda_major() -> None:
    facts = parse_facts(FACTS)
    some = next(iter(facts.packages.values()))
    facts.packages["libnvinfer10"] = some.model_copy(
        update={"name": "libnvinfer10", "version": "10.13.3.9-1+cuda12.9"}
    )
    f = one(run(facts), "cuda.lib-other-cuda")
    assert f.title == "libnvinfer10 is built for CUDA 12, the default toolkit is 13.0", f.title
    facts.packages["libnvinfer10"].version = "10.14.1.48-1+cuda13.0"  # the toolkit's: fine
    assert not any(f.rule == "cuda.lib-other-cuda" for f in run(facts))


def test_low_disk() -> None:
    facts = parse_facts(FACTS)
    facts.disks = [Disk(path="/", free_bytes=2**29, total_bytes=2**35)]
    f = one(run(facts), "disk.low")
    assert f.severity == "error" and f.evidence == "df /: 0.50 GiB free of 32.00 GiB"


def test_a_user_space_of_another_release_is_a_library_mismatch() -> None:
    facts = parse_facts(FACTS)
    loaded = facts.module.version
    some = next(iter(facts.packages.values()))  # the capture's driver is not from dpkg: add it
    facts.packages["libnvidia-compute-580"] = some.model_copy(
        update={"name": "libnvidia-compute-580", "version": f"{loaded}-1ubuntu1"}
    )
    assert loaded and not any(f.rule == "driver.library-mismatch" for f in run(facts))
    facts.module.version = "580.95.05"  # the module an unattended upgrade left loaded
    f = one(run(facts), "driver.library-mismatch")
    assert f.severity == "error" and f"user space {loaded} installed" in f.evidence


def test_secure_boot_refusing_the_dkms_module_is_named() -> None:
    facts = parse_facts(FACTS)
    facts.secure_boot = True
    facts.module.loaded = False
    facts.dkms = [DkmsModule(module="nvidia", version="580.95.05", kernel="6.8.0-79-generic",
                             arch="x86_64", state="installed")]  # fmt: skip
    f = one(run(facts), "driver.secure-boot-unsigned")
    assert "SecureBoot enabled" in f.evidence and "no DKMS signing key" in f.evidence
    assert "stack.driver.source: ubuntu" in f.fix
    facts.mok_key.present, facts.mok_key.enrolled = True, True
    assert not any(f.rule == "driver.secure-boot-unsigned" for f in run(facts))


def test_an_nvswitch_board_without_its_fabric_manager_is_named() -> None:
    from gpunode.facts.model import NvSwitch

    facts = parse_facts(FACTS)
    assert not any(f.rule == "driver.fabric-manager" for f in run(facts))  # no NVSwitch
    facts.nvswitches = [NvSwitch(slot="0000:07:00.0", device_id="22a3")]
    f = one(run(facts), "driver.fabric-manager")
    assert f.evidence == "1 NVSwitches on the bus, no nvidia-fabricmanager package installed"
