"""`gpunode mirror --whole-stack` (no lab): a converged host's facts, planned as a fresh
host's, ask the mirror for exactly what a fresh host of the same machine asks for (the
packages at the same versions, the Miniconda installer, the envs' conda and pip installs),
where its own plan asks for nothing."""

from __future__ import annotations

import json

from gpunode.execute.host import Options
from gpunode.facts.model import Conda, CondaEnvFacts, HostFacts, Kernels
from gpunode.mirror.fresh import fresh_plan, fresh_view
from gpunode.mirror.needs import Needs, _host_needs
from gpunode.plan.aptcheck import targets
from gpunode.plan.planner import probes_for
from gpunode.resolve.index import RepoVersions
from gpunode.resolve.packages import Catalog
from tests.plan.planhelpers import FIX, STACK, catalog, fresh_facts, host_from, plan_host

# the stack the real 2x H200 capture has (driver 580, CUDA 13.0, cuDNN 9, NCCL 2.28), and an
# env with PyTorch from its CUDA variant's index
HOST = host_from(
    STACK.replace('branch: "550"', 'branch: "580"').replace('"12.4"', '"13.0"')
    .replace('"2.21"', '"2.28"').replace("hosts:\n", "    conda:\n      tos: accept\n"
    '      envs:\n        t: {python: "3.11", pytorch: "2.7.1"}\nhosts:\n')
)  # fmt: skip


class FixtureIndex(RepoVersions):
    """The planner tests' index (tests/fixtures/plan/Packages) for every folder."""

    def catalog(self, url: str) -> Catalog:
        return catalog()

    def mirror_files(self, folder_url: str) -> dict[str, str] | None:
        return None


def converged() -> HostFacts:
    """`gpunode facts --json` of a real 2x H200 host with that stack installed (driver,
    CUDA 13.0, cuDNN and NCCL, held), and the env as a converged host has it."""
    raw = (FIX.parent / "hardware" / "h200x2" / "facts.json").read_text()
    doc = json.loads(raw[raw.index("{") :].rsplit("[exit", 1)[0])
    facts = HostFacts.model_validate(doc["hosts"]["gpu-local"]["facts"])
    env = CondaEnvFacts(name="t", path="/opt/conda/envs/t", python="3.11.13", torch="2.7.1+cu130")
    return facts.model_copy(
        update={"conda": Conda(prefix="/opt/conda", version="25.5.1", envs=[env])}
    )


def needs_of(facts: HostFacts, plan_facts: HostFacts, probes: dict[str, bool]) -> Needs:
    """What the mirror takes for the plan of `plan_facts` (`facts`: the host's own)."""
    plan = plan_host(HOST, plan_facts, probes=probes)
    assert plan.refused is None, plan.refused
    out = Needs()
    _host_needs(out, HOST, facts, plan, FixtureIndex())
    return out


def test_a_converged_host_mirrors_what_a_fresh_host_of_its_stack_installs() -> None:
    have = converged()
    # the same machine, fresh: its release, kernel and GPUs, nothing of the stack
    fresh = fresh_facts("24.04", kernel=have.kernel, pci_gpus=have.pci_gpus)
    nothing_done = {p.key: False for p in probes_for(HOST, fresh)}
    want = needs_of(fresh, fresh, nothing_done)
    # its own plan (every probe satisfied, as on a converged host) installs nothing
    all_done = {p.key: True for p in probes_for(HOST, have)}
    own = plan_host(HOST, have, probes=all_done)
    assert own.refused is None, own.refused
    assert not [t for c in own.changes for t in targets(c) if t.version]
    assert not [c for c in own.changes if c.op in ("pip", "conda_env")]

    plan = fresh_plan(HOST, have, Options(versions=FixtureIndex()))
    assert plan.refused is None, plan.refused
    got = Needs()
    _host_needs(got, HOST, have, plan, FixtureIndex())

    ((url, folder),) = got.folders.items()
    assert url.endswith("/ubuntu2404/x86_64/")
    assert {u: f.packages for u, f in got.folders.items()} == {
        u: f.packages for u, f in want.folders.items()
    }
    versions = dict(folder.packages)
    assert versions["cuda-toolkit-13-0"] == "13.0.2-1"  # the newest 13.0 the index has
    assert versions["libnccl2"] == versions["libnccl-dev"] == "2.28.3-1+cuda13.0"
    assert versions["libcudnn9-cuda-13"].startswith("9.")
    assert versions["nvidia-open-580"].startswith("580.")
    assert (got.files, got.pip, got.conda) == (want.files, want.pip, want.conda)
    assert list(got.files) == ["miniconda/Miniconda3.sh"]
    (pip,) = got.pip
    assert pip.specs == ("torch==2.7.1",) and pip.python == "3.11"
    assert got.conda and not got.problems


def test_the_fresh_view_keeps_the_machine_and_drops_the_stack() -> None:
    k = converged().kernel
    have = converged().model_copy(update={"kernels": Kernels(installed=[k], headers=[k])})
    view = fresh_view(have)
    assert (view.os, view.arch, view.kernel, view.pci_gpus) == (
        have.os, have.arch, have.kernel, have.pci_gpus
    )  # fmt: skip
    assert have.packages and not view.packages  # the capture lists only the stack's
    assert have.module.loaded and not view.module.loaded and not view.smi.ok
    assert have.toolkits and not view.toolkits and view.cuda_alternative is None
    assert (view.cudnn_version, view.nccl_version, view.conda.envs) == (None, None, [])
    # the headers the driver's role installed: a fresh host's plan installs them again
    assert (view.kernels.installed, view.kernels.headers) == ([k], [])
