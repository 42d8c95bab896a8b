"""The framework stack of a conda env: torch with torchvision/torchaudio, Anaconda's ToS."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gpunode.facts.model import HostFacts
from gpunode.inventory import InventoryError, load
from gpunode.plan.planner import probes_for
from tests.plan.planhelpers import STACK, host_from, plan_host

NO_SYSTEMD = {"systemd": False}


def conda_stack(conda: str) -> str:
    head, hosts = STACK.split("hosts:\n")
    head = head.replace('branch: "550"', 'branch: "570"').replace('"12.4"', '"12.8"')
    head = head.replace('    cudnn: "9"\n    nccl: "2.21"\n', "")
    return (
        head
        + "    conda:\n"
        + "".join(f"      {ln}\n" for ln in conda.splitlines())
        + ("hosts:\n" + hosts)
    )


def titled(plan_changes: list, prefix: str) -> list:  # type: ignore[type-arg]
    return [c for c in plan_changes if c.title.startswith(prefix)]


def test_torchvision_and_torchaudio_come_with_torch_from_its_variant(fresh: HostFacts) -> None:
    host = host_from(
        conda_stack(
            "tos: accept\nenvs:\n"
            '  t: {python: "3.11", pytorch: "2.7.1", torchvision: true, torchaudio: true}'
        )
    )
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    (torch,) = titled(plan.changes, "conda: PyTorch 2.7.1 + torchvision + torchaudio in t")
    assert torch.commands == [
        "/opt/conda/envs/t/bin/python -m pip install -q --no-input"
        " --index-url http://127.0.0.1:8080/whl/cu128 --trusted-host 127.0.0.1:8080"
        " torch==2.7.1 torchvision==0.22.1 torchaudio==2.7.1"
    ]
    assert "torchvision 0.22.1+cu128" in torch.reason and "torchaudio 2.7.1+cu128" in torch.reason


def test_torch_alone_brings_no_companion(fresh: HostFacts) -> None:
    host = host_from(conda_stack('tos: accept\nenvs:\n  t: {python: "3.11", pytorch: "2.7"}'))
    (torch,) = titled(plan_host(host, fresh, probes=NO_SYSTEMD).changes, "conda: PyTorch 2.7 in")
    assert torch.commands[0].endswith(" torch==2.7")


def test_default_channels_without_a_choice_are_refused_naming_both_ways(
    fresh: HostFacts,
) -> None:
    host = host_from(conda_stack('envs:\n  t: {python: "3.11"}'))
    why = plan_host(host, fresh, probes=NO_SYSTEMD).refused
    assert why is not None
    assert "https://repo.anaconda.com/pkgs/main, https://repo.anaconda.com/pkgs/r" in why
    assert "conda.tos: accept" in why and "conda.channels: [conda-forge]" in why


def test_tos_accept_is_its_own_change_before_the_envs(fresh: HostFacts) -> None:
    host = host_from(conda_stack('tos: accept\nenvs:\n  t: {python: "3.11"}'))
    changes = plan_host(host, fresh, probes=NO_SYSTEMD).changes
    titles = [c.title for c in changes]
    tos = titles.index("conda: Anaconda's Terms of Service for conda's channels")
    assert tos < titles.index("conda: conda env t (Python 3.11)")
    assert changes[tos].reason == (
        "accept Anaconda's Terms of Service for channels https://repo.anaconda.com/pkgs/main,"
        " https://repo.anaconda.com/pkgs/r: conda.tos: accept in the inventory"
    )
    assert changes[tos].commands == [
        "/opt/conda/bin/conda tos accept --override-channels"
        " --channel https://repo.anaconda.com/pkgs/main"
        " --channel https://repo.anaconda.com/pkgs/r --system"
    ]


def test_conda_forge_only_needs_no_tos_and_overrides_the_channels(fresh: HostFacts) -> None:
    host = host_from(conda_stack('channels: [conda-forge]\nenvs:\n  t: {python: "3.11"}'))
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    assert plan.refused is None
    assert not titled(plan.changes, "conda: Anaconda's")
    (env,) = titled(plan.changes, "conda: conda env t")
    assert env.commands == [
        "/opt/conda/bin/conda create -y -q -p /opt/conda/envs/t --override-channels"
        " -c conda-forge python=3.11"
    ]


def test_env_files_are_copied_and_applied_until_their_hash_is_recorded(
    tmp_path: Path, fresh: HostFacts
) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs/t.yml").write_text("dependencies:\n  - pip:\n      - numpy==2.2.6\n")
    (tmp_path / "envs/t.txt").write_text("einops==0.8.1\n")
    (tmp_path / "inv.yaml").write_text(
        conda_stack(
            'channels: [conda-forge]\nenvs:\n  t: {python: "3.11", environment_file: envs/t.yml,'
            " requirements_file: envs/t.txt}"
        )
    )
    host = load(tmp_path / "inv.yaml").hosts["gpu1"]
    yml = hashlib.sha256(b"dependencies:\n  - pip:\n      - numpy==2.2.6\n").hexdigest()
    txt = hashlib.sha256(b"einops==0.8.1\n").hexdigest()
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    (copy,) = titled(plan.changes, "conda: environment file of t")
    assert copy.commands[0].startswith("mkdir -p -- /var/lib/gpunode/conda/t ")
    (update,) = titled(plan.changes, "conda: conda env t from its environment file")
    assert update.commands == [
        "/opt/conda/bin/conda env update -q -p /opt/conda/envs/t"
        " -f /var/lib/gpunode/conda/t/environment.yml"
        f" && printf '%s\\n' {yml} > /opt/conda/envs/t/conda-meta/gpunode-environment.sha256"
    ]
    (pip,) = titled(plan.changes, "conda: conda env t from its requirements file")
    assert pip.commands == [
        "/opt/conda/envs/t/bin/python -m pip install -q --no-input"
        " -r /var/lib/gpunode/conda/t/requirements.txt"
        f" && printf '%s\\n' {txt} > /opt/conda/envs/t/conda-meta/gpunode-requirements.sha256"
    ]
    # the env records both hashes: nothing to apply
    recorded = {p.key: True for p in probes_for(host, fresh) if p.command.startswith("grep -qsx")}
    assert len(recorded) == 2
    plan = plan_host(host, fresh, probes={**NO_SYSTEMD, **recorded})
    assert not titled(plan.changes, "conda: conda env t from")


def test_an_env_file_outside_the_inventory_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(
        conda_stack('channels: [conda-forge]\nenvs:\n  t: {environment_file: "../x.yml"}')
    )
    with pytest.raises(InventoryError, match="relative to the inventory's folder"):
        load(tmp_path / "inv.yaml")
