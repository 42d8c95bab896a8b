"""Which records the mirror's conda channel holds: conda's solver's answer (py-rattler) for
the env's specs on the host's virtual packages, from channels shaped like conda-forge's
(records in `packages` and `packages.conda`, depends, constrains, timestamps), where the
newest of each name, dependency after dependency, is a set conda could not install."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpunode.changes import Packages
from gpunode.facts.model import HostFacts, NvidiaSmi, OsRelease
from gpunode.inventory.model import Host
from gpunode.mirror.build import MirrorError, build
from gpunode.mirror.condachan import CondaSet, conda_set

PY312 = ["python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312"]
# (channel, subdir, name, version, build, depends, constrains, extension)
RECORDS: list[tuple[str, str, str, str, str, list[str], list[str], str]] = [
    ("conda-forge", "linux-64", "python", "3.11.11", "h9e4cc4f_1_cpython",
     ["__glibc >=2.17,<3.0.a0", "libzlib >=1.3.1,<2.0a0", "tzdata"],
     ["python_abi 3.11.* *_cp311"], ".conda"),
    *(("conda-forge", "linux-64", "python", "3.12.8", "h9e4cc4f_1_cpython",
       ["__glibc >=2.17,<3.0.a0", "libzlib >=1.3.1,<2.0a0", "tzdata"],
       ["python_abi 3.12.* *_cp312"], ext) for ext in (".tar.bz2", ".conda")),
    ("conda-forge", "linux-64", "python_abi", "3.11", "7_cp311", [],
     ["python 3.11.* *_cpython"], ".conda"),
    ("conda-forge", "linux-64", "python_abi", "3.12", "7_cp312", [],
     ["python 3.12.* *_cpython"], ".conda"),
    ("conda-forge", "linux-64", "libzlib", "1.3.1", "hb9d3cd8_2", ["__glibc >=2.17,<3.0.a0"],
     ["zlib 1.3.1 *_2"], ".conda"),
    # newer than the host's glibc 2.35
    ("conda-forge", "linux-64", "libzlib", "1.4.0", "h0_0", ["__glibc >=2.40,<3.0.a0"], [],
     ".conda"),
    # the newest libfoo is built for Python 3.11 only
    ("conda-forge", "linux-64", "libfoo", "2.0.0", "py311h_0",
     ["python >=3.11,<3.12.0a0", "python_abi 3.11.* *_cp311", "libzlib >=1.3"], [], ".conda"),
    ("conda-forge", "linux-64", "libfoo", "1.5.0", "py312h_0", PY312, [], ".conda"),
    # the newest libbar forbids the env's Python by its constrains
    ("conda-forge", "linux-64", "libbar", "3.0", "h_0", [], ["python <3.12.0a0"], ".tar.bz2"),
    ("conda-forge", "linux-64", "libbar", "2.0", "h_0", [], [], ".tar.bz2"),
    # needs a newer driver than the host's (CUDA 12.4)
    ("conda-forge", "linux-64", "cuda-version", "12.8", "h_3", ["__cuda >=12.8"], [], ".conda"),
    ("conda-forge", "linux-64", "cuda-version", "12.4", "h_3", ["__cuda >=12.4"], [], ".conda"),
    ("conda-forge", "noarch", "tzdata", "2025a", "h78e105d_0", [], [], ".conda"),
    ("conda-forge", "noarch", "pip", "25.0", "pyh8b19718_0", ["python >=3.9"], [], ".conda"),
    # the second channel: its libbar is newer, but strict priority takes conda-forge's
    ("extra", "linux-64", "libbar", "9.0", "h_0", [], [], ".conda"),
    ("extra", "linux-64", "onlyextra", "1.0", "h_0", ["libzlib >=1.3"], [], ".conda"),
]  # fmt: skip
SPECS = ("python=3.12", "libfoo", "libbar", "cuda-version", "onlyextra")
# what a conda solver takes: one consistent set, pip added to Python's depends as conda does
SOLVED = {
    "conda-forge/linux-64": [
        "cuda-version-12.4-h_3.conda", "libbar-2.0-h_0.tar.bz2", "libfoo-1.5.0-py312h_0.conda",
        "libzlib-1.3.1-hb9d3cd8_2.conda", "python-3.12.8-h9e4cc4f_1_cpython.conda",
        "python_abi-3.12-7_cp312.conda",
    ],
    "conda-forge/noarch": ["pip-25.0-pyh8b19718_0.conda", "tzdata-2025a-h78e105d_0.conda"],
    "extra/linux-64": ["onlyextra-1.0-h_0.conda"],
    "extra/noarch": [],
}  # fmt: skip


def serve_channels(root: Path) -> None:
    """conda-forge/ and extra/ under `root`, each {linux-64,noarch}/repodata.json and files."""
    docs: dict[str, dict[str, Any]] = {}
    for n, (channel, subdir, name, version, build_, depends, constrains, ext) in enumerate(RECORDS):
        data = f"{channel}/{subdir}/{name}-{version}-{build_}{ext}".encode() * (n + 1)
        file = f"{name}-{version}-{build_}{ext}"
        (root / channel / subdir).mkdir(parents=True, exist_ok=True)
        (root / channel / subdir / file).write_bytes(data)
        doc = docs.setdefault(
            f"{channel}/{subdir}",
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}, "removed": [],
             "repodata_version": 1},
        )  # fmt: skip
        record: dict[str, Any] = {
            "name": name, "version": version, "build": build_, "build_number": 3,
            "depends": depends, "constrains": constrains, "license": "BSD-3-Clause",
            "subdir": subdir, "size": len(data), "timestamp": 1736000000000 + n,
            "md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest(),
        }  # fmt: skip
        if subdir == "noarch":
            record["noarch"] = "generic" if name == "tzdata" else "python"
        doc["packages" if ext == ".tar.bz2" else "packages.conda"][file] = record
    for where in ("extra/noarch", *docs):
        (root / where).mkdir(parents=True, exist_ok=True)
        empty = {"info": {"subdir": where.split("/")[1]}, "packages": {}, "packages.conda": {}}
        (root / where / "repodata.json").write_text(json.dumps(docs.get(where, empty)))


def gpu_host(driver: str | None = "550") -> Host:
    stack = {"driver": {"branch": driver}} if driver else {}
    return Host.model_validate({"name": "gpu1", "address": "127.0.0.1", "stack": stack})


FACTS = HostFacts(
    os=OsRelease(id="ubuntu", version_id="22.04", codename="jammy"), kernel="5.15.0-130-generic"
)


def the_env(base: str, *specs: str) -> CondaSet:
    channels = (f"{base}/conda-forge", f"{base}/extra")
    takes = Packages("conda", "/opt/conda/envs/t", specs, channels=channels, origin="envs/t.yml")
    return conda_set(takes, gpu_host(), FACTS)


@pytest.fixture
def channels(upstream: tuple[Path, str, list[str]]) -> tuple[Path, str, list[str]]:
    root, url, asked = upstream
    serve_channels(root)
    return root, url.removesuffix("/ubuntu2204/x86_64/"), asked


def held(out: Path) -> dict[str, list[str]]:
    """Each mirrored channel folder's repodata.json files, and that the files are there."""
    got: dict[str, list[str]] = {}
    for where in SOLVED:
        doc = json.loads((out / "conda" / where / "repodata.json").read_text())
        names = sorted([*doc["packages"], *doc["packages.conda"]])
        assert all((out / "conda" / where / n).is_file() for n in names), names
        got[where] = names
    return got


def test_the_channel_holds_the_solvers_consistent_set_not_the_newest_of_each(
    channels: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    root, base, _ = channels
    out = tmp_path / "mirror"
    build([], out, conda=[the_env(base, *SPECS)])
    assert held(out) == SOLVED
    for where, names in SOLVED.items():  # upstream's records and files, unchanged
        theirs = json.loads((root / where / "repodata.json").read_text())
        mine = json.loads((out / "conda" / where / "repodata.json").read_text())
        for group in ("packages", "packages.conda"):
            assert mine[group] == {n: theirs[group][n] for n in mine[group]}
        for name in names:
            assert (out / "conda" / where / name).read_bytes() == (root / where / name).read_bytes()


def test_the_host_decides_the_virtual_packages() -> None:
    virtual = {n: (v, b) for n, v, b in the_env("http://m").virtual}
    assert virtual == {
        "__unix": ("0", "0"),
        "__linux": ("5.15.0", "0"),
        "__glibc": ("2.35", "0"),  # Ubuntu 22.04's
        "__archspec": ("1", "x86_64"),
        "__cuda": ("12.4", "0"),  # driver branch 550's
    }
    takes = Packages("conda", "/opt/conda/envs/t", ("python=3.12",))
    smi = FACTS.model_copy(update={"smi": NvidiaSmi(ok=True, cuda_version="12.8")})
    installed = dict((n, v) for n, v, _ in conda_set(takes, gpu_host(None), smi).virtual)
    assert installed["__cuda"] == "12.8"  # the stack leaves the driver: the installed one's
    assert "__cuda" not in dict(
        (n, v) for n, v, _ in conda_set(takes, gpu_host(None), FACTS).virtual
    )


def test_a_spec_no_record_meets_is_an_error_naming_the_env_and_the_spec(
    channels: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    _, base, _ = channels
    out = tmp_path / "mirror"
    with pytest.raises(MirrorError) as e:
        build([], out, conda=[the_env(base, "python=3.12", "libfoo >=3")])
    assert str(e.value) == (
        f"conda: gpu1: conda env /opt/conda/envs/t (envs/t.yml): no record in {base}/conda-forge,"
        f" {base}/extra (linux-64, noarch) matches libfoo >=3: correct the spec, or add a"
        " channel that has it"
    )
    # each record exists, no set of them installs together: the solver's reason
    why = r"gpu1: conda env /opt/conda/envs/t \(envs/t\.yml\): conda's solver finds no set"
    with pytest.raises(MirrorError, match=why + r" .* python=3\.12 libfoo=2\.0\.0 .*__cuda=12\.4"):
        build([], out, conda=[the_env(base, "python=3.12", "libfoo=2.0.0")])
    assert not (out / "conda/conda-forge/linux-64/repodata.json").exists()


def test_without_the_solver_the_mirror_says_how_to_install_it_before_downloading(
    channels: tuple[Path, str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base, asked = channels
    monkeypatch.setitem(sys.modules, "rattler", None)  # import rattler: ImportError
    with pytest.raises(MirrorError, match=r"py-rattler, which is not installed: pip install"
                       r" 'gpunode\[mirror\]'"):  # fmt: skip
        build([], tmp_path / "mirror", conda=[the_env(base, "python=3.12")])
    assert asked == []
