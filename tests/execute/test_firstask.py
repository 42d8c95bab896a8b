"""A host's first read sends its facts command with the ask the last run walked
(execute/firstask.py): remembered per host, and when it is stale (a file or a probe the
roles now name is not in it) the plan reads what it lacks and is the plan a fresh walk
gives, and the ask is walked and remembered again. Read on this machine (LocalTransport)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpunode.events import Bus
from gpunode.execute import firstask, readhost
from gpunode.execute.host import HostRun, Options, _beside
from gpunode.facts.model import OsRelease
from gpunode.inventory.loader import load
from gpunode.roles.loader import load_role, search_path
from gpunode.transport.local import LocalTransport


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setenv("GPUNODE_CACHE_DIR", str(tmp_path / "cache"))
    real = readhost.read_host

    def as_ubuntu(*args: Any, **kwargs: Any) -> Any:  # read for real, as an Ubuntu host
        facts, probes = real(*args, **kwargs)
        facts.os = OsRelease(id="ubuntu", version_id="24.04", codename="noble")
        return facts, probes

    monkeypatch.setattr(readhost, "read_host", as_ubuntu)
    made, managed = tmp_path / "made", tmp_path / "managed.conf"
    made.write_text("")
    managed.write_text("converged\n")
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        f'- name: once\n  op: command\n  cmd: "true"\n  creates: {made}\n'
        f'- name: conf\n  op: file\n  path: {managed}\n  content: "converged\\n"\n'
        '  mode: "0644"\n  owner: root:root\n'
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text("hosts:\n  me: {connection: local, stack: {roles: [site]}}\n")
    load_role.cache_clear()
    return inv, made, managed


def first_read(inv: Path) -> tuple[HostRun, list[str]]:
    """A first read as `HostRun.run` starts it: the ask beside the lock's round trip."""
    host = load(inv).hosts["me"]
    run = HostRun(LocalTransport(), host, Bus(), Options(search=search_path(inv)))
    run._asking = _beside(lambda: run._ask(recall=True))
    _, plan = run.read(apply=False)
    return run, [c.title for c in plan.changes]


def test_the_ask_is_remembered_and_the_next_read_plans_the_same(
    site: tuple[Path, Path, Path],
) -> None:
    inv, _, managed = site
    host, search = load(inv).hosts["me"], search_path(inv)
    assert firstask.recall(host, search, ()) is None
    run, changes = first_read(inv)
    assert changes == [] and run.t.round_trips == 1
    files, probes = firstask.recall(host, search, ()) or ([], [])
    assert str(managed) in files and any(p.command.startswith("test -e") for p in probes)
    run, again = first_read(inv)
    assert again == [] and run.t.round_trips == 1
    alike = host.model_copy(update={"name": "another", "address": "192.0.2.7"})
    assert firstask.recall(alike, search, ()) is not None  # what the roles see is the same
    other = host.model_copy(update={"gpus": host.gpus.model_copy(update={"count": 4})})
    assert firstask.recall(other, search, ()) is None  # its roles see another host


def test_a_stale_ask_costs_a_round_trip_never_a_wrong_plan(
    site: tuple[Path, Path, Path],
) -> None:
    inv, made, managed = site
    host, search = load(inv).hosts["me"], search_path(inv)
    first_read(inv)
    firstask.remember(host, search, (), ([], []))  # an ask from before the role named them
    run, changes = first_read(inv)
    assert changes == []  # the probe and the file were read after all: nothing to do
    assert run.t.round_trips == 2
    files, probes = firstask.recall(host, search, ()) or ([], [])
    assert str(managed) in files and probes  # walked again, remembered
    # the test can fail: the same stale ask with the state changed plans the changes
    made.unlink()
    managed.write_text("drifted\n")
    firstask.remember(host, search, (), ([], []))
    _, changes = first_read(inv)
    assert sorted(changes) == ["site: conf", "site: once"]
