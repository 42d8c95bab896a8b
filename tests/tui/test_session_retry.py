"""A retry, from the terminal UI's `r` or from the session itself, rolls out as the run
did: the same --serial batches, the same --max-fail stop."""

from __future__ import annotations

import time
from pathlib import Path
from unittest.mock import ANY

from textual.pilot import Pilot

from gpunode import events as ev
from gpunode.execute.host import Options
from gpunode.execute.result import RunResult
from gpunode.execute.session import ApplySession, Pacing
from gpunode.inventory import load
from gpunode.tui.app import GpunodeApp
from gpunode.tui.run_screen import RunScreen
from gpunode.tui.runstate import RunState
from tests.transport.sshd import free_port

NAMES = ("a", "b", "c")


def make_session(tmp_path: Path, pacing: Pacing) -> ApplySession:
    """Three hosts on closed loopback ports: each is unreachable at once."""
    hosts = "".join(f"  {n}: {{address: 127.0.0.1, ssh: {{port: {free_port()}}}}}\n" for n in NAMES)
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n  ssh:\n    user: nobody\n    connect_timeout: 5\n"
        f"    known_hosts_file: '{tmp_path / 'known_hosts'}'\n    config_file: null\n"
        f"hosts:\n{hosts}"
    )
    selected = load(str(inv)).select(None)
    return ApplySession(selected, Options(smoke=False), pacing=pacing)


def outcome(run: RunResult | None) -> dict[str, tuple[str, str]]:
    assert run is not None
    return {n: (r.status, r.message) for n, r in run.hosts.items()}


def assert_rolled_out_serially(run: RunResult | None) -> None:
    got = outcome(run)
    assert got["a"][0] == "unreachable", got
    # with --serial 1 --max-fail 0 the first unreachable host stops the later batches
    assert got["b"] == got["c"] == ("skipped", "not started: --max-fail reached"), got


def test_api_retry_keeps_serial_and_max_fail(tmp_path: Path) -> None:
    session = make_session(tmp_path, Pacing(serial=1, max_fail=0))
    session.run()
    assert_rolled_out_serially(session.wait(0))
    session.retry(list(NAMES))
    assert_rolled_out_serially(session.finish(timeout=30))


def one_at_a_time(seen: list[ev.Event]) -> bool:
    """Whether each host connected only after the one before it had finished."""
    order = [(type(e).__name__, e.host) for e in seen if isinstance(e, STARTS_AND_ENDS)]
    return order == [(kind, n) for n in NAMES for kind in ("HostConnecting", "HostFinished")]


STARTS_AND_ENDS = (ev.HostConnecting, ev.HostFinished)


async def test_tui_retry_keeps_serial(tmp_path: Path) -> None:
    session = make_session(tmp_path, Pacing(serial=1))
    app = GpunodeApp(hosts=NAMES, on_retry=session.retry)
    seen: list[ev.Event] = []
    session.bus.subscribe(app.post_event)
    session.bus.subscribe(seen.append)
    async with app.run_test(size=(150, 45)) as pilot:
        session.start()
        await until_finished(app, pilot)
        assert one_at_a_time(seen) and run_state(app).retryable() == list(NAMES)
        seen.clear()
        await pilot.press("r")
        await until_finished(app, pilot)
    assert one_at_a_time(seen), seen
    assert outcome(session.finish(timeout=30)) == {n: ("unreachable", ANY) for n in NAMES}


def run_state(app: GpunodeApp) -> RunState:
    screen = app.screen
    assert isinstance(screen, RunScreen)
    return screen.state


async def until_finished(app: GpunodeApp, pilot: Pilot[int]) -> None:
    deadline = time.monotonic() + 30
    await pilot.pause(0.2)  # `r` clears the exit code at once; the run's events follow
    while run_state(app).exit_code is None:
        assert time.monotonic() < deadline, "the run never finished"
        await pilot.pause(0.05)
