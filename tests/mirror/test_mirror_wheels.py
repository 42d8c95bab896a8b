"""The mirror's pip indexes, built by pip from the lab's stand-in PyPI served on loopback,
and plan's check of a pip install against them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from gpunode.changes import Change, Fetch, Packages, Step
from gpunode.inventory.model import Host
from gpunode.mirror.wheels import STORE, PipSet, WheelError, fetch
from gpunode.plan.mirrorcheck import unmirrored
from gpunode_lab.repo.pypi import build_index

TF = "tensorflow[and-cuda]==2.17"  # and-cuda: the nvidia-* wheels, through pip's resolver


@pytest.fixture
def pypi(upstream: tuple[Path, str, list[str]]) -> tuple[Path, str, list[str]]:
    """The lab's stand-in PyPI, served: its root, its simple index's URL, the requests."""
    root, url, asked = upstream
    build_index(root)
    return root, url.removesuffix("/ubuntu2204/x86_64/") + "/simple", asked


def tf(url: str) -> PipSet:
    return PipSet("simple", url, None, (TF,), "3.11", "manylinux_2_35_x86_64")


def test_a_step_and_its_dependencies_are_listed_with_their_hashes_once(
    pypi: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    up, url, asked = pypi
    out = tmp_path / "mirror"
    got, kept = fetch([tf(url)], out, lambda _: None)
    names = sorted(p.name for p in got)
    assert names == [
        "nvidia_cuda_runtime_cu12-12.3.101-py3-none-any.whl",
        "nvidia_cudnn_cu12-8.9.7.29-py3-none-any.whl",
        "tensorflow-2.17.0-py3-none-any.whl",
    ]
    assert kept == []
    page = (out / "simple" / "tensorflow" / "index.html").read_text()
    (href, digest) = re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page)[0]
    served = (out / "simple" / "tensorflow" / href).resolve()
    assert served == (out / STORE / "simple" / "tensorflow-2.17.0-py3-none-any.whl").resolve()
    upstream = up / "simple" / "tensorflow" / served.name
    assert served.read_bytes() == upstream.read_bytes()
    assert hashlib.sha256(served.read_bytes()).hexdigest() == digest
    listed = json.loads((out / "simple" / "gpunode-mirror.json").read_text())["files"]
    assert sorted(listed) == names

    inodes = {p.name: p.stat().st_ino for p in got}
    asked.clear()
    again, kept = fetch([tf(url)], out, lambda _: None)
    assert again == [] and sorted(p.name for p in kept) == names
    assert [a for a in asked if ".whl" in a] == [], asked  # index pages only
    assert {p.name: p.stat().st_ino for p in kept} == inodes


def test_a_wheel_that_does_not_match_its_links_hash_is_refused(
    pypi: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    up, url, _ = pypi
    wheel = up / "simple" / "tqdm" / "tqdm-4.67.1-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    step = PipSet("simple", url, None, ("tqdm==4.67.1",), "3.11", "manylinux_2_35_x86_64")
    with pytest.raises(WheelError, match=r"tqdm==4\.67\.1 from .*Expected sha256 .* Got"):
        fetch([step], tmp_path / "mirror", lambda _: None)
    assert not (tmp_path / "mirror" / STORE / "simple" / wheel.name).exists()
    assert not (tmp_path / "mirror" / "simple" / "gpunode-mirror.json").exists()


def test_plan_refuses_a_pip_package_or_installer_the_mirror_lacks() -> None:
    mirror = "http://m:8470"
    host = Host.model_validate(
        {"name": "h", "address": "127.0.0.1", "repos": {
            "conda_installer": f"{mirror}/miniconda/Miniconda3-py312_24.7.1-0-Linux-x86_64.sh",
            "conda_installer_sha256": "a" * 64, "insecure_http": True}}
    )  # fmt: skip
    pip = (
        f"/opt/conda/envs/t/bin/python -m pip install -q --no-input --index-url"
        f" {mirror}/pytorch/cu124 --extra-index-url {mirror}/simple 'torch==2.4.1'"
    )
    get = Step(
        f"curl -fsSL {host.repos.conda_installer} -o /tmp/i.sh",
        fetches=(Fetch(host.repos.conda_installer, "a" * 64),),
    )
    index = (f"{mirror}/pytorch/cu124", f"{mirror}/simple")
    torch = Packages("pip", "/opt/conda/envs/t", ("torch==2.4.1",), *index)
    changes = [
        Change("conda", "conda in /opt/conda", "conda", "absent", (get,)),
        Change("conda", "PyTorch 2.4.1 in t", "pip", "absent", (Step(pip, packages=(torch,)),)),
    ]
    folders = {
        f"{mirror}/miniconda/": {"Miniconda3-py312_24.7.1-0-Linux-x86_64.sh": "a" * 64},
        f"{mirror}/pytorch/cu124/": {"torch-2.4.1+cu124-py3-none-any.whl": "b" * 64},
    }
    assert unmirrored(host, changes, folders.get) is None
    assert unmirrored(host, changes, lambda _: None) is None  # not a gpunode mirror: not checked
    no_torch = {**folders, f"{mirror}/pytorch/cu124/": {"torch-2.4.0+cu124-any.whl": "c" * 64}}
    assert unmirrored(host, changes, no_torch.get) == (
        f"conda: PyTorch 2.4.1 in t: the mirror's index {mirror}/pytorch/cu124 holds no wheel"
        " of torch 2.4.1: run `gpunode mirror` for this inventory again"
    )
    other = {**folders, f"{mirror}/miniconda/": {"Miniconda3-py312_24.7.1-0-Linux-x86_64.sh": ""}}
    why = unmirrored(host, changes, other.get)
    assert why is not None and "holds another sha256 of Miniconda3-py312" in why, why
    assert "(repos.conda_installer_sha256)" in why
    # what a step fetches is what its op says, not a URL its text happens to name
    says = Change("site", "log", "command", "absent", (Step(f"echo {host.repos.conda_installer}"),))
    assert unmirrored(host, [says], other.get) is None
