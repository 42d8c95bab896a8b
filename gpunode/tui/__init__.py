"""The terminal UI: `run_tui` (gpunode apply), `run_smoke_tui` (gpunode smoke) and
`run_top` (gpunode top).

Each starts `GpunodeApp` (app.py) in its mode, and each mode has its own screen:
RunScreen (run_screen.py: run, GPUs and smoke tabs), SmokeScreen (smoke_screen.py: smoke
and GPUs tabs), both on LiveScreen (live_screen.py: the event inbox, tabs, a quit that
asks while the run goes on), or TopScreen (top_screen.py: the GPU view alone), all built
on HostsScreen (hosts_screen.py: header, host filter, footer, the shared keys). The views
they share are widgets of their own: RunView, GpuView, SmokeView; modal screens are in
screens.py (the key list `?` shows is made from the bindings by keyhelp.py), text helpers
in fmt.py. Importing this package is cheap; Textual loads in `run_tui`/`run_top`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from gpunode.events import Bus, Event
    from gpunode.execute.session import ApplySession
    from gpunode.monitor.board import Board
    from gpunode.smoke.session import SmokeSession


def run_tui(
    events: Bus | Iterable[Event] | None = None,
    *,
    hosts: Sequence[str] = (),
    mode: Literal["run", "smoke"] = "run",
    work: Callable[[], Any] | None = None,
    on_retry: Callable[[list[str]], None] | None = None,
    board: Board | None = None,
    title: str = "gpunode apply",
    fleet: str = "",
) -> int:
    """Show a run full-screen until the user quits; returns the run's exit code.

    events: a Bus to subscribe to (events from any thread), or an iterable of
        events consumed on a background thread (e.g. a recorded run).
    hosts: the hosts to show as waiting before the first event.
    work: started on a daemon thread once the app is up (it should emit to the Bus).
    on_retry: called with the failed+unreachable host names when the user presses `r`;
        it must return quickly and run the work on its own thread, emitting events.
    board: a monitor Board (with its Sampler already started) for the GPUs tab.
    fleet: the inventory's name, which the GPUs tab's overview shows.
    Returns RunFinished.exit_code, 0 if the run never finished and was not running,
    130 if the user quit while the run was in progress, or 1 if the app itself failed.
    """
    from gpunode.events import Bus
    from gpunode.tui.app import GpunodeApp

    jobs: list[Callable[[], Any]] = []
    if events is not None and not isinstance(events, Bus):
        recorded = events

        def replay() -> None:
            for e in recorded:
                app.post_event(e)

        jobs.append(replay)
    if work is not None:
        jobs.append(work)

    def start() -> None:
        def run_jobs() -> None:
            for job in jobs:
                job()

        threading.Thread(target=run_jobs, name="gpunode-run", daemon=True).start()

    app = GpunodeApp(
        mode=mode,
        hosts=hosts,
        board=board,
        on_retry=on_retry,
        title=title,
        fleet=fleet,
        on_ready=start if jobs else None,
    )
    if isinstance(events, Bus):
        events.subscribe(app.post_event)
    return _exit_code(app, app.run())


def run_apply_tui(session: ApplySession, *, fleet: str = "") -> int:
    """An apply session in the run view: the session runs once the app is up, `r` calls
    its retry, and the GPUs tab reads the hosts' GPUs as `gpunode top` does. `fleet`: the
    inventory's name, in the title and the GPUs overview."""
    from gpunode.monitor.hosts import sampling

    hosts = session.hosts
    with sampling(hosts, interval=1.0, use_nvml=False, stale_after=5.0) as board:
        return run_tui(
            session.bus,
            hosts=[h.name for h in hosts],
            work=session.run,
            board=board,
            on_retry=session.retry,
            title=f"gpunode apply · {fleet}" if fleet else "gpunode apply",
            fleet=fleet,
        )


def run_smoke_tui(session: SmokeSession, *, fleet: str = "") -> int:
    """A smoke session on its own screen: the session runs once the app is up, and the GPUs
    tab reads the hosts' GPUs while the tests load them. `fleet`: the inventory's name."""
    from gpunode.monitor.hosts import sampling

    hosts = session.hosts
    with sampling(hosts, interval=1.0, use_nvml=False, stale_after=5.0) as board:
        return run_tui(
            session.bus,
            hosts=[h.name for h in hosts],
            mode="smoke",
            work=session.run,
            board=board,
            title=f"gpunode smoke · {fleet}" if fleet else "gpunode smoke",
            fleet=fleet,
        )


def _exit_code(app: Any, code: int | None) -> int:
    """What the app exited with; a crash of the app itself (return_code 1) is not a success."""
    if code is not None:
        return int(code)
    return int(app.return_code or 0)


def run_top(
    board: Board, *, title: str = "gpunode top", fleet: str = "", interval: float = 0.5
) -> int:
    """The GPU view alone, reading `board` (fed by a started Sampler) until `q`; `fleet`
    (the inventory's name) heads its overview."""
    from gpunode.tui.app import GpunodeApp

    app = GpunodeApp(mode="top", board=board, title=title, fleet=fleet, gpu_interval=interval)
    return _exit_code(app, app.run())
