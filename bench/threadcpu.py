"""Where a gpunode command's controller CPU goes, thread by thread and phase by phase.

    python -m bench.threadcpu [--out FILE] -- apply lab.yaml --yes --json --no-smoke

Runs `gpunode ARGS` in this process and adds up each thread's CPU (`time.thread_time`):
the hosts' threads, paramiko's transport threads (a connection's reader: key exchange,
each packet's decryption and MAC) and the main thread; and, in the hosts' threads, the
CPU of each step of a host's run (the probes' walk, the plan's walk, the facts session,
the lock's sessions...), summed over the hosts. Measurement only: the wrappers are put
on for this process. Prints to FILE (default stderr), as the command's own output is
its own. Run it in a lab (`gpunode lab up --hosts 50`, a cold apply first).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
_threads: collections.Counter[str] = collections.Counter()
_steps: collections.defaultdict[str, float] = collections.defaultdict(float)
_lock = threading.Lock()


def _counted(kind: str, run: Callable[[Any], None]) -> Callable[[Any], None]:
    def counted(self: Any) -> None:
        start = time.thread_time()
        try:
            run(self)
        finally:
            with _lock:
                _cpu[kind] += time.thread_time() - start
                _threads[kind] += 1

    return counted


def _step(owner: Any, name: str, label: str) -> None:
    real = getattr(owner, name)
    _steps[label] = 0.0  # printed in this order

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            with _lock:
                _steps[label] += time.thread_time() - start

    setattr(owner, name, timed)


def _instrument() -> None:
    import paramiko.transport

    import gpunode.execute.firstask as firstask
    import gpunode.execute.host as host
    import gpunode.execute.hostlock as hostlock
    import gpunode.execute.readhost as readhost
    import gpunode.plan.planner as planner
    import gpunode.roles.walk as walk
    import gpunode.transport.ssh as ssh

    thread_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        kind = "hosts" if self.name.startswith("gpunode-host") else "other"
        _counted(kind, thread_run)(self)

    threading.Thread.run = run  # type: ignore[method-assign]
    reader = paramiko.transport.Transport
    reader.run = _counted("paramiko", reader.run)  # type: ignore[method-assign,assignment]
    _step(ssh.SSHTransport, "connect", "connecting")
    _step(host.HostRun, "run", "a host's run, all of it:")
    _step(hostlock, "take", "  the lock taken")
    _step(host.HostRun, "read", "  read: facts, probes and plan")
    # a host's methods import these where they use them: the modules' own names are wrapped
    _step(firstask, "recall", "    the remembered ask")
    _step(planner, "managed_paths", "    the files' paths")
    _step(readhost, "read_host", "    the facts session")
    _step(readhost, "parse_facts", "      parsing the facts")
    _step(planner, "probes_for", "    the probes' walks")
    _step(walk, "precompile", "    compiling the roles")
    _step(planner, "plan_host", "    the plan (its walk)")
    _step(hostlock, "release", "  the lock given back")


def _readers_ended(deadline: float) -> None:
    """Wait for the readers of closed connections: each ends at its next look round (a
    second apart, gpunode.transport.ssh.READER_WAKE), and its CPU counts when it ends."""
    import paramiko.transport

    for t in threading.enumerate():
        if isinstance(t, paramiko.transport.Transport):
            t.join(max(0.0, deadline - time.monotonic()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the figures here (default: stderr)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="gpunode's arguments, after --")
    opts = ap.parse_args()
    argv = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    _instrument()
    from gpunode.cli import main as gpunode

    wall, process, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    with contextlib.suppress(SystemExit):
        gpunode(argv)
    _cpu["main"] = time.thread_time() - main_cpu
    _readers_ended(deadline=time.monotonic() + 5)
    lines = [
        f"wall {time.perf_counter() - wall:.2f} s, process CPU "
        f"{(time.process_time() - process) * 1000:.0f} ms",
        *(f"  {k:10} {_cpu[k] * 1000:8.1f} ms  ({_threads[k] or 1} threads)" for k in sorted(_cpu)),
        "in the hosts' threads, summed over the hosts:",
        *(f"  {k:32} {v * 1000:8.1f} ms" for k, v in _steps.items()),
    ]
    text = "\n".join(lines) + "\n"
    if opts.out:
        with open(opts.out, "a") as f:
            f.write(text)
    else:
        sys.stderr.write(text)


if __name__ == "__main__":
    main()
