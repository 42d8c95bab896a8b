"""The convergence guard through `gpunode apply` on lab hosts: after a run's changes the host
is read and planned again; a change the run made that the plan asks for again fails the host
("does not converge") rather than passing as changed, and a converged host costs no second
read. A diskless (PXE-booted) host, without /boot's image of the kernel it runs, converges.

Every assertion reads the hosts: what a role's command left on disk, dpkg's database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                            "cuda_env": False, "smoke": [], "conda": None}  # fmt: skip
LOG = "/etc/site/runs.log"


def site_role(tmp_path: Path, creates: str) -> None:
    """A role whose command appends a line to LOG and says that it `creates:` a path."""
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        "- name: stamp\n"
        "  op: command\n"
        f'  cmd: "mkdir -p /etc/site && echo run >> {LOG} && touch /etc/site/stamp"\n'
        f"  creates: {creates}\n"
    )


def round_trips(evs: list[dict[str, Any]], host: str) -> int:
    record = json.loads(Path(evs[-1]["record"]).read_text())
    return int(record["hosts"][host]["round_trips"])


def test_a_change_made_and_planned_again_fails_the_host(lab: Lab, tmp_path: Path) -> None:
    host = "lab-01"
    fresh(lab, host)
    site_role(tmp_path, "/etc/site/never-made")  # a guard the command never satisfies
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"])

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 2  # a host failed
    (done,) = of(evs, "host-finished", host)
    assert done["status"] == "failed"
    assert done["message"] == "does not converge: site: stamp (/etc/site/never-made missing)"
    assert on_host(inv, host, f"cat {LOG}") == "run\n"  # made once, never again
    assert [e["status"] for e in of(evs, "change-finished", host)] == ["changed"]
    # the views were shown the plan that still asks for it
    assert [[c["task"] for c in p["changes"]] for p in of(evs, "plan-ready", host)] == [
        ["stamp"],
        ["stamp"],
    ]


def test_the_read_after_changes_is_one_round_trip_and_none_on_a_converged_host(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-01"
    fresh(lab, host)
    site_role(tmp_path, "/etc/site/stamp")
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"])

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    assert of(evs, "host-finished", host)[0]["status"] == "changed"
    assert on_host(inv, host, f"cat {LOG}") == "run\n"
    assert round_trips(evs, host) == 5  # lock, read, command, the read that finds it done, lock
    assert len(of(evs, "plan-ready", host)) == 1  # an empty re-plan is not announced

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0 and of(evs, "host-finished", host)[0]["status"] == "ok"
    assert round_trips(evs, host) == 3  # converged: the lock, one read, the lock given back
    assert on_host(inv, host, f"cat {LOG}") == "run\n"


def test_a_file_only_the_facts_name_is_hashed_in_the_second_read_and_converges(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-01"
    fresh(lab, host)
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        "- name: a file named after the running kernel\n"
        "  op: file\n"
        '  path: "/etc/site-kernel-{{ facts.kernel }}.conf"\n'
        '  content: "for {{ facts.kernel }}\\n"\n'
    )
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"])
    kernel = on_host(inv, host, "uname -r").strip()

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    assert on_host(inv, host, f"cat /etc/site-kernel-{kernel}.conf") == f"for {kernel}\n"
    before = lab.tree(host)
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0 and of(evs, "change-started") == []
    assert of(evs, "host-finished", host)[0]["status"] == "ok"
    assert round_trips(evs, host) == 4  # lock, facts, the file only they could name, lock
    assert lab.tree(host) == before


def test_a_file_only_root_may_read_is_hashed_as_root_and_not_written_again(
    lab: Lab, tmp_path: Path
) -> None:
    host = "lab-01"
    fresh(lab, host)
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        "- name: a private file\n"
        "  op: file\n"
        "  path: /etc/site-token\n"
        '  content: "s3cret\\n"\n'
        '  mode: "0600"\n'
    )
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"])

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    assert on_host(inv, host, "sudo stat -c '%a %U' /etc/site-token") == "600 root\n"
    before = lab.tree(host)
    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0 and of(evs, "change-started") == []
    assert round_trips(evs, host) == 4  # lock, facts (it unreadable), its hash as root, lock
    assert lab.tree(host) == before
    # plan runs no sudo: it cannot know, and says so
    plan = json.loads(lab.gpunode("plan", str(inv), "--limit", host, "--json").stdout)
    (change,) = plan["hosts"][host]["changes"]
    assert "unreadable to the SSH user" in change["reason"]


STACK: dict[str, Any] = {**NO_STACK, "driver": {"branch": "580", "flavor": "open", "hold": True}}


def test_a_diskless_host_converges_and_plans_nothing_after(lab: Lab, tmp_path: Path) -> None:
    host = "lab-02"
    fresh(lab, host)
    inv = lab.inventory(tmp_path, **STACK)
    kernel = on_host(inv, host, "uname -r").strip()
    # PXE-booted: the kernel runs, /boot has no image of it
    on_host(inv, host, f"sudo rm /boot/vmlinuz-{kernel}")
    assert on_host(inv, host, "ls /boot").split().count(f"vmlinuz-{kernel}") == 0

    code, evs = apply(lab, inv, "--limit", host)
    assert code == 0, [e["message"] for e in of(evs, "host-finished")]
    assert f"linux-headers-{kernel}" in packages(inv, host)
    assert on_host(inv, host, "uname -r").strip() == kernel
    assert f"{kernel}, x86_64: installed" in on_host(inv, host, "dkms status")

    plan = lab.gpunode("plan", str(inv), "--limit", host, "--json")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)["hosts"][host]
    assert (doc["refused"], doc["changes"]) == (None, [])
