"""What an operation is: task arguments + facts in, Changes out only where they differ.

An operation never talks to a host. Everything it compares against comes from
the one facts round trip (HostFacts, including hashes of the files it manages)
or from probes: small shell checks batched into a single extra round trip.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from gpunode.facts.model import HostFacts
from gpunode.plan.change import Change, Step

APT_ENV = "DEBIAN_FRONTEND=noninteractive"


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Probe:
    """A shell check whose exit status (0 = true) an operation needs."""

    key: str
    command: str


@dataclass
class OpContext:
    role: str
    task: str
    facts: HostFacts
    tags: tuple[str, ...] = ()
    apt_lock_timeout: int = 120
    on_change: tuple[str, ...] = ()
    probes: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def change(
        self,
        op: str,
        reason: str,
        commands: Sequence[str | Step],
        *,
        reboot: bool = False,
        apt: bool = False,
        path: str | None = None,
        before: str | None = None,
        after: str | None = None,
        sudo: bool = True,
    ) -> Change:
        steps = [c if isinstance(c, Step) else Step(c) for c in commands]
        steps += [Step(c) for c in self.on_change]
        return Change(
            role=self.role,
            task=self.task,
            op=op,
            reason=reason,
            steps=tuple(steps),
            sudo=sudo,
            reboot=reboot,
            apt=apt,
            path=path,
            before=before,
            after=after,
            tags=self.tags,
        )

    def probe(self, probe: Probe) -> bool | None:
        return self.probes.get(probe.key)


class Operation:
    name: ClassVar[str]
    args_model: ClassVar[type[Args]]

    def parse(self, raw: dict[str, Any]) -> Args:
        return self.args_model.model_validate(raw)

    def paths(self, args: Any) -> list[str]:
        """Files whose sha256 the facts round trip should report."""
        return []

    def probes(self, args: Any) -> list[Probe]:
        return []

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        raise NotImplementedError


def q(value: str) -> str:
    return shlex.quote(value)


def file_hash(facts: HostFacts, path: str) -> str | None:
    """The file's sha256 from the facts, or None when it is absent or unreadable."""
    digest = facts.files.get(path)
    return digest if digest is not None and len(digest) == 64 else None


def attrs_fix(facts: HostFacts, path: str, mode: str, owner: str) -> tuple[str, list[str]]:
    """Why and how to set a file's mode and owner; ("", []) when they match or are unknown.

    `mode` is octal ("0644"); `owner` is "user[:group]", by name or number.
    """
    have = facts.file_attrs.get(path)
    if have is None:
        return "", []
    why: list[str] = []
    cmds: list[str] = []
    with contextlib.suppress(ValueError):  # a symbolic mode cannot be compared: leave it
        if int(have.mode, 8) != int(mode, 8):
            why.append(f"{path} mode {int(have.mode, 8):04o}, want {mode}")
            cmds.append(f"chmod {q(mode)} {q(path)}")
    names, ids = have.owner.split(":"), have.ids.split(":")
    wanted = owner.split(":", 1)  # "user" alone leaves the group as it is
    if any(w not in (n, i) for w, n, i in zip(wanted, names, ids, strict=False)):
        why.append(f"{path} owner {have.owner}, want {owner}")
        cmds.append(f"chown {q(owner)} {q(path)}")
    return "; ".join(why), cmds


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def probe_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
