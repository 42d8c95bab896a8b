"""The doctor's rules, as data: each has an id, a default severity, a title, the fix it
suggests and a check over the host's inputs (facts, probe, inventory). `diagnose` runs them
all; a check's hit may name a more precise severity, title or fix."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.doctor import cuda_checks as cu
from gpunode.doctor import driver_checks as dr
from gpunode.doctor import gpu_checks as gp
from gpunode.doctor.driver_checks import Check
from gpunode.doctor.inputs import Inputs
from gpunode.doctor.model import Finding, Severity, ordered

APPLY = "gpunode apply INVENTORY --limit HOST"
ENV = "set `cuda_env: true` in the host's stack and run " + APPLY


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    title: str
    fix: str
    check: Check


RULES: tuple[Rule, ...] = (
    # -- the driver
    Rule("driver.module-not-loaded", "error", "the nvidia kernel module is not loaded",
         f"{APPLY} (installs the driver, builds it for the kernel and reboots); or "
         "`sudo modprobe nvidia` and read why it does not load", dr.module_not_loaded),
    Rule("driver.nouveau-loaded", "error", "nouveau is loaded and holds the GPUs",
         f"{APPLY} (blacklists nouveau, rebuilds the initramfs and reboots)", dr.nouveau_loaded),
    Rule("driver.dkms-not-built", "error", "DKMS has not built the nvidia module",
         APPLY, dr.dkms_not_built),
    Rule("driver.persistence-off", "warning", "persistence mode is off",
         "`sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`)",
         dr.persistence_off),
    Rule("driver.library-mismatch", "error",
         "the driver's user-space libraries and the loaded module differ",
         "`gpunode apply INVENTORY --limit HOST` reloads the module (driver.reload: true) or "
         "reboots to load the installed release", dr.library_mismatch),
    Rule("driver.secure-boot-unsigned", "error",
         "Secure Boot refuses the unsigned nvidia module",
         "enrol the DKMS key (`sudo mokutil --import /var/lib/shim-signed/mok/MOK.der`, "
         "confirm at the console) and reboot, "
         "or use Ubuntu's signed modules (stack.driver.source: ubuntu), or disable Secure Boot",
         dr.secure_boot_unsigned),
    Rule("driver.fabric-manager", "error",
         "NVSwitch board without a running fabric manager of the driver's release",
         "install nvidia-fabricmanager of the driver's release and "
         "`sudo systemctl enable --now nvidia-fabricmanager`",
         dr.fabric_manager),
    # -- the GPUs
    Rule("gpu.fewer-than-inventory", "error", "fewer GPUs than the inventory's gpus.count",
         "reboot; if one stays missing, reseat or replace it (`lspci -d 10de:` lists the board)",
         gp.fewer_gpus),
    Rule("gpu.fallen-off-bus", "error", "a GPU has fallen off the bus",
         "reboot; if it recurs, check the slot, riser, power and cooling", gp.fallen_off),
    Rule("gpu.xid", "warning", "an Xid error in the kernel log", "see NVIDIA's Xid catalog",
         gp.xid),
    Rule("gpu.ecc-uncorrectable", "error", "uncorrectable ECC errors",
         "drain the host and reset the GPU (`sudo nvidia-smi -r -i N`); if they recur, "
         "contact support", gp.ecc_uncorrectable),
    Rule("gpu.retirement-pending", "warning",
         "retired pages or remapped rows wait for a GPU reset",
         "drain the host and reset the GPU (`sudo nvidia-smi -r -i N`) or reboot",
         gp.retired_or_remap_pending),
    Rule("gpu.remap-failed", "error", "row remapping failed: the GPU has no spare rows left",
         "replace the GPU (contact support)", gp.remap_failed),
    Rule("gpu.pcie-degraded", "warning", "PCIe link below its maximum",
         "reseat the GPU or its riser; check the slot's BIOS link settings", gp.pcie_degraded),
    Rule("gpu.clocks-throttled", "warning", "clocks slowed down (thermal or power)",
         "check the cooling and the power supply; `nvidia-smi -q -d PERFORMANCE` shows the "
         "reasons", gp.clocks_throttled),
    Rule("gpu.temperature-near-slowdown", "warning", "temperature near the slowdown threshold",
         "check the airflow and fans; lower the load or the power limit",
         gp.temperature_near_slowdown),
    # -- the CUDA stack
    Rule("cuda.home-unset", "warning", "CUDA_HOME is unset in login shells", ENV,
         cu.cuda_home_unset),
    Rule("cuda.not-on-path", "warning", "nvcc is not on a login shell's PATH", ENV,
         cu.nvcc_not_on_path),
    Rule("cuda.lib-not-found", "warning", "a CUDA library is not found by the dynamic linker",
         ENV + " (it writes ld.so.conf.d), or `sudo ldconfig`", cu.libs_not_found),
    Rule("cuda.lib-other-cuda", "warning",
         "cuDNN, NCCL or TensorRT built for another CUDA major",
         "declare the cuDNN/NCCL/TensorRT of the default toolkit's CUDA in the stack and run "
         + APPLY,
         cu.libs_other_cuda),
    Rule("cuda.toolkit-newer-than-driver", "error",
         "the default toolkit needs a newer driver", APPLY, cu.toolkit_newer_than_driver),
    Rule("cuda.torch-newer-than-driver", "error",
         "a conda env's torch needs a newer driver (torch.cuda.is_available() is False)",
         APPLY, cu.torch_newer_than_driver),
    Rule("disk.low", "warning", "low disk space where apt or conda write",
         "free space (`sudo apt-get clean`, `conda clean -a`) or grow the filesystem",
         cu.disk_low),
)  # fmt: skip


def diagnose(
    inputs: Inputs, rules: tuple[Rule, ...] = RULES, *, inventory: str | None = None
) -> list[Finding]:
    """Every rule's findings on one host, worst first; a fix's `gpunode` command names the
    host, and the inventory when it is given."""
    import shlex

    out = []
    for rule in rules:
        for hit in rule.check(inputs):
            out.append(
                Finding(
                    rule=rule.id,
                    severity=hit.severity or rule.severity,
                    title=hit.title or rule.title,
                    evidence=hit.evidence,
                    fix=(hit.fix or rule.fix)
                    .replace("HOST", inputs.host.name)
                    .replace("INVENTORY", shlex.quote(inventory) if inventory else "INVENTORY"),
                )
            )
    return ordered(out)
