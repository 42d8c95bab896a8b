"""Typed changes: what the planner found different and exactly how it would fix it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

LOG_TAIL = "last lines of "
"""A step that fails prints this, a log's path, then the log's last lines on stderr: the
failure's message keeps every line after it (a build's make.log), not only the last few."""


LOCK_SAY_EVERY = 5
"""Seconds between the lines a step waiting for a dpkg or apt lock prints (who holds it):
apt.inactivity_timeout must be longer, or a waiting host would read as a silent one."""


RELOAD_REFUSED = 75
"""The exit status of a module reload whose unload was refused (the module is in use): the
old module is still loaded, and a reboot loads the new one instead."""


@dataclass(frozen=True)
class Packages:
    """What a pip or conda step installs, as its op built the command: `gpunode mirror` and
    plan's mirror check read this, never the command's text."""

    tool: Literal["pip", "conda"]
    env: str
    """The env's prefix: /opt/conda/envs/torch."""
    specs: tuple[str, ...]
    """pip: requirements (torch==2.4.1, numpy>=1.26; python_version<"3.13"); conda: match
    specs (python=3.11, numpy >=1.26)."""
    index_url: str | None = None
    """pip's index; None: pip's default (PyPI)."""
    extra_index_url: str | None = None
    channels: tuple[str, ...] = ()
    """conda's channels, names or URLs, first first; empty: conda's own."""
    origin: str = ""
    """The inventory's file the specs were read from (envs/torch.yml), FILE:LINE when the
    file names its own index (messages name that line, never the URL: it may hold a
    token); empty: the task's."""
    unmirrorable: str | None = None
    """FILE:LINE and why, of a line a mirror cannot serve (--find-links, a URL)."""

    @property
    def index_shown(self) -> str | None:
        """pip's index as messages name it: the file's line when the file names it (its URL
        may hold a token), else its URL."""
        return self.origin if re.search(r":[0-9]+\Z", self.origin) else self.index_url


@dataclass(frozen=True)
class Fetch:
    """A file a step downloads and uses only when its sha256 is this one (the conda
    installer): `gpunode mirror` carries it and plan checks that a mirror holds it, from
    this, never from the command's text."""

    url: str
    sha256: str


@dataclass(frozen=True)
class Step:
    """One shell command; `stdin` feeds file contents so they never sit in argv."""

    command: str
    stdin: str | None = None
    installs: tuple[str, ...] = ()
    """For an `apt-get install` step, its quoted targets, so that installs can be joined."""
    packages: tuple[Packages, ...] = ()
    """What its pip or conda installs take (not part of the plan's fingerprint: the
    command says it)."""
    fetches: tuple[Fetch, ...] = ()
    """The pinned files its command downloads (not part of the fingerprint either)."""

    def shown(self) -> str:
        if self.stdin is None:
            return self.command
        return f"{self.command}  # <<{len(self.stdin.encode())} bytes on stdin>>"


def _step_key(step: Step) -> str:
    if step.stdin is None:
        return step.command
    return f"{step.command} <<sha256:{hashlib.sha256(step.stdin.encode()).hexdigest()}"


@dataclass(frozen=True)
class Change:
    role: str
    task: str
    op: str
    reason: str
    steps: tuple[Step, ...]
    sudo: bool = True
    reboot: bool = False
    """A reboot is needed after it; with no steps, the change is that reboot alone."""
    apt: bool = False
    """Installs packages: the executor refreshes apt's lists before the first one."""
    apt_sources: bool = False
    """Changes apt's sources: its lists are stale until read again."""
    long_running: bool = False
    """May stay silent for minutes (downloads, installs): apt.inactivity_timeout applies."""
    before_reboot: bool = False
    """A check of the work before it (a module built for the next boot): it runs after every
    other change, just before the reboot."""
    path: str | None = None
    after: str | None = None
    tags: tuple[str, ...] = ()
    reload: str | None = None
    """A kernel module reload in place of a reboot: what a reboot in its place would say
    (why the module must change). The executor reboots instead when the unload is refused
    (RELOAD_REFUSED); the planner folds it into a reboot the plan makes anyway."""

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles whose work this is: one apt transaction may serve several."""
        return tuple(self.role.split("+"))

    @property
    def only_reboot(self) -> bool:
        """Asks for a reboot and runs nothing itself: the executor reboots, after the rest."""
        return self.reboot and not self.steps

    @property
    def title(self) -> str:
        return f"{self.role}: {self.task}" if self.role else self.task

    @property
    def commands(self) -> list[str]:
        return [s.command for s in self.steps]

    @property
    def packages(self) -> list[Packages]:
        """What its steps' pip and conda installs take, step by step."""
        return [p for s in self.steps for p in s.packages]

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "task": self.task,
            "op": self.op,
            "reason": self.reason,
            "commands": [s.shown() for s in self.steps],
            "sudo": self.sudo,
            "reboot": self.reboot,
            "path": self.path,
            "tags": list(self.tags),
        }


@dataclass(frozen=True)
class HostPlan:
    host: str
    changes: tuple[Change, ...] = ()
    refused: str | None = None
    notes: tuple[str, ...] = field(default=())
    """Things worth telling that are not changes (no systemd, no GPU seen...)."""
    hooks: tuple[tuple[str, str], ...] = ()
    """(name, rendered shell) of the inventory's hooks this plan runs: before_disrupt and
    after_disrupt, when a change disrupts the GPUs (a reboot, a driver change under a loaded
    module)."""
    versions_on_host: tuple[str, ...] = ()
    """Packages whose versions the controller could not read from the repository's index
    (refused says why): the executor asks the host's apt for them and plans again."""
    reads: tuple[str, ...] = ()
    """The files whose sha256 its tasks compared (Operation.paths): a path the facts did not
    hash (one only the facts could name) is hashed, and the host planned again."""

    @property
    def empty(self) -> bool:
        return not self.changes and self.refused is None

    @property
    def needs_reboot(self) -> bool:
        return any(c.reboot for c in self.changes)

    def hook(self, name: str) -> str | None:
        return dict(self.hooks).get(name)

    def fingerprint(self) -> tuple[tuple[str, ...], ...]:
        """What the plan would do: each change's title and exact commands (a file's content
        by its hash), the hooks, a refusal. Reasons are left out: they only explain."""
        out: list[tuple[str, ...]] = [("refused", self.refused or "")]
        out += [(c.title, *(_step_key(s) for s in c.steps)) for c in self.changes]
        out += [("hook", name, shell) for name, shell in self.hooks]
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "refused": self.refused,
            "changes": [c.to_json() for c in self.changes],
            "hooks": dict(self.hooks),
            "notes": list(self.notes),
            "versions_on_host": list(self.versions_on_host),
        }
