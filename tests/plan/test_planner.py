"""Planner: desired state minus facts -> exact commands, refusals, reboots."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gpunode.changes import HostPlan
from gpunode.facts.model import (
    AptSource,
    DkmsModule,
    FileAttrs,
    HostFacts,
    KernelModule,
    Kernels,
    OsRelease,
    Package,
)
from gpunode.facts.parse import parse_facts
from gpunode.inventory import Host
from gpunode.plan.planner import dpkg_configure, probes_for
from gpunode.roles.ops.apt import apt_update
from gpunode.roles.ops.base import sha256
from tests.plan.planhelpers import FIX, STACK, fresh_facts, host_from, plan_host

NO_SYSTEMD = {"systemd": False}


def commands(plan: HostPlan) -> list[str]:
    return [s.command for c in plan.changes for s in c.steps]


def test_fresh_host_gets_every_role_in_order(host: Host, fresh: HostFacts) -> None:
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    assert plan.refused is None
    assert [(c.role, c.op) for c in plan.changes] == [
        ("unattended_upgrades", "template"),
        ("nvidia_repo", "apt_repository"),
        ("nvidia_repo", "apt_repository"),
        ("driver", "module_blacklist"),
        ("driver", "kernel_headers"),
        ("driver", "template"),  # the release pinned for apt before the install
        ("driver+cuda_toolkit", "apt_packages"),  # one apt transaction for both
        ("cuda_toolkit", "alternatives"),
        ("cudnn+nccl", "apt_packages"),
        ("cuda_env", "template"),
        ("cuda_env", "template"),
        ("driver", "dkms_built"),  # the module checked for the next boot, before the reboot
        ("driver", "reboot"),
    ]
    uu = plan.changes[0]
    assert uu.path == "/etc/apt/apt.conf.d/51gpunode-unattended-upgrades"
    assert uu.after is not None and '    "libnvidia-";\n' in uu.after
    plan = HostPlan(plan.host, plan.changes[1:], notes=plan.notes)
    cmds = commands(plan)
    # one root step: a private directory, the download, apt (which waits for the lock)
    assert cmds[0].startswith("d=$(mktemp -d /tmp/gpunode.XXXXXXXXXX) && trap ")
    assert (
        " && curl -fsSL --retry 3 --proto =http,https --proto-redir =http,https"
        ' -o "$d"/cuda-keyring_1.1-1_all.deb -- '
        "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb && "
    ) in cmds[0]  # http allowed: the inventory says insecure_http (a lab)
    # NVIDIA's published sha256 of the ubuntu2204 keyring package, checked before apt
    assert "= d93190d50b98ad4699ff40f4f7af50f16a76dac3bb8da1eaaf366d47898ff8df ]" in cmds[0]
    assert cmds[0].endswith(
        "apt-get -y -q -o DPkg::Lock::Timeout=120 -o Dpkg::Options::=--force-confdef"
        " -o Dpkg::Options::=--force-confold --allow-downgrades install"
        ' "$d"/cuda-keyring_1.1-1_all.deb'
    )
    assert "/tmp/gpunode-" not in " ".join(cmds)
    src = plan.changes[1]
    assert src.path == "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list"
    assert src.after == (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/ /\n"
    )
    assert src.steps[0].stdin == src.after
    headers = plan.changes[3]
    assert headers.reason == f"no kernel headers for {fresh.kernel}"
    # apt's lists are refreshed once, before the first install after the repository change
    assert headers.steps[0].command == apt_update(120)
    assert "apt-get -q -o DPkg::Lock::Timeout=120 update" in apt_update(120)
    assert headers.steps[1].command.endswith("--no-install-recommends install -- $want")
    assert f"for p in linux-headers-{fresh.kernel}; do" in headers.steps[1].command
    pref = plan.changes[4]
    assert pref.path == "/etc/apt/preferences.d/gpunode-nvidia-driver"
    assert (
        "Package: *nvidia* cuda-drivers cuda-drivers-* libxnvctrl*\n"
        "Pin: version 550.163.01-*\nPin-Priority: 1001\n"
    ) in str(pref.after)
    driver = plan.changes[5]
    assert driver.roles == ("driver", "cuda_toolkit")
    assert driver.reason == (
        "nvidia-open-550 missing; libnvidia-compute-550 missing; cuda-toolkit-12-4 missing"
    )
    assert driver.steps[0].command.endswith(
        "install -- 'nvidia-open-550=550.163.01-*' 'libnvidia-compute-550=550.163.01-*'"
        " cuda-toolkit-12-4=12.4.1-1"
    )
    assert driver.steps[1].command == "apt-mark hold -- nvidia-open-550 libnvidia-compute-550"
    # ...and recorded as gpunode's own holds
    assert driver.steps[2].command.endswith(
        '/var/lib/gpunode/holds || { rm -f -- "$tmp"; false; }; }'
    )
    assert driver.steps[2].stdin == "nvidia-open-550\nlibnvidia-compute-550\n"
    assert len(driver.steps) == 3
    assert sum("apt-get -q -o DPkg::Lock::Timeout=120 update" in c for c in cmds) == 1
    # the headers, two apt transactions for the packages, one for the keyring's local .deb,
    # and `dkms install` where the module is not built yet
    assert sum(" install " in c for c in cmds) == 5
    assert plan.changes[6].commands == [
        "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.4 124",
        "update-alternatives --set cuda /usr/local/cuda-12.4",
    ]
    assert (
        "libcudnn9-cuda-12=9.14.0.64-1 libcudnn9-dev-cuda-12=9.14.0.64-1"
        in (plan.changes[7].commands[0])
    )
    assert (
        plan.changes[7]
        .commands[0]
        .endswith("libnccl2=2.21.5-1+cuda12.4 libnccl-dev=2.21.5-1+cuda12.4")
    )
    # cuDNN's and NCCL's holds: one apt-mark, one record of both
    assert plan.changes[7].steps[1].command == (
        "apt-mark hold -- libcudnn9-cuda-12 libnccl2 libnccl-dev"
    )
    assert [s.stdin for s in plan.changes[7].steps[2:]] == [
        "libcudnn9-cuda-12\nlibnccl2\nlibnccl-dev\n"
    ]
    assert plan.changes[9].commands[-1] == "ldconfig"
    dkms = plan.changes[-2]
    assert dkms.commands[0].startswith(
        f"dkms status -m nvidia -v 550.163.01 -k {fresh.kernel} 2>/dev/null"
    )
    reboot = plan.changes[-1]
    assert reboot.reboot and reboot.steps == ()
    assert reboot.reason == "driver none loaded, 550.163.01 (open) wanted: reboot needed"
    # no package that drags a driver in, no sudo-less writes
    installed = [
        t.split("=")[0]
        for c in cmds
        if " install " in c
        for t in shlex.split(c.split(" install ")[1])
    ]
    assert "cuda-toolkit-12-4" in installed
    assert not {"cuda", "cuda-12-4", "cuda-drivers"} & set(installed)
    assert all(c.sudo for c in plan.changes)
    # the persistence daemon waits for a loaded module: no service change, no note
    assert not [c for c in plan.changes if c.op == "service"]
    assert not [n for n in plan.notes if "nvidia-persistenced" in n]


def converged(host: Host, facts: HostFacts) -> HostFacts:
    """The facts a host has once the fresh plan is done (as the real host reports them)."""
    files = {}
    for c in plan_host(host, facts, probes=NO_SYSTEMD).changes:
        if c.path and c.after is not None:
            files[c.path] = sha256(c.after)
    pk = {
        "cuda-keyring": ("1.1-1", False),
        "nvidia-open-550": ("550.163.01-0ubuntu1", True),
        "libnvidia-compute-550": ("550.163.01-0ubuntu1", True),
        "cuda-toolkit-12-4": ("12.4.1-1", False),
        "libcudnn9-cuda-12": ("9.14.0.64-1", True),
        "libcudnn9-dev-cuda-12": ("9.14.0.64-1", True),
        "libnccl2": ("2.21.5-1+cuda12.4", True),
        "libnccl-dev": ("2.21.5-1+cuda12.4", True),
    }
    packages = {
        n: Package(name=n, version=v, status=("hold" if h else "install") + " ok installed")
        for n, (v, h) in pk.items()
    }
    src = "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list"
    k = facts.kernel
    return facts.model_copy(
        update={
            "packages": packages,
            "gpunode_holds": sorted(n for n, (_, h) in pk.items() if h),
            "files": files,
            "apt_sources": [
                AptSource(
                    path=src,
                    uri="http://127.0.0.1:8080/cuda/repos/ubuntu2204/x86_64/",
                    suite="/",
                    signed_by="/usr/share/keyrings/cuda-archive-keyring.gpg",
                )
            ],
            "module": KernelModule(loaded=True, version="550.163.01", flavor="open"),
            "cuda_alternative": "/usr/local/cuda-12.4",
            "kernels": Kernels(installed=[k], next_boot=k, headers=[k]),
            "dkms": [
                DkmsModule(module="nvidia", version="550.163.01", kernel=k, state="installed")
            ],
        }
    )


def test_converged_host_has_an_empty_plan(host: Host, fresh: HostFacts) -> None:
    plan = plan_host(host, converged(host, fresh), probes=NO_SYSTEMD)
    assert plan.refused is None
    assert plan.changes == ()


def test_file_that_drifted_is_rewritten_and_only_it(host: Host, fresh: HostFacts) -> None:
    facts = converged(host, fresh)
    files = dict(facts.files)
    files["/etc/profile.d/gpunode-cuda.sh"] = sha256("export CUDA_HOME=/opt/other\n")
    files["/etc/ld.so.conf.d/gpunode-cuda.conf"] = "absent"
    plan = plan_host(host, facts.model_copy(update={"files": files}), probes=NO_SYSTEMD)
    assert [c.reason for c in plan.changes] == [
        "/etc/profile.d/gpunode-cuda.sh content differs",
        "/etc/ld.so.conf.d/gpunode-cuda.conf missing",
    ]


def test_mode_or_owner_drift_is_set_in_place(host: Host, fresh: HostFacts) -> None:
    facts = converged(host, fresh)
    right = FileAttrs(mode="644", owner="root:root", ids="0:0")
    attrs = dict.fromkeys(facts.files, right)
    assert plan_host(host, facts.model_copy(update={"file_attrs": attrs}),
                     probes=NO_SYSTEMD).changes == ()  # fmt: skip
    attrs["/etc/profile.d/gpunode-cuda.sh"] = FileAttrs(mode="664", owner="ubuntu:root",
                                                        ids="1000:0")  # fmt: skip
    attrs["/etc/modprobe.d/gpunode-blacklist-nouveau.conf"] = FileAttrs(
        mode="600", owner="root:root", ids="0:0"
    )
    plan = plan_host(host, facts.model_copy(update={"file_attrs": attrs}), probes=NO_SYSTEMD)
    assert [(c.reason, c.commands) for c in plan.changes] == [
        (
            "/etc/modprobe.d/gpunode-blacklist-nouveau.conf mode 0600, want 0644",
            ["chmod 0644 /etc/modprobe.d/gpunode-blacklist-nouveau.conf"],
        ),
        (
            "/etc/profile.d/gpunode-cuda.sh mode 0664, want 0644;"
            " /etc/profile.d/gpunode-cuda.sh owner ubuntu:root, want root:root",
            ["chmod 0644 /etc/profile.d/gpunode-cuda.sh",
             "chown root:root /etc/profile.d/gpunode-cuda.sh"],
        ),
    ]  # fmt: skip
    assert all(c.after is None for c in plan.changes)  # nothing is rewritten
    # a file the SSH user cannot read is written again, and the plan says why
    files = {**facts.files, "/etc/profile.d/gpunode-cuda.sh": "unreadable"}
    attrs["/etc/profile.d/gpunode-cuda.sh"] = FileAttrs(mode="600", owner="root:root", ids="0:0")
    plan = plan_host(host, facts.model_copy(update={"file_attrs": attrs, "files": files}),
                     probes=NO_SYSTEMD)  # fmt: skip
    assert plan.changes[1].reason == (
        "/etc/profile.d/gpunode-cuda.sh unreadable to the SSH user (mode 0600 root:root)"
    )
    assert plan.changes[1].after is not None


def test_owner_by_number_or_user_alone_matches() -> None:
    from gpunode.roles.ops.base import attrs_fix

    facts = HostFacts(file_attrs={"/f": FileAttrs(mode="644", owner="root:adm", ids="0:4")})
    assert attrs_fix(facts, "/f", "0644", "0:4") == ("", [])
    assert attrs_fix(facts, "/f", "644", "root") == ("", [])
    assert attrs_fix(facts, "/f", "u=rw,go=r", "root:adm") == ("", [])  # symbolic: not compared
    assert attrs_fix(facts, "/f", "0644", "root:root")[1] == ["chown root:root /f"]
    assert attrs_fix(facts, "/absent", "0644", "root:root") == ("", [])


def test_550_loaded_570_wanted_upgrades_and_reboots_once(fresh: HostFacts) -> None:
    host = host_from(STACK.replace('branch: "550"', 'branch: "570"').replace("12.4", "12.8")
                     .replace('"2.21"', '"2.26"'))  # fmt: skip
    old = converged(host_from(STACK), fresh)
    plan = plan_host(host, old, probes=NO_SYSTEMD)
    driver = next(c for c in plan.changes if "driver" in c.roles and c.op == "apt_packages")
    assert driver.reason == (
        "nvidia-open-570 missing; libnvidia-compute-570 missing; "
        "replaces held libnvidia-compute-550, nvidia-open-550; cuda-toolkit-12-8 missing"
    )
    # the old branch is unheld and removed in the same apt transaction
    assert driver.commands[1] == "apt-mark unhold -- libnvidia-compute-550 nvidia-open-550"
    assert driver.commands[2].endswith(
        "install -- 'nvidia-open-570=570.195.03-*' 'libnvidia-compute-570=570.195.03-*' "
        "libnvidia-compute-550- nvidia-open-550- cuda-toolkit-12-8=12.8.1-1"
    )
    reboots = [c for c in plan.changes if c.reboot]
    assert len(reboots) == 1 and plan.changes[-1] is reboots[0]
    assert reboots[0].reason == (
        "driver 550.163.01 (open) loaded, 570.195.03 (open) wanted: reboot needed"
    )
    # after the reboot the new module is loaded: no second reboot
    after = old.model_copy(
        update={"module": KernelModule(loaded=True, version="570.195.03", flavor="open")}
    )
    assert not plan_host(host, after, probes=NO_SYSTEMD).needs_reboot


def test_no_gpu_means_no_reboot(host: Host) -> None:
    plan = plan_host(host, fresh_facts(pci_gpus=[]), probes=NO_SYSTEMD)
    assert not plan.needs_reboot


def test_branch_590_uses_unversioned_names(fresh: HostFacts) -> None:
    host = host_from(STACK.replace('branch: "550"', 'branch: "590"').replace("12.4", "13.1")
                     .replace('nccl: "2.21"', "").replace("22.04", "24.04"))  # fmt: skip
    plan = plan_host(host, fresh_facts("24.04"), probes=NO_SYSTEMD)
    assert plan.refused is None, plan.refused
    driver = next(c for c in plan.changes if "driver" in c.roles and c.op == "apt_packages")
    assert (
        "nvidia-driver-pinning-590 'nvidia-open=590.48.01-*' "
        "'libnvidia-compute=590.48.01-*'" in driver.commands[-3]  # the newest 590 it has
    )


def test_h200x2_capture_cuda13_580(fresh: HostFacts) -> None:
    """The real capture: 580.159.04 loaded, CUDA 13.0 components, cuDNN 9 and NCCL 2.28 held."""
    captured = parse_facts((FIX / "h200x2-facts.txt").read_text())
    # the capture (a container on Ubuntu 24.04) has no os-release, lspci or df sections
    facts = captured.model_copy(
        update={k: getattr(fresh_facts("24.04"), k) for k in ("os", "arch", "disks", "pci_gpus")}
    )
    host = host_from(
        STACK.replace('branch: "550"', 'branch: "580"').replace('"12.4"', '"13.0"')
        .replace('"2.21"', '"2.28"').replace("cuda_env: true", "cuda_env: false")
    )  # fmt: skip
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    assert plan.refused is None, plan.refused
    by_role = {(c.role, c.op): c for c in plan.changes}
    # loaded module is the wanted release: no reboot, whatever else is installed
    assert not plan.needs_reboot
    # NCCL is exactly the pinned, held build; the cuda alternative already points at 13.0
    assert ("nccl", "apt_packages") not in by_role
    assert ("cuda_toolkit", "alternatives") not in by_role
    # cuDNN is installed at the pinned version and held; its headers need no hold
    assert ("cudnn", "apt_packages") not in by_role
    # the capture has no nvcc section: the toolkit is not known to be usable
    assert by_role[("cuda_toolkit", "apt_packages")].reason == "cuda-toolkit-13-0 missing"
    # the driver is loaded at the wanted release but not from dpkg: left alone, and with
    # nouveau not loaded there is nothing to blacklist
    assert ("driver", "apt_packages") not in by_role
    assert ("driver", "module_blacklist") not in by_role


def test_real_h200_machine_declared_as_it_is_plans_nothing() -> None:
    """`gpunode facts --json` from a real 2x H200 machine (driver, CUDA 13.0, cuDNN and NCCL
    from a prepared image, no NVIDIA repository): declaring exactly that plans no change."""
    import json

    raw = (FIX.parent / "hardware" / "h200x2" / "facts.json").read_text()
    doc = json.loads(raw[raw.index("{") :].rsplit("[exit", 1)[0])
    facts = HostFacts.model_validate(doc["hosts"]["gpu-local"]["facts"])
    host = host_from(
        STACK.replace('branch: "550"', 'branch: "580"').replace('"12.4"', '"13.0"')
        .replace('"2.21"', '"2.28"').replace("cuda_env: true", "cuda_env: false")
    )  # fmt: skip
    by_role = {r for c in plan_host(host, facts, probes=NO_SYSTEMD).changes for r in c.roles}
    # NVIDIA's repository is not configured there, nor the unattended-upgrades blacklist
    assert by_role == {"nvidia_repo", "unattended_upgrades"}
    unmanaged = host.model_copy(update={"repos": host.repos.model_copy(update={"nvidia": None})})
    changes = plan_host(unmanaged, facts, probes=NO_SYSTEMD).changes
    assert [c.role for c in changes] == ["unattended_upgrades"]
    # ...and declaring another stack on the same facts plans the changes it needs
    other = host_from(
        STACK.replace('branch: "550"', 'branch: "570"').replace('"12.4"', '"12.8"')
        .replace('"2.21"', '"2.26"')
    )  # fmt: skip
    # the image's holds are the admin's (gpunode recorded none): moving them is refused...
    plan = plan_host(other, facts, probes=NO_SYSTEMD)
    assert plan.refused is not None and "--allow-change-held" in plan.refused
    assert "libnccl-dev, libnccl2 held by the admin" in plan.refused
    # ...unless asked for
    plan = plan_host(other, facts, probes=NO_SYSTEMD, allow_change_held=True)
    assert plan.needs_reboot
    assert any(
        "changes the admin's hold on libnccl-dev, libnccl2" in c.reason for c in plan.changes
    )
    roles = {r for c in plan.changes for r in c.roles}
    assert {"driver", "cuda_toolkit", "nccl", "cudnn", "cuda_env"} <= roles


def test_dpkg_interrupted_is_finished_first(host: Host) -> None:
    facts = converged(host, fresh_facts()).model_copy(update={"dpkg_interrupted": True})
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    assert [c.commands for c in plan.changes] == [[dpkg_configure(120)]]
    assert "dpkg --force-confold --configure -a" in dpkg_configure(120)


def test_half_done_packages_are_named_and_apts_resolver_waits_for_the_recovery(
    host: Host, fresh: HostFacts
) -> None:
    from gpunode.plan import simulate

    broken = {"libnccl-dev": "unpacked", "libcudnn9-cuda-12": "half-configured"}
    facts = fresh.model_copy(update={"dpkg_interrupted": True, "dpkg_broken": broken})
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    first = plan.changes[0]
    assert first.reason == (
        "dpkg was interrupted: libcudnn9-cuda-12 half-configured, libnccl-dev unpacked"
    )
    assert first.long_running and "apt-get -y -q -o DPkg::Lock::Timeout=120" in first.commands[0]
    assert " --no-install-recommends -f install;" in first.commands[0]
    # apt-get -s would judge the half-done packages, not the plan: the recovery goes first
    assert (
        simulate.installs(plan.changes) and simulate.command(plan.changes, 120, update=True) is None
    )
    assert simulate.command(plan.changes[1:], 120, update=True) is not None


def test_apt_lock_timeout_from_the_inventory(fresh: HostFacts) -> None:
    host = host_from(STACK.replace("  connection: local\n", "  connection: local\n"
                                   "  apt: {lock_timeout: 7}\n"))  # fmt: skip
    assert host.apt.lock_timeout == 7
    facts = fresh.model_copy(update={"dpkg_interrupted": True})
    commands = [cmd for c in plan_host(host, facts, probes=NO_SYSTEMD).changes
                for cmd in c.commands]  # fmt: skip
    assert commands[0] == dpkg_configure(7) and "[ $n -lt 7 ]" in commands[0]
    apt = [cmd for cmd in commands if "apt-get" in cmd]
    assert apt and all("-o DPkg::Lock::Timeout=7 " in cmd for cmd in apt)
    assert not any("Timeout=120" in cmd for cmd in commands)


def test_refusals(host: Host) -> None:
    def refused(facts: HostFacts, h: Host = host) -> str:
        why = plan_host(h, facts).refused
        assert why is not None
        return why

    debian = fresh_facts().model_copy(
        update={"os": OsRelease(id="debian", version_id="12", pretty_name="Debian 12")}
    )
    assert refused(debian).startswith("unsupported OS: Debian 12")
    assert refused(fresh_facts("24.04")) == (
        "CUDA 12.4 has no repository for Ubuntu 24.04 (it has 20.04, 22.04): "
        "pick another toolkit or release"
    )
    assert refused(fresh_facts(secure_boot=True)).startswith("Secure Boot is on")
    from gpunode.facts.model import Disk

    small = fresh_facts(disks=[Disk(path="/", free_bytes=3 * 10**9, total_bytes=10**10)])
    assert refused(small) == (
        "too little disk for CUDA 12.4: 3.0 GB free under /usr/local, 8.0 GB needed; "
        "free space or add a disk"
    )
    bad = host_from(STACK.replace('"12.4"', '"12.8"'))
    assert "CUDA 12.8 needs driver >= 570.26" in refused(fresh_facts(), bad)


def test_secure_boot_with_the_wanted_module_already_loaded_is_fine(host: Host) -> None:
    facts = converged(host, fresh_facts(secure_boot=True))
    assert plan_host(host, facts, probes=NO_SYSTEMD).refused is None


def test_inventory_values_reach_the_shell_quoted(fresh: HostFacts) -> None:
    evil = "http://127.0.0.1:8080/x$(id);reboot"  # a space would be refused: not a URL
    host = host_from(STACK.replace("http://127.0.0.1:8080/cuda/repos", evil))
    cmd = plan_host(host, fresh, probes=NO_SYSTEMD, tags={"nvidia_repo"}).changes[0].commands[0]
    argv = shlex.split(cmd)
    assert f"{evil}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb" in argv  # one word


def test_tags_select_roles(host: Host, fresh: HostFacts) -> None:
    plan = plan_host(host, fresh, probes=NO_SYSTEMD, tags={"nccl"})
    assert [c.role for c in plan.changes] == ["nccl"]


def test_skip_tags_leave_roles_out(host: Host, fresh: HostFacts) -> None:
    every = plan_host(host, fresh, probes=NO_SYSTEMD).changes
    skip = {"cuda_env", "driver"}
    kept = {t for c in every if not skip & set(c.tags) for t in c.tags}
    assert kept and {"cuda_env", "driver"} <= {t for c in every for t in c.tags}
    plan = plan_host(host, fresh, probes=NO_SYSTEMD, skip_tags=skip)
    # apt steps of the roles kept merge differently, but every role kept is there
    assert {t for c in plan.changes for t in c.tags} == kept
    both = plan_host(host, fresh, probes=NO_SYSTEMD, tags={"cuda_env", "nvidia_repo"},
                     skip_tags={"nvidia_repo"})  # fmt: skip
    assert both.changes and {c.role for c in both.changes} == {"cuda_env"}


def test_service_probes_decide_persistenced(host: Host, fresh: HostFacts) -> None:
    fresh = converged(host, fresh)  # the daemon is managed once a module is loaded
    keys = {p.command: p.key for p in probes_for(host, fresh)}
    assert "systemctl is-enabled --quiet nvidia-persistenced" in keys
    probes = {k: False for k in keys.values()} | {"systemd": True}
    svc = [c for c in plan_host(host, fresh, probes=probes).changes if c.op == "service"]
    assert svc[0].commands == [
        "systemctl enable nvidia-persistenced",
        "systemctl start nvidia-persistenced",
    ]
    probes = {k: True for k in keys.values()}
    assert not [c for c in plan_host(host, fresh, probes=probes).changes if c.op == "service"]


def test_the_probes_walk_renders_only_the_tasks_that_probe(
    host: Host, fresh: HostFacts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probes' walk passes by a file, template or package task unrendered (its
    operation has no probe): the same probes as a walk rendering every task, and no
    template file rendered for them."""
    from gpunode.roles import walk as walking
    from gpunode.roles.loader import search_path
    from gpunode.roles.render import render_template as real

    rendered: list[str] = []

    def counted(templates: Path, name: str, ctx: dict[str, object]) -> str:
        rendered.append(name)
        return real(templates, name, ctx)

    monkeypatch.setattr("gpunode.roles.walk.render_template", counted)
    probed: set[str] = set()
    for facts in (fresh, converged(host, fresh)):
        every: dict[str, str] = {}
        for st in walking.walk(host, facts, search_path(None)):
            every.update((p.key, p.command) for p in st.op.probes(st.args) if not p.role_shell)
        assert rendered  # the roles have templates: the full walk renders them
        rendered.clear()
        assert {p.key: p.command for p in probes_for(host, facts)} == every
        assert rendered == []
        probed.update(every.values())
    assert "systemctl is-enabled --quiet nvidia-persistenced" in probed


def test_users_own_role_next_to_the_inventory(tmp_path: Path, fresh: HostFacts) -> None:
    role = tmp_path / "roles" / "motd"
    (role / "templates").mkdir(parents=True)
    (role / "defaults.yaml").write_text('motd_owner: "lab admins"\n')
    (role / "tasks.yaml").write_text(
        "- name: message of the day\n  op: template\n  src: motd.j2\n  path: /etc/motd\n"
        "- name: never the cuda meta package\n  op: apt_packages\n  packages: [htop]\n"
        "  never: [cuda]\n"
    )
    (role / "templates" / "motd.j2").write_text("GPU host {{ host.name }}, ask {{ motd_owner }}\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  gpu1: {connection: local, stack: {roles: [motd]}}\n")
    from gpunode.inventory import load
    from gpunode.roles import search_path

    h = load(inv).hosts["gpu1"]
    plan = plan_host(h, fresh, search=search_path(inv))
    motd = [c.after for c in plan.changes if c.op == "template"]
    assert motd == ["GPU host gpu1, ask lab admins\n"]
    assert plan.changes[1].commands[-1].endswith("install -- htop")

    (role / "templates" / "motd.j2").write_text("{{ undefined_thing }}\n")
    from gpunode.roles.loader import load_role

    load_role.cache_clear()
    why = plan_host(h, fresh, search=search_path(inv)).refused
    assert why is not None and "motd.j2" in why and "undefined_thing" in why

    (role / "tasks.yaml").write_text("- name: bad\n  op: apt_packages\n  packages: [cuda]\n"
                                     "  never: [cuda]\n")  # fmt: skip
    load_role.cache_clear()
    why = plan_host(h, fresh, search=search_path(inv)).refused
    assert why == f"{role / 'tasks.yaml'}:1:3: refusing to install cuda: listed under never"


def test_conda_env_packages_are_installed_at_their_exact_versions(fresh: HostFacts) -> None:
    host = host_from(
        STACK.replace(
            "    cuda_env: true\n",
            "    cuda_env: true\n    conda:\n      tos: accept\n      envs:\n"
            '        t: {python: "3.11", packages: {numpy: "1.26.4", einops: "0.8.0"}}\n',
        )
    )
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    (pkgs,) = [c for c in plan.changes if c.title == "conda: packages in t"]
    assert pkgs.commands == [
        "/opt/conda/envs/t/bin/python -m pip install -q --no-input einops==0.8.0 numpy==1.26.4"
    ]
    # installed at those versions (the probe says so): nothing to do
    installed = {p.key: True for p in probes_for(host, fresh) if " -m pip" not in p.command
                 and "importlib.metadata" in p.command}  # fmt: skip
    assert len(installed) == 2
    plan = plan_host(host, fresh, probes={**NO_SYSTEMD, **installed})
    assert not [c for c in plan.changes if c.title == "conda: packages in t"]


def test_a_host_with_an_unknown_gpu_model_is_refused_naming_the_field(host: Host) -> None:
    """check's findings refuse the plan too, each named by its whole field path."""
    wrong = host.model_copy(update={"gpus": host.gpus.model_copy(update={"model": "H1OO"})})
    plan = plan_host(wrong, fresh_facts(), probes=NO_SYSTEMD)
    assert plan.refused == (
        "gpus.model: unknown GPU model 'H1OO': did you mean 'H100'? (the smoke tests expect "
        "the model named here)"
    )
    assert not plan.changes
