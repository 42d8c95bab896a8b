"""The plain live view: one line per event that matters, for logs and pipes."""

from __future__ import annotations

from typing import TextIO

from gpunode.events import (
    ChangeFinished,
    CommandOutput,
    Event,
    HookFinished,
    HostUnreachable,
    PlanReady,
    RebootFinished,
    RebootPending,
    RebootStarted,
    RunStarted,
    SmokeResult,
)


class PlainPrinter:
    """Subscribe to a Bus; writes lines like `changed: [gpu1] driver: NVIDIA driver ...`."""

    def __init__(self, out: TextIO, *, verbose: bool = False, diff: bool = False) -> None:
        self.out = out
        self.verbose = verbose
        self.diff = diff

    def __call__(self, e: Event) -> None:
        line = self.line(e)
        if line is not None:
            self.out.write(line + "\n")
            self.out.flush()

    def line(self, e: Event) -> str | None:
        h = f"[{e.host}]"
        if isinstance(e, RunStarted):
            mode = " (check: nothing will be changed)" if e.check else ""
            return f"{e.command} on {len(e.hosts)} host{'s' * (len(e.hosts) != 1)}{mode}"
        if isinstance(e, HostUnreachable):
            return f"unreachable: {h} {e.reason}"
        if isinstance(e, PlanReady):
            if e.refused:
                return f"refused: {h} {e.refused}"
            n = len(e.changes)
            return f"plan: {h} {n} change{'s' * (n != 1)}" if n else f"ok: {h} already converged"
        if isinstance(e, ChangeFinished):
            word = {"skipped": "would change", "changed": "changed", "failed": "failed"}.get(
                e.status, e.status
            )
            text = f"{word}: {h} {e.title}"
            if e.message:
                text += f": {e.message}"
            if e.status != "skipped":
                text += f" ({e.seconds:.1f}s)"
            if self.diff and e.diff:
                text += "\n" + e.diff.rstrip("\n")
            return text
        if isinstance(e, RebootStarted):
            return f"rebooting: {h} {e.reason}"
        if isinstance(e, RebootFinished):
            return f"rebooted: {h} new boot {e.boot_id} after {e.seconds:.1f}s"
        if isinstance(e, RebootPending):
            return f"reboot pending: {h} {e.reason} (--no-reboot: apply again to reboot)"
        if isinstance(e, HookFinished):
            why = f": {e.message}" if e.message else ""
            return f"hook {e.status}: {h} {e.name} ({e.seconds:.1f}s){why}"
        if isinstance(e, SmokeResult):
            r = e.result
            reason = f": {r.reason}" if r.reason else ""
            return f"smoke {r.status}: {h} {r.name}{reason}"
        if isinstance(e, CommandOutput) and self.verbose:
            return "\n".join(f"  {h} {ln}" for ln in e.text.rstrip("\n").splitlines())
        return None
