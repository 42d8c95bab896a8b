"""What a host's read needs once its lock is taken, imported in the background.

A converged apply mostly waits: on the SSH handshake, on sshd starting the first session
(PAM, the motd), on the lock's and the facts' round trips. The planner, the roles and
Jinja, the facts' model and the resolver are not needed before the host's lock is taken,
so start-up does not import them (`execute.host` imports them where it uses them): this
thread does, started with the run, while the hosts connect.

Two threads never import into each other: this one imports the hosts' transports first,
then the rest; a host's thread imports its transport (waiting, holding no import lock,
while this thread finishes it), then waits (`wait`) for the modules it uses next before
it imports them: the facts command's first, then all of them. The rest waits for the
first host to be waiting itself (`idle`): imported beside the SSH handshake, it would only
slow the handshake down (one interpreter lock).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable

AFTER_LOCK = (
    "gpunode.execute.readhost",  # first: the facts command, whose round trip the rest fills
    "gpunode.plan.planner",
    "gpunode.plan.simulate",
    "gpunode.resolve.index",
    "gpunode.resolve.hostapt",
    "gpunode.execute.undo",
    "gpunode.execute.journal",
    "gpunode.roles.ops.apt",
)
"""The modules `execute.host` imports in its methods (tests/execute/test_warm.py checks)."""

_thread: threading.Thread | None = None
_started = threading.Lock()
_go = threading.Event()
_done: set[str] = set()
_progress = threading.Condition()


def start(transports: Iterable[str] = ()) -> None:
    """Import `transports` (module names), then AFTER_LOCK, in a daemon thread; once per
    process (a second call, by a later batch or command, does nothing)."""
    global _thread
    with _started:
        if _thread is not None:
            return
        args = (tuple(dict.fromkeys(transports)),)
        _thread = threading.Thread(target=_run, args=args, name="gpunode-warm", daemon=True)
        _thread.start()


def _run(transports: tuple[str, ...]) -> None:
    if _import(transports):
        _go.wait()
        _import(AFTER_LOCK)


def _import(names: tuple[str, ...]) -> bool:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the thread that needs it imports it again, and says why
            return False
        with _progress:
            _done.add(name)
            _progress.notify_all()
    return True


def idle() -> None:
    """A host's thread is about to wait on the network: the rest may be imported now."""
    _go.set()


def wait(module: str | None = None) -> None:
    """Return once the imports are done, or `module` (one of AFTER_LOCK) and those before it
    (at once when none were started)."""
    _go.set()
    thread = _thread
    if thread is None or thread is threading.current_thread():
        return
    if module is None:
        thread.join()
        return
    with _progress:
        _progress.wait_for(lambda: module in _done or not thread.is_alive())
