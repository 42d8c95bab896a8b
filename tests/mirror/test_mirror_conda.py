"""The mirror's local conda channel: where a channel goes, and the channel built from the
lab's stand-in channel served on loopback (each file checked, a second run fetching none).
Which records conda's solver takes: test_mirror_conda_solve.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.changes import Change, Packages, Step
from gpunode.inventory.model import Host
from gpunode.mirror.build import MirrorError, build
from gpunode.mirror.condachan import CondaSet, channel_rel
from gpunode.plan.mirrorcheck import unmirrored
from gpunode_lab.repo import conda_channel


def test_a_channel_url_is_laid_out_by_its_path() -> None:
    assert channel_rel("https://conda.anaconda.org/conda-forge") == "conda/conda-forge"
    assert channel_rel("https://repo.anaconda.com/pkgs/main") == "conda/pkgs/main"
    with pytest.raises(ValueError, match="not a channel URL"):
        channel_rel("https://example.com/a/../b")


def test_the_channel_holds_the_closure_with_upstreams_records(
    upstream: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, url, asked = upstream
    conda_channel.build(root)
    channel = url.removesuffix("/ubuntu2204/x86_64/") + "/pkgs/main"
    out = tmp_path / "mirror"
    build([], out, conda=[CondaSet((channel,), ("python=3.10",))])
    mine = json.loads((out / "conda/pkgs/main/linux-64/repodata.json").read_text())["packages"]
    theirs = json.loads((root / "pkgs/main/linux-64/repodata.json").read_text())["packages"]
    assert {n: theirs[n] for n in mine} == mine  # upstream's records, unchanged
    assert sorted(r["name"] for r in mine.values()) == [
        "ca-certificates", "libzlib", "openssl", "python"]  # fmt: skip
    assert mine[next(n for n in mine if n.startswith("python-"))]["version"] == "3.10.16"
    for name in mine:
        assert (out / "conda/pkgs/main/linux-64" / name).read_bytes() == (
            root / "pkgs/main/linux-64" / name
        ).read_bytes()
    noarch = json.loads((out / "conda/pkgs/main/noarch/repodata.json").read_text())["packages"]
    assert sorted(r["name"] for r in noarch.values()) == ["pip", "setuptools", "tzdata", "wheel"]

    asked.clear()
    again = build([], out, conda=[CondaSet((channel,), ("python=3.10",))])
    assert again.downloaded == [] and not [a for a in asked if " 200" in a], asked

    (root / "pkgs/main/noarch" / next(n for n in noarch if n.startswith("pip-"))).write_bytes(b"x")
    (out / "conda/pkgs/main/noarch" / next(n for n in noarch if n.startswith("pip-"))).unlink()
    with pytest.raises(MirrorError, match=r"SHA256 .* the channel.s repodata says"):
        build([], out, conda=[CondaSet((channel,), ("python=3.10",))])


def test_plan_refuses_an_envs_python_the_mirrors_channel_lacks() -> None:
    host = Host.model_validate({"name": "h", "address": "127.0.0.1"})
    channel = "http://m:8470/conda/pkgs/main"
    create = f"conda create -y -q -p /opt/conda/envs/t --override-channels -c {channel} python=3.11"
    python = Packages("conda", "/opt/conda/envs/t", ("python=3.11",), channels=(channel,))
    changes = [
        Change(
            "conda",
            "conda env t (Python 3.11)",
            "conda_env",
            "missing",
            (Step(create, packages=(python,)),),
        )
    ]
    held = {f"{channel}/linux-64/": {"python-3.11.11-h_0.tar.bz2": "a" * 64}}
    assert unmirrored(host, changes, held.get) is None
    assert unmirrored(host, changes, lambda _: None) is None  # not a gpunode mirror
    other = {f"{channel}/linux-64/": {"python-3.12.9-h_0.tar.bz2": "a" * 64}}
    assert unmirrored(host, changes, other.get) == (
        f"conda: conda env t (Python 3.11): the mirror's channels {channel} hold no python 3.11:"
        " run `gpunode mirror` for this inventory again"
    )
