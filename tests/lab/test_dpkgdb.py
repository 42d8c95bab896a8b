"""The captured Ubuntu dpkg database, as real dpkg and apt read it once the lab wrote it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpunode_lab import dpkgdb


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("root")
    dpkgdb.install(base, "24.04")
    return base


def _query(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", *args], capture_output=True, text=True
    )


def test_dpkg_lists_ubuntu_packages_and_no_gpu_stack(root: Path) -> None:
    out = _query(root, "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in out.stdout.splitlines()}
    assert len(rows) == 439 - 60
    assert rows["base-files"][0].startswith("13ubuntu10"), rows["base-files"]
    assert rows["libc6"][0].startswith("2.39-0ubuntu8"), rows["libc6"]
    assert all(status.strip() == "ii" for _, status in rows.values())
    nvidia = ("cuda-", "libcublas", "libcudnn", "libcufft", "libcufile", "libcurand",
              "libcusolver", "libcusparse", "libnccl", "libnpp", "libnv", "nsight")  # fmt: skip
    gpu = [p for p in rows if p.startswith(nvidia)]
    assert gpu == []
    assert "libxnvctrl0" in rows  # Ubuntu's own package, kept


def test_files_are_owned_as_on_ubuntu(root: Path) -> None:
    out = _query(root, "-S", "/usr/bin/dpkg", "/usr/share/doc/base-files")
    assert out.returncode == 0, out.stderr
    assert [line.split(":")[0] for line in out.stdout.splitlines()] == ["dpkg", "base-files"]
    assert _query(root, "-S", "/usr/local/cuda-13.0/bin/nvcc").returncode == 1


def test_dpkg_and_apt_find_nothing_broken(root: Path) -> None:
    audit = subprocess.run(
        ["dpkg", f"--admindir={root}/var/lib/dpkg", "--audit"], capture_output=True, text=True
    )
    assert (audit.returncode, audit.stdout, audit.stderr) == (0, "", "")
    state = root / "apt"
    (state / "lists/partial").mkdir(parents=True)
    (state / "cache/archives/partial").mkdir(parents=True)
    check = subprocess.run(
        [
            "apt-get",
            "check",
            f"-oDir::State::status={root}/var/lib/dpkg/status",
            f"-oDir::State::extended_states={root}/var/lib/apt/extended_states",
            f"-oDir::State::Lists={state}/lists",
            f"-oDir::Cache={state}/cache",
            "-oDir::Etc::SourceList=/dev/null",
            f"-oDir::Etc::SourceParts={state}",
            "-oDebug::NoLocking=1",
        ],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "E:" not in check.stdout + check.stderr


def test_alternatives_and_auto_marks_of_the_gpu_stack_are_gone(root: Path) -> None:
    alternatives = sorted(p.name for p in (root / "var/lib/dpkg/alternatives").iterdir())
    assert "cc" in alternatives and not [a for a in alternatives if a.startswith(("cuda", "cuf"))]
    marks = (root / "var/lib/apt/extended_states").read_text()
    assert "Package: libcublas" not in marks and "Package: cuda-" not in marks
    scripts = root / "var/lib/dpkg/info/libc-bin.postinst"
    assert scripts.stat().st_mode & 0o777 == 0o755


def test_apt_configuration_is_what_ubuntus_packages_ship(root: Path) -> None:
    files = dpkgdb.capture(dpkgdb.APT_CONFIG)
    assert sorted(files) == [
        "etc/apt/apt.conf.d/01-vendor-ubuntu",
        "etc/apt/apt.conf.d/01autoremove",
        "etc/apt/apt.conf.d/70debconf",
        "etc/apt/trusted.gpg.d/ubuntu-keyring-2012-cdimage.gpg",
        "etc/apt/trusted.gpg.d/ubuntu-keyring-2018-archive.gpg",
    ]
    owners = _query(root, "-S", *(f"/{name}" for name in files))
    assert owners.returncode == 0, owners.stderr
    assert sorted({line.split(":")[0] for line in owners.stdout.splitlines()}) == [
        "apt", "debconf", "ubuntu-keyring"]  # fmt: skip
