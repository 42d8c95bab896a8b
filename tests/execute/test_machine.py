"""The executor's state machine (execute/machine.py) on a fake host (tests/execute/fakehost.py):
facts -> plan -> changes -> reboot -> plan again, refusals, Ctrl-C and the convergence
guard, checked against what the host was asked and what it holds afterwards."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from gpunode import events as ev
from gpunode.events import Bus
from gpunode.execute.host import HostRun, Options
from gpunode.execute.result import HostResult
from gpunode.hostpool import Stop
from gpunode.inventory import load
from gpunode.roles import search_path
from gpunode.roles.loader import load_role
from tests.execute.fakehost import FakeHost

STAMP = """\
- name: stamp
  op: command
  cmd: touch /etc/site-stamp
  creates: /etc/site-stamp
"""


def apply(tmp: Path, fake: FakeHost, tasks: str, **opts: Any) -> tuple[HostResult, list[ev.Event]]:
    """`gpunode apply` of a role of `tasks` to the fake host, as execute/run.py runs a host."""
    role = tmp / "roles" / "site"
    role.mkdir(parents=True, exist_ok=True)
    (role / "tasks.yaml").write_text(textwrap.dedent(tasks))
    inv = tmp / "inventory.yaml"
    inv.write_text("hosts:\n  gpu1: {connection: local, stack: {roles: [site]}}\n")
    load_role.cache_clear()
    seen: list[ev.Event] = []
    bus = Bus()
    bus.subscribe(seen.append)
    options = Options(search=search_path(inv), poll_interval=0.01, run_id="test-run", **opts)
    run = HostRun(fake, load(inv).hosts["gpu1"], bus, options)  # type: ignore[arg-type]
    return run.run(), seen


def reads(fake: FakeHost) -> int:
    return sum("gpunode-facts" in c for c in fake.asked)


def test_changes_then_one_read_that_finds_them_made(tmp_path: Path) -> None:
    fake = FakeHost()
    result, _ = apply(tmp_path, fake, STAMP)
    assert result.status == "changed", result.message
    assert fake.paths == {"/etc/site-stamp"} and fake.ran == ["touch /etc/site-stamp"]
    assert reads(fake) == 2  # the plan, then the read that found the stamp made
    # every command the host was asked is a round trip, the lock's two included
    assert result.round_trips == len(fake.asked) == 5  # lock, facts, stamp, facts, lock
    again, _ = apply(tmp_path, fake, STAMP)
    assert again.status == "ok" and fake.ran == ["touch /etc/site-stamp"]
    assert again.round_trips == 3  # the lock, the facts, the lock given back


def test_a_change_the_plan_asks_for_again_does_not_converge(tmp_path: Path) -> None:
    fake = FakeHost()  # `true` makes nothing: the stamp is still missing when read again
    result, _ = apply(tmp_path, fake, STAMP.replace("cmd: touch /etc/site-stamp", "cmd: 'true'"))
    assert result.status == "failed"
    assert result.message.startswith("does not converge: site: stamp (/etc/site-stamp missing)")
    assert fake.ran == ["true"]  # made once, never again in the same run


def test_a_change_needed_only_after_others_is_made_in_the_same_run(tmp_path: Path) -> None:
    """The re-plan: the read after the changes finds one more change (the second task's
    check depends on the first task's work): it is made, and the host read again."""
    tasks = STAMP + textwrap.dedent("""\
        - name: after the stamp
          op: command
          cmd: touch /etc/site-second
          creates: /etc/site-second
          unless: test ! -e /etc/site-stamp
        """)
    fake = FakeHost()
    result, _ = apply(tmp_path, fake, tasks)
    assert result.status == "changed", result.message
    assert fake.ran == ["touch /etc/site-stamp", "touch /etc/site-second"]
    assert fake.paths == {"/etc/site-stamp", "/etc/site-second"}
    # three reads, each in two round trips: the role's `unless:` is asked once the facts
    # show the host is not refused
    assert reads(fake) == 6 and [c.status for c in result.changes] == ["changed"] * 2


def test_a_reboot_then_the_host_read_again_under_its_new_boot(tmp_path: Path) -> None:
    fake = FakeHost()
    first_boot = fake.boot
    tasks = STAMP + textwrap.dedent(f"""\
        - name: load it
          op: reboot
          reason: the stamp is read at boot
          when: facts.boot_id == '{first_boot}'
        """)
    result, seen = apply(tmp_path, fake, tasks)
    assert result.status == "changed", result.message
    assert result.rebooted and result.boot_id == fake.boot != first_boot
    assert [type(e).__name__ for e in seen if isinstance(e, ev.RebootStarted | ev.RebootFinished)] \
        == ["RebootStarted", "RebootFinished"]  # fmt: skip
    assert fake.asked.count("cat /proc/sys/kernel/random/boot_id") == 1  # once it answered
    assert sum("lock: taken" in c for c in fake.asked) == 2  # the lock, taken again after
    assert fake.ran == ["touch /etc/site-stamp"] and reads(fake) == 2


def test_a_reboot_that_leaves_the_reason_is_a_failure_not_a_loop(tmp_path: Path) -> None:
    fake = FakeHost()
    tasks = "- name: load it\n  op: reboot\n  reason: always wanted\n"
    result, _ = apply(tmp_path, fake, tasks)
    assert result.status == "failed" and result.rebooted
    assert result.message == "still needs a reboot after rebooting: always wanted"
    assert fake.asked.count(__import__("gpunode.execute.host").execute.host.REBOOT) == 1


def test_no_reboot_stops_before_it(tmp_path: Path) -> None:
    fake = FakeHost()
    tasks = STAMP + "- name: load it\n  op: reboot\n  reason: the stamp is read at boot\n"
    result, _ = apply(tmp_path, fake, tasks, no_reboot=True)
    assert result.status == "reboot-pending" and not result.rebooted
    assert fake.paths == {"/etc/site-stamp"} and reads(fake) == 1


def test_a_refused_plan_changes_nothing(tmp_path: Path) -> None:
    fake = FakeHost()
    tasks = (
        STAMP + "- name: never\n  op: apt_packages\n  packages: [x11-apps]\n  never: [x11-apps]\n"
    )
    result, _ = apply(tmp_path, fake, tasks)
    assert result.status == "failed" and result.refused
    assert "listed under never" in result.message
    assert fake.ran == [] and fake.paths == set()


def test_a_failed_change_stops_the_host_before_the_next(tmp_path: Path) -> None:
    fake = FakeHost()
    tasks = "- name: broken\n  op: command\n  cmd: exit 3\n  creates: /etc/never\n" + STAMP
    result, _ = apply(tmp_path, fake, tasks)
    assert result.status == "failed" and result.message.startswith("site: broken: exit 3")
    assert fake.ran == ["exit 3"] and fake.paths == set()


def test_ctrl_c_between_changes_leaves_the_rest_unmade(tmp_path: Path) -> None:
    fake = FakeHost()
    stop = Stop()
    fake.on_change = lambda command: stop.request("interrupt", 130)
    tasks = STAMP + "- name: second\n  op: command\n  cmd: touch /etc/b\n  creates: /etc/b\n"
    result, _ = apply(tmp_path, fake, tasks, stop=stop)
    assert result.status == "interrupted"
    assert result.message == "stopped before change 2/2 (site: second), 1 change(s) made"
    assert fake.ran == ["touch /etc/site-stamp"] and fake.paths == {"/etc/site-stamp"}
    assert fake.asked[-1].endswith("echo 'lock: released'")  # the lock given back all the same


def test_check_changes_nothing_and_takes_no_lock(tmp_path: Path) -> None:
    fake = FakeHost()
    result, _ = apply(tmp_path, fake, STAMP, check=True)
    assert result.status == "changed" and [c.status for c in result.changes] == ["skipped"]
    assert fake.ran == [] and len(fake.asked) == 1  # the facts alone
