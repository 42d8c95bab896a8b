"""A command's `unless:` is shell a role wrote: `plan` and `apply --check` never run it (the
change reads "would check `...` at apply"), `apply` runs it only for a host it is not
refusing, and a task may say `check_mode_probe: true` when its check only reads."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory import Host, load
from gpunode.plan.planner import plan_host, probes_for
from gpunode.roles import search_path
from gpunode.roles.loader import load_role

UBUNTU = HostFacts(os=OsRelease(id="ubuntu", version_id="22.04", codename="jammy"))
DEBIAN = HostFacts(os=OsRelease(id="debian", version_id="12"))  # refused: not Ubuntu
TASKS = """\
- name: swappiness
  op: command
  cmd: "echo vm.swappiness=10 >> /etc/sysctl.d/90-site.conf"
  unless: "grep -qx vm.swappiness=10 /etc/sysctl.d/90-site.conf"

- name: stamp
  op: command
  cmd: [touch, /etc/site-stamp]
  creates: /etc/site-stamp

- name: read-only check, opted in
  op: command
  cmd: "systemctl restart chronyd"
  unless: "chronyc tracking"
  check_mode_probe: true

- name: the systemd probe gpunode writes itself
  op: service
  unit: chrony
"""
UNLESS = "grep -qx vm.swappiness=10 /etc/sysctl.d/90-site.conf"


def site(tmp: Path) -> tuple[Host, tuple[Path, ...]]:
    role = tmp / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(textwrap.dedent(TASKS))
    inv = tmp / "inventory.yaml"
    inv.write_text("hosts:\n  gpu1: {connection: local, stack: {roles: [site]}}\n")
    load_role.cache_clear()
    return load(inv).hosts["gpu1"], search_path(inv)


def test_plan_and_check_run_no_role_shell(tmp_path: Path) -> None:
    host, search = site(tmp_path)
    for facts in (None, UBUNTU):  # the guess before reading, and the read host
        commands = [p.command for p in probes_for(host, facts, search)]
        assert UNLESS not in commands
        assert "test -e /etc/site-stamp" in commands  # gpunode's own checks stay
        assert "chronyc tracking" in commands  # the task said it only reads
        assert "test -d /run/systemd/system" in commands
    plan = plan_host(host, UBUNTU, search=search, probes={})
    swap = next(c for c in plan.changes if c.task == "swappiness")
    assert swap.reason == f"would check `{UNLESS}` at apply"
    assert swap.commands == ["echo vm.swappiness=10 >> /etc/sysctl.d/90-site.conf"]


def test_apply_runs_it_only_for_a_host_it_does_not_refuse(tmp_path: Path) -> None:
    host, search = site(tmp_path)
    applying = {p.command: p for p in probes_for(host, UBUNTU, search, role_shell=True)}
    assert UNLESS in applying and applying[UNLESS].role_shell
    refused = [p.command for p in probes_for(host, DEBIAN, search, role_shell=True)]
    assert UNLESS not in refused and "chronyc tracking" in refused
    assert plan_host(host, DEBIAN, search=search).refused is not None

    key = applying[UNLESS].key
    plan = plan_host(host, UBUNTU, search=search, probes={key: True})
    assert not [c for c in plan.changes if c.task == "swappiness"]
    plan = plan_host(host, UBUNTU, search=search, probes={key: False})
    (swap,) = [c for c in plan.changes if c.task == "swappiness"]
    assert swap.reason == f"`{UNLESS}` failed"


def test_apply_runs_no_role_shell_on_a_host_its_plan_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused by the plan itself (a task that cannot be planned), not by the facts alone:
    apply's read must not run the role's `unless:` on that host either. This machine is read
    for real (facts, probes), as an Ubuntu host whatever it runs."""
    from gpunode.events import Bus
    from gpunode.execute import readhost
    from gpunode.execute.host import HostRun, Options
    from gpunode.transport.local import LocalTransport

    real = readhost.read_host

    def as_ubuntu(*args: Any, **kwargs: Any) -> Any:
        facts, probes = real(*args, **kwargs)
        facts.os = UBUNTU.os
        return facts, probes

    monkeypatch.setattr(readhost, "read_host", as_ubuntu)

    marker = tmp_path / "unless-ran"
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        '- name: guarded\n  op: command\n  cmd: "true"\n'
        f"  unless: touch {marker}\n"
        "- name: cannot be planned\n  op: apt_packages\n  packages: [x11-apps]\n"
        "  never: [x11-apps]\n"
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text("hosts:\n  me: {connection: local, stack: {roles: [site]}}\n")
    load_role.cache_clear()
    host, search = load(inv).hosts["me"], search_path(inv)
    run = HostRun(LocalTransport(), host, Bus(), Options(search=search))
    _, plan = run.read(apply=True)
    assert plan.refused is not None and "listed under never" in plan.refused
    assert not marker.exists(), "the role's unless: ran on a refused host"
    # the same role on a host it does not refuse: the check runs (the test can fail)
    (role / "tasks.yaml").write_text(
        f'- name: guarded\n  op: command\n  cmd: "true"\n  unless: touch {marker}\n'
    )
    load_role.cache_clear()
    run = HostRun(LocalTransport(), load(inv).hosts["me"], Bus(), Options(search=search))
    run.read(apply=True)
    assert marker.exists()
