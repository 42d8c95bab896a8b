"""What a failed package change leaves is put back: the apt preferences the run rewrote and
the holds it lifted for a transaction that did not finish.

apt's own simulation runs before any change (gpunode.plan.simulate), so this is for what it
cannot foresee (a download or dpkg failing mid-transaction). Once a transaction has
finished, what came before it belongs to the new state and is no longer undone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from shlex import quote as q

from gpunode.changes import Change
from gpunode.plan.simulate import PREFERENCES_D
from gpunode.roles.ops.apt import write_file_step
from gpunode.transport.base import Transport, TransportError

UNHOLD = "apt-mark unhold -- "


@dataclass
class Undo:
    files: dict[str, bytes | None] = field(default_factory=dict)
    """Preference files as they were before this run changed them (None: absent)."""
    unheld: list[str] = field(default_factory=list)
    """Packages a transaction of this run unheld, still to be held again if it fails."""

    def before(self, change: Change, t: Transport) -> None:
        """Remember what `change` is about to alter."""
        path = change.path
        if path and path.startswith(PREFERENCES_D) and path not in self.files:
            self.files[path] = _read(t, path)
        for step in change.steps:
            if step.command.startswith(UNHOLD):
                self.unheld += [n for n in step.command[len(UNHOLD) :].split() if n]

    def settled(self) -> None:
        """A transaction finished: what it replaced is the new state."""
        self.files.clear()
        self.unheld.clear()

    @property
    def pending(self) -> bool:
        return bool(self.files or self.unheld)

    def restore(self, t: Transport) -> tuple[list[str], list[str]]:
        """Put everything back; (what was restored, what could not be, with why)."""
        done: list[str] = []
        failed: list[str] = []
        for path, content in self.files.items():
            if content is None:
                cmd, stdin = f"rm -f -- {q(path)}", None
            else:
                step = write_file_step(path, content.decode(), "0644")
                cmd, stdin = step.command, step.stdin
            _do(t, cmd, stdin, path, done, failed)
        if self.unheld:
            # only what is still installed: a removed package has no hold to restore
            names = " ".join(q(n) for n in self.unheld)
            cmd = (
                f"for n in {names}; do"
                " dpkg-query -W -f='${Status}' \"$n\" 2>/dev/null | grep -q ' installed$'"
                ' && { apt-mark hold -- "$n" >/dev/null || exit 1; }; done; true'
            )
            _do(t, cmd, None, "the holds on " + ", ".join(self.unheld), done, failed)
        self.settled()
        return done, failed


def _read(t: Transport, path: str) -> bytes | None:
    res = t.run(["cat", "--", path], sudo=True, timeout=30)
    return res.whole_stdout.encode() if res.ok else None  # cut: refused, never taken whole


def _do(
    t: Transport, cmd: str, stdin: str | None, what: str, done: list[str], failed: list[str]
) -> None:
    try:
        res = t.run(cmd, sudo=True, stdin=stdin.encode() if stdin else None, timeout=60)
    except TransportError as exc:
        failed.append(f"{what} ({exc})")
        return
    if res.ok:
        done.append(what)
    else:
        said = (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:]
        failed.append(f"{what} (exit {res.exit_code}{': ' + said[0] if said else ''})")
