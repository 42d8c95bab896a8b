"""After failed smoke tests apply (and upgrade, rollback) runs doctor: each finding's fix
names the inventory the command was given, shell-quoted, never the placeholder INVENTORY."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpunode import events as ev
from gpunode.cli import cli
from gpunode.doctor import gather
from gpunode.doctor.inputs import Inputs
from gpunode.doctor.probe import parse_probe
from gpunode.events import Bus
from gpunode.execute import session
from gpunode.execute.host import HostRun, Options
from gpunode.facts.parse import parse_facts
from gpunode.inventory.model import Host
from gpunode.rollout import runner
from tests.doctor.test_rules import FACTS, probe_text
from tests.execute.fakehost import FakeHost

WHERE = "/srv/gpu fleet/site.yaml"
INVENTORY = "hosts:\n  gpu1: {connection: local, stack: {cuda_env: true}}\n"


def test_the_fix_after_failed_smoke_tests_names_the_inventory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = Host.model_validate({"name": "gpu1", "connection": "local",
                                "stack": {"cuda_env": True}})  # fmt: skip
    # a login shell without CUDA and a linker that finds no cudart: the fixes say to apply
    login = "CUDA_HOME=\nPATH=/usr/bin:/bin\nnvcc=\n"
    said = parse_probe(probe_text(login=login, ldconfig=""))
    monkeypatch.setattr(gather, "probe", lambda t, h: Inputs(h, parse_facts(FACTS), said))
    seen: list[ev.Event] = []
    bus = Bus()
    bus.subscribe(seen.append)
    HostRun(FakeHost(), host, bus, Options(inventory=WHERE))._doctor()  # type: ignore[arg-type]
    fixes = [e.fix for e in seen if isinstance(e, ev.DoctorFinding)]
    assert any(f"gpunode apply {shlex.quote(WHERE)} --limit gpu1 " in f for f in fixes), fixes
    assert not [f for f in fixes if "INVENTORY" in f]


class Started(Exception):
    """The command got as far as starting its hosts (with these options)."""


def opts_of(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> Any:
    def start(*given: Any, **kw: Any) -> Any:
        raise Started(next(a for a in given if isinstance(a, Options)))

    monkeypatch.setattr(session, "ApplySession", start)
    monkeypatch.setattr(runner, "Plan", start)
    monkeypatch.setenv("GPUNODE_STATE_DIR", str(tmp_path / "state"))
    res = CliRunner().invoke(cli, list(args))
    assert isinstance(res.exception, Started), res.output
    return res.exception.args[0]


@pytest.mark.parametrize("command", [["apply", "--yes"], ["upgrade", "--yes", "--no-tui"]])
def test_apply_and_upgrade_give_the_inventory_to_the_hosts_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str]
) -> None:
    inv = tmp_path / "gpu fleet" / "site.yaml"
    inv.parent.mkdir()
    inv.write_text(INVENTORY)
    name, *flags = command
    assert opts_of(monkeypatch, tmp_path, name, str(inv), *flags).inventory == str(inv)
