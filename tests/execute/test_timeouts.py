"""Per-setting timeouts as written: apt.inactivity_timeout applies to long steps exactly
(shorter than ssh's too), and `check` refuses the values that could not hold."""

from __future__ import annotations

from typing import Any

from gpunode.compat import check_host
from gpunode.events import Bus
from gpunode.execute.host import HostRun, Options
from gpunode.inventory.model import Host
from tests.plan.planhelpers import STACK, host_from


def with_settings(apt: str, ssh: str = "") -> Host:
    text = STACK.replace(
        "defaults:\n", f"defaults:\n  apt: {apt}\n" + (f"  ssh: {ssh}\n" if ssh else ""), 1
    )
    return host_from(text)


class Silent:
    """A transport as far as _idle sees one: its inactivity timeout."""

    name = "silent"
    inactivity_timeout: float | None = 30.0


def idle_during(host: Host, long: bool) -> Any:
    t = Silent()
    run = HostRun(t, host, Bus(), Options())  # type: ignore[arg-type]
    with run._idle(long):
        during = t.inactivity_timeout
    assert t.inactivity_timeout == 30.0  # the ssh value again after the step
    return during


def test_a_shorter_apt_inactivity_timeout_is_honoured_as_written() -> None:
    host = with_settings("{inactivity_timeout: 10}")
    assert idle_during(host, long=True) == 10
    assert idle_during(host, long=False) == 30


def test_a_longer_one_too() -> None:
    assert idle_during(with_settings("{inactivity_timeout: 900}"), long=True) == 900


def findings(host: Host) -> list[tuple[tuple[str | int, ...], str]]:
    return [(f.loc, f.message) for f in check_host(host) if f.loc[0] in ("apt", "ssh")]


def test_check_accepts_timeouts_that_hold() -> None:
    assert findings(with_settings("{inactivity_timeout: 10, lock_timeout: 60}")) == []


def test_check_refuses_a_silence_longer_than_any_command_may_run() -> None:
    got = findings(with_settings("{inactivity_timeout: 2000}", "{command_timeout: 1800}"))
    assert got == [(("apt", "inactivity_timeout"),
                    "2000 s is longer than ssh.command_timeout (1800 s), which stops any"
                    " command first: lower it, or raise ssh.command_timeout")]  # fmt: skip


def test_check_refuses_a_silence_shorter_than_a_lock_waits_lines() -> None:
    ((loc, message),) = findings(with_settings("{inactivity_timeout: 4}"))
    assert loc == ("apt", "inactivity_timeout")
    assert message.startswith("4 s is too short: a step waiting for the dpkg or apt lock")


def test_check_refuses_a_lock_wait_the_command_timeout_would_cut() -> None:
    ((loc, message),) = findings(with_settings("{lock_timeout: 900}", "{command_timeout: 600}"))
    assert loc == ("apt", "lock_timeout")
    assert message.startswith("900 s is not shorter than ssh.command_timeout (600 s)")
