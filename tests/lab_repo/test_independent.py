"""The lab's repository is its own model of NVIDIA's: no code under gpunode_lab reads gpunode's
compatibility rules, the index carries several releases per branch and builds per version,
and the lagging mirror lacks exactly the newest of them."""

from __future__ import annotations

import ast
import copy
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path

import pytest

import gpunode_lab
from gpunode.versions import dotted_key
from gpunode_lab.repo import build_repository, nvidia_repo
from tests.lab_repo.conftest import ServedRepo
from tests.lab_repo.test_repo import parse_packages

DISTROS = ("ubuntu2204", "ubuntu2404")
LAB = Path(gpunode_lab.__file__).parent


# ---------------------------------------------------------------- no gpunode.compat


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def compat_uses(source: str, module: str) -> list[str]:
    """What in `source` (the text of module `module`) imports gpunode.compat or names its
    rules file: imports (relative ones resolved), import_module("..."), string constants."""
    tree = ast.parse(source)
    package = module.split(".")[:-1]
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            full = ".".join([*base, *([node.module] if node.module else [])])
            names = [full, *(f"{full}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and id(node) not in docs:
            text = node.value if isinstance(node.value, str) else ""
            if "rules.yaml" in text or "gpunode.compat" in text:
                found.append(repr(text))
        found += [n for n in names if n == "gpunode.compat" or n.startswith("gpunode.compat.")]
    return found


def test_the_checker_sees_every_spelling() -> None:
    mod = "gpunode_lab.repo.catalog"
    for bad in (
        "import gpunode.compat.rules",
        "from gpunode.compat import rules as compat",
        "from gpunode import compat",
        "def f():\n    from gpunode import compat\n",
        "importlib.import_module('gpunode.compat.rules')",
        "p = resources.files('gpunode.compat') / 'rules.yaml'",
    ):
        assert compat_uses(bad, mod), bad
    for fine in (
        "from gpunode.versions import dotted_key",
        "from . import nvidia_repo",
        '"""Never reads gpunode/compat/rules.yaml."""',
    ):
        assert not compat_uses(fine, mod), fine


def test_no_lab_module_imports_gpunode_compat() -> None:
    modules = sorted(LAB.rglob("*.py"))
    assert len(modules) > 20
    offenders = {}
    for path in modules:
        rel = path.relative_to(LAB.parent).with_suffix("")
        module = ".".join(rel.parts)
        if path.name == "__init__.py":
            module += ".__init__"
        uses = compat_uses(path.read_text(encoding="utf-8"), module)
        if uses:
            offenders[str(rel)] = uses
    assert offenders == {}


def test_the_data_file_is_package_data() -> None:
    data = resources.files("gpunode_lab.repo") / nvidia_repo.DATA_FILE
    assert data.is_file()
    assert "drivers:" in data.read_text(encoding="utf-8")


def test_withheld_items_must_exist() -> None:
    doc = copy.deepcopy(nvidia_repo.data())
    doc["lagging"]["drivers"].append("550.999.01")
    with pytest.raises(ValueError, match=r"lagging\.drivers names \['550\.999\.01'\]"):
        nvidia_repo._check(doc)


# ---------------------------------------------------------------- what the index carries


def _versions(root: Path, distro: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in parse_packages((root / distro / "x86_64" / "Packages").read_text()):
        out.setdefault(p["Package"], set()).add(p["Version"])
    return out


def _upstream(version: str) -> str:
    return version.split("-")[0]


DRIVERS = {
    "535": ["535.183.06", "535.247.01"],
    "550": ["550.54.15", "550.127.05", "550.163.01"],
    "570": ["570.133.20", "570.195.03"],
    "580": ["580.65.06", "580.95.05", "580.159.04"],
}


@pytest.mark.parametrize("distro", DISTROS)
def test_several_releases_per_branch_and_builds_per_version(
    served_repo: ServedRepo, distro: str
) -> None:
    have = _versions(served_repo.root, distro)
    entries = parse_packages((served_repo.root / distro / "x86_64" / "Packages").read_text())
    by_key = {(e["Package"], e["Version"]): e for e in entries}
    for branch, releases in DRIVERS.items():
        if distro == "ubuntu2404":  # 550.54.15 predates NVIDIA's ubuntu2404 folder
            releases = [r for r in releases if r != "550.54.15"]
        assert {_upstream(v) for v in have[f"libnvidia-compute-{branch}"]} == set(releases)
        assert len(releases) >= 2
        for release in releases:
            meta = by_key[(f"nvidia-open-{branch}", f"{release}-1")]
            # each release's metapackage pins its own release of everything below it
            assert meta["Depends"] == f"nvidia-driver-{branch}-open (= {release}-0ubuntu1)"
            driver = by_key[(f"nvidia-driver-{branch}-open", f"{release}-0ubuntu1")]
            assert f"libnvidia-compute-{branch} (= {release}-0ubuntu1)" in driver["Depends"]
        assert (f"cuda-drivers-{branch}", f"{releases[-1]}-1") in by_key
    nccl: dict[str, set[str]] = {}
    for v in have["libnccl2"]:
        nccl.setdefault(_upstream(v), set()).add(v.rsplit("+cuda", 1)[1])
    assert nccl["2.26.2"] == {"12.2", "12.4", "12.8"}
    assert nccl["2.18.5"] == {"11.8", "12.2"} and nccl["2.28.3"] == {"12.9", "13.0"}
    assert {"2.26.2", "2.26.5"} <= set(nccl)
    assert have["libnccl-dev"] == have["libnccl2"]
    assert have["libcudnn9-cuda-12"] == {
        "9.1.0.70-1",
        "9.8.0.87-1",
        "9.10.2.21-1",
        "9.12.0.46-1",
        "9.14.0.64-1",
    }
    assert have["libcudnn9-cuda-13"] == {"9.12.0.46-1", "9.14.0.64-1"}
    assert have["libcudnn9-dev-cuda-13"] == have["libcudnn9-cuda-13"]
    assert have["libcudnn8"] == {"8.9.7.29-1+cuda11.8", "8.9.7.29-1+cuda12.2"}


# ---------------------------------------------------------------- the lagging mirror


def _newest(versions: set[str]) -> str:
    return max(versions, key=lambda v: dotted_key(_upstream(v)))


def _expected_withheld(have: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The rule, applied to the full index: the newest release of each driver branch with
    several, the newest cuDNN 9, the newest build of each NCCL minor with several releases."""
    releases = {
        _upstream(_newest(vs))
        for name, vs in have.items()
        if name.startswith("libnvidia-compute-") and len(vs) > 1
    }
    cudnn = _upstream(_newest(have["libcudnn9-cuda-12"]))
    minors: dict[str, set[str]] = {}
    for v in have["libnccl2"]:
        minors.setdefault(".".join(v.split(".")[:2]), set()).add(_upstream(v))
    nccl = {max(rs, key=dotted_key) for rs in minors.values() if len(rs) > 1}
    out = set()
    for name, vs in have.items():
        for v in vs:
            up = _upstream(v)
            driver = name.startswith(("nvidia-", "libnvidia-", "cuda-drivers")) and up in releases
            if (
                driver
                or (name.startswith("libcudnn9-") and up == cudnn)
                or (name.startswith("libnccl") and up in nccl)
            ):
                out.add((name, v))
    return out


def _pairs(have: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(n, v) for n, vs in have.items() for v in vs}


@pytest.mark.skipif(shutil.which("gpgv") is None, reason="needs gpgv")
def test_lagging_mirror_lacks_exactly_the_newest(served_repo: ServedRepo, tmp_path: Path) -> None:
    full_release = (served_repo.root / "ubuntu2404/x86_64/Release").read_bytes()
    lagging = build_repository(served_repo.dest, served_repo.url, "lagging")
    assert lagging != served_repo.root
    for distro in DISTROS:
        full, lag = _versions(served_repo.root, distro), _versions(lagging, distro)
        gone = _pairs(full) - _pairs(lag)
        assert _pairs(lag) <= _pairs(full)
        assert gone == _expected_withheld(full), distro
        assert ("libnvidia-compute-550", "550.163.01-0ubuntu1") in gone
        assert ("libnccl2", "2.26.5-1+cuda12.9") in gone
        assert ("libcudnn9-cuda-13", "9.14.0.64-1") in gone
        assert ("libnccl2", "2.28.3-1+cuda13.0") in _pairs(lag), "single-release minors stay"
        assert lag["nvidia-open"] == {"590.44.01-1"}, "single-release branches stay"
    # signed with the same key as the full tree: the keyring package verifies it
    subprocess.run(
        ["dpkg-deb", "-x", str(lagging / "ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb"), tmp_path],
        check=True,
    )
    ring = tmp_path / "usr/share/keyrings/cuda-archive-keyring.gpg"
    signed = lagging / "ubuntu2204/x86_64/InRelease"
    assert (
        subprocess.run(["gpgv", "--keyring", str(ring), str(signed)], check=False).returncode == 0
    )
    # each kind keeps its own cached tree
    t0 = time.monotonic()
    assert build_repository(served_repo.dest, served_repo.url, "lagging") == lagging
    assert build_repository(served_repo.dest, served_repo.url) == served_repo.root
    assert time.monotonic() - t0 < 1.0
    assert (served_repo.root / "ubuntu2404/x86_64/Release").read_bytes() == full_release


def test_unknown_mirror_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown mirror 'stale'"):
        build_repository(tmp_path, "http://127.0.0.1:1", "stale")
