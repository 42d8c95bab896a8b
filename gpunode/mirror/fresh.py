"""`gpunode mirror --whole-stack`: what a fresh host of each selected host's stack installs.

A converged host's plan installs nothing, so its mirror would hold only the keyring and the
indexes. Here each host is planned by the planner `gpunode plan` uses, against its facts as
a fresh host of the same machine and release would report them: the versions resolved, the
packages, the Miniconda installer and the envs' conda and pip installs are exactly those a
fresh host's plan takes, with no second list of what the stack is made of.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from gpunode.changes import HostPlan
from gpunode.components import dpkg_patterns
from gpunode.execute.host import Options
from gpunode.facts.model import Conda, ContainerFacts, Fabric, HostFacts, KernelModule, NvidiaSmi
from gpunode.inventory.model import Host
from gpunode.plan.planner import plan_host


def fresh_view(facts: HostFacts) -> HostFacts:
    """`facts` as if nothing of the stack were installed.

    Kept, as they are the machine's and its Ubuntu's: the release and architecture, the
    kernels installed and booted, the GPUs and NVSwitches on the PCI bus, Secure Boot and
    the firmware's enrolled key, what Ubuntu's apt offers, the container runtimes, the
    packages outside the stack's. Cleared, as a fresh host has none of it: the stack's
    packages (those the components' dpkg patterns list, held or not), the kernels' headers
    (the driver's role installs them, for DKMS), the loaded module, nvidia-smi, DKMS, the
    fabric, toolkits and the cuda alternative, cuDNN and NCCL, the apt sources and
    keyrings the repositories' roles add, conda and its envs, the managed files,
    gpunode's holds and journal, the CDI spec. Cleared too, as they are this host's
    moment, not a fresh one's: the processes using the GPUs, dpkg's lock holder and
    half-done packages, and the disks (a converged host's free space is what the stack
    left; each host's own plan checks its space)."""
    patterns = dpkg_patterns()
    return facts.model_copy(
        update={
            "packages": {
                n: p for n, p in facts.packages.items()
                if not any(fnmatchcase(n, pat) for pat in patterns)
            },
            "module": KernelModule(),
            "smi": NvidiaSmi(),
            "kernels": facts.kernels.model_copy(update={"headers": []}),
            "dkms": [],
            "fabric": Fabric(),
            "toolkits": [],
            "cuda_alternative": None,
            "cuda_alternative_mode": None,
            "cudnn_version": None,
            "nccl_version": None,
            "apt_sources": [],
            "keyrings": [],
            "conda": Conda(),
            "files": {},
            "file_attrs": {},
            "gpunode_holds": [],
            "journal": [],
            "containers": ContainerFacts(runtimes=list(facts.containers.runtimes)),
            "gpu_processes": [],
            "dpkg_lock_holder": None,
            "dpkg_interrupted": False,
            "dpkg_broken": {},
            "disks": [],
        }
    )  # fmt: skip


def fresh_plan(host: Host, facts: HostFacts, options: Options) -> HostPlan:
    """The plan a fresh host of `host`'s stack on this machine gets: the planner on
    fresh_view(facts), versions from the repositories' indexes as the controller reads
    them (as `gpunode plan` does), every probe unknown (none of the roles' lines, files
    or env packages is there yet). No mirror's manifest is checked: the mirror being
    built is what is to hold the files."""
    versions, repos = options.versions, host.repos
    return plan_host(
        host,
        fresh_view(facts),
        tags=options.tags,
        skip_tags=options.skip_tags,
        search=options.search,
        catalog=versions.catalog_for(repos.nvidia, facts) if versions else None,
        containers=versions.container_catalog_for(repos.nvidia_container) if versions else None,
    )
