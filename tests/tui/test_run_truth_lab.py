"""A real apply on a lab host, its events shown by the real RunScreen: a change, a reboot,
a change the plan after the reboot adds; then a run whose second change fails. The screen's
progress and counts equal the executor's recap, and what it says ran did run on the host
(a file each change appends to, the host's boot id)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gpunode import events as ev
from gpunode.execute.host import Options
from gpunode.execute.session import ApplySession
from gpunode.inventory import load
from gpunode.roles.loader import search_path
from gpunode.tui.app import GpunodeApp
from gpunode.tui.run_view import RunView
from tests.conftest import Lab
from tests.tui.scenario import clock
from tests.tui.test_run_truth import CHG, FAIL, OK, STEP, plan_marks, progress
from tests.tui.test_run_view import feed

pytestmark = [pytest.mark.lab, pytest.mark.slow]

RAN = "/var/lib/gpunode-tui-test.ran"
NOTHING: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                           "cuda_env": False, "smoke": []}  # fmt: skip


def counted(name: str, when: str = "", fail: bool = False) -> str:
    """A change that appends its name to RAN each time it runs (then fails, with `fail`)."""
    end = "exit 3" if fail else f"touch {RAN}.{name}"
    return (
        f'- name: {name}\n  op: command\n  cmd: "echo {name} >> {RAN}; {end}"\n'
        f"  creates: {RAN}.{name}\n" + (f'  when: "{when}"\n' if when else "")
    )


def inventory(lab: Lab, folder: Path, host: str, tasks: str) -> Path:
    yaml = YAML()
    doc = yaml.load(lab.inventory_text)
    doc["defaults"]["stack"].update({**NOTHING, "roles": ["truth"]})
    (folder / "roles" / "truth").mkdir(parents=True, exist_ok=True)
    (folder / "roles" / "truth" / "tasks.yaml").write_text(tasks)
    path = folder / "inventory.yaml"
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    return path


def apply(inv: Path, host: str) -> tuple[list[ev.Event], ev.HostRecap]:
    """The events of a real apply of `host`, and the executor's recap line for it."""
    opts = Options(smoke=False, poll_interval=0.5, search=search_path(inv))
    session = ApplySession(load(str(inv)).select(host), opts)
    seen: list[ev.Event] = []
    session.bus.subscribe(seen.append)
    session.run()
    result = session.finish(timeout=300)
    assert result is not None
    return seen, result.hosts[host].recap()


async def test_a_real_run_with_a_reboot_then_a_failure_shows_the_recaps_counts(
    lab_hosts: Lab, lab_fresh_host: str, tmp_path: Path
) -> None:
    host, lab = lab_fresh_host, lab_hosts
    boot0 = lab.boot_id(host)
    tasks = (
        counted("before") + f"- name: reboot once\n  op: reboot\n  reason: the test asks for one\n"
        f"  when: \"facts.boot_id == '{boot0}'\"\n"
        + counted("after", when=f"facts.boot_id != '{boot0}'")
    )
    events, recap = apply(inventory(lab, tmp_path / "one", host, tasks), host)
    assert lab.run(host, f"cat {RAN}", check=False).stdout.split() == ["before", "after"], recap
    assert lab.boot_id(host) != boot0 and recap.rebooted
    assert (recap.status, recap.ok, recap.changed, recap.failed) == ("changed", 1, 2, 0)
    starts = [e for e in events if isinstance(e, ev.ChangeStarted)]
    assert [(e.index, e.total) for e in starts] == [(1, 1), (2, 2)]  # "after" came with the re-plan

    app = GpunodeApp(hosts=(host,), clock=clock)
    async with app.run_test(size=(150, 45)) as pilot:
        view = app.query_one(RunView)
        for e in events:
            await feed(app, pilot, [e])
            if isinstance(e, ev.ChangeStarted):
                assert view.cell_text(host, STEP) == f"[{e.index}/{e.total}] {e.title}"
        assert progress(view, host) == (2, 2)
        assert [view.cell_text(host, c) for c in (OK, CHG, FAIL)] == ["1", "2", "0"]
        marks = plan_marks(app)
        assert [(t, m) for t, (m, _) in marks.items()] == [
            ("truth: before", "✔"),
            ("truth: reboot", "✔"),
            ("truth: after", "✔"),
        ], marks

    # the same host again: one change more that works, and one that fails
    tasks += counted("fine") + counted("broken", fail=True)
    events, recap = apply(inventory(lab, tmp_path / "two", host, tasks), host)
    assert lab.run(host, f"cat {RAN}").stdout.split() == ["before", "after", "fine", "broken"]
    assert (recap.status, recap.changed, recap.failed) == ("failed", 1, 1)
    app = GpunodeApp(hosts=(host,), clock=clock)
    async with app.run_test(size=(150, 45)) as pilot:
        view = app.query_one(RunView)
        await feed(app, pilot, events)
        assert progress(view, host) == (1, 2)
        assert [int(view.cell_text(host, c)) for c in (OK, CHG, FAIL)] == [
            recap.ok,
            recap.changed,
            recap.failed,
        ]
        marks = plan_marks(app)
        assert marks["truth: fine"][0] == "✔"
        assert marks["truth: broken"][0] == "✘" and "red" in marks["truth: broken"][1]
