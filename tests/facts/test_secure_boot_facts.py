"""Secure Boot and the DKMS signing key, from mokutil's own words."""

from __future__ import annotations

import pytest

from gpunode.facts.gather import apt_queries, facts_command
from gpunode.facts.parse import parse_facts
from gpunode.inventory import loads

MOK = "/var/lib/shim-signed/mok/MOK.der"


def secure_boot(body: str) -> tuple[bool | None, bool, bool | None]:
    f = parse_facts(f"### secure-boot\n{body}\n### end\n")
    return f.secure_boot, f.mok_key.present, f.mok_key.enrolled


@pytest.mark.parametrize(
    ("said", "state"),
    [
        ("SecureBoot enabled ", True),
        ("SecureBoot disabled ", False),
        # shim told not to validate: the kernel takes unsigned modules
        ("SecureBoot enabled SecureBoot validation is disabled in shim ", False),
        ("This system doesn't support Secure Boot ", False),
    ],
)
def test_sb_state_strings(said: str, state: bool) -> None:
    assert secure_boot(f"mokutil: {said}\nefi: yes")[0] is state


def test_efi_variables_not_supported_falls_back_to_the_firmware() -> None:
    said = "mokutil: EFI variables are not supported on this system \nefi: no"
    assert secure_boot(said)[0] is None


@pytest.mark.parametrize(
    ("lines", "present", "enrolled"),
    [
        (f"mok-key: present\nmok-test: {MOK} is already enrolled", True, True),
        (f"mok-key: present\nmok-test: {MOK} is not enrolled", True, False),
        ("mok-key: present", True, None),  # no mokutil to ask
        ("mok-key: present\nmok-test: EFI variables are not supported on this system", True, None),
        ("mok-key: absent", False, None),
    ],
)
def test_the_dkms_key(lines: str, present: bool, enrolled: bool | None) -> None:
    assert secure_boot(f"mokutil: SecureBoot enabled \n{lines}\nefi: yes")[1:] == (
        present,
        enrolled,
    )


UBUNTU = """
defaults:
  connection: local
  stack:
    driver: {source: ubuntu, branch: "570", server: true}
    cuda: null
hosts:
  gpu1: {}
"""


def test_the_ubuntu_source_asks_apt_for_its_packages_in_the_same_round_trip() -> None:
    host = loads(UBUNTU, "inv.yaml").hosts["gpu1"]
    queries = apt_queries(host)
    assert queries == [
        ("--apt", "nvidia-utils-570-server"),
        ("--apt-kernel", "linux-modules-nvidia-570-server-open"),
    ]
    assert facts_command((), (), queries).endswith(
        "--apt nvidia-utils-570-server --apt-kernel linux-modules-nvidia-570-server-open"
    )
    assert apt_queries(loads(UBUNTU.replace("source: ubuntu, ", "").replace(
        ', server: true', ''), "inv.yaml").hosts["gpu1"]) == []  # fmt: skip


def test_madison_lines_are_versions_per_package() -> None:
    text = (
        "### apt-versions\n"
        " nvidia-utils-570-server | 570.172.08-0ubuntu0.24.04.1 | "
        "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n"
        " nvidia-utils-570-server | 570.172.08-0ubuntu0.24.04.1 | "
        "http://security.ubuntu.com/ubuntu noble-security/restricted amd64 Packages\n"
        " nvidia-utils-570-server | 570.133.20-0ubuntu0.24.04.1 | "
        "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n"
        " linux-modules-nvidia-570-server-open-6.8.0-79-generic | 6.8.0-79.79+1 | "
        "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n"
        "### end\n"
    )
    assert parse_facts(text).apt_versions == {
        "nvidia-utils-570-server": ["570.172.08-0ubuntu0.24.04.1", "570.133.20-0ubuntu0.24.04.1"],
        "linux-modules-nvidia-570-server-open-6.8.0-79-generic": ["6.8.0-79.79+1"],
    }
