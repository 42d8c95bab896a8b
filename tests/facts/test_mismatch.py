"""A driver/library version mismatch: the loaded module against the installed user space
(libnvidia-compute[-BRANCH], whose libnvidia-ml nvidia-smi loads), as dpkg has it."""

from __future__ import annotations

from typing import Any

from gpunode.facts.model import HostFacts
from gpunode.views.facts import render


def facts(module: str | None, package: str, version: str, **more: Any) -> HostFacts:
    return HostFacts.model_validate({
        "module": {"loaded": module is not None, "version": module, "flavor": "open"},
        "packages": {package: {"name": package, "version": version, **more}},
    })  # fmt: skip


def test_an_upgrade_under_the_loaded_module_is_a_mismatch_and_the_facts_say_so() -> None:
    f = facts("550.127.05", "libnvidia-compute-550", "550.163.01-0ubuntu1")
    assert f.driver_userspace == "550.163.01"
    assert f.driver_mismatch == "module 550.127.05 loaded, user space 550.163.01 installed"
    (row,) = [r for r in render("gpu1", f).splitlines() if r.split()[:2] == ["driver", "mismatch"]]
    assert row.split(None, 2)[2] == (
        "module 550.127.05 loaded, user space 550.163.01 installed: reload the module or reboot"
    )


def test_unversioned_names_from_590_are_read_too() -> None:
    f = facts("580.95.05", "libnvidia-compute", "590.44.01-0ubuntu1")
    assert f.driver_mismatch == "module 580.95.05 loaded, user space 590.44.01 installed"


def test_no_mismatch_when_they_agree_nothing_is_loaded_or_the_package_is_gone() -> None:
    assert (
        facts("550.163.01", "libnvidia-compute-550", "550.163.01-0ubuntu1").driver_mismatch is None
    )
    assert facts(None, "libnvidia-compute-550", "550.163.01-0ubuntu1").driver_mismatch is None
    removed = facts("550.127.05", "libnvidia-compute-550", "550.163.01-0ubuntu1",
                    status="deinstall ok config-files")  # fmt: skip
    assert removed.driver_mismatch is None
    # a package whose name only starts alike is not the user space
    other = facts("550.127.05", "libnvidia-compute-550-dbg", "550.163.01-0ubuntu1")
    assert other.driver_userspace is None and other.driver_mismatch is None
    assert "driver mismatch" not in render("gpu1", other)
