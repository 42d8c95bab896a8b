"""What an operation is: task arguments + facts in, Changes out only where they differ.

An operation never talks to a host. Everything it compares against comes from
the one facts round trip (HostFacts, including hashes of the files it manages)
or from probes: small shell checks batched into a single extra round trip.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, create_model

from gpunode.changes import Change, Step
from gpunode.facts.model import HostFacts
from gpunode.roles.probe import Probe


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Every value that reaches a command line or a managed file has a shape, checked when a
# task's arguments are parsed: a value outside it refuses the host at plan time, naming the
# task's file:line. Quoting keeps a value one argument; these keep it from being an option
# ("-o..." is one to apt even quoted), a second line of a config file, or a path elsewhere.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shaped(pattern: str, what: str) -> Callable[[str], str]:
    rx = re.compile(pattern)

    def check(value: str) -> str:
        if not rx.fullmatch(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    check.__doc__ = what  # the shape, as the operations reference shows it
    return check


def _no_control(value: str) -> str:
    """one line (no newline or other control character; a tab is allowed)"""
    bad = _CONTROL.search(value.replace("\t", " "))
    if bad:
        raise ValueError(f"{value!r} holds a control character ({bad.group()!r}): one line only")
    return value


def _abs_path(value: str) -> str:
    """an absolute path (/..., no control characters)"""
    if not value.startswith("/") or _CONTROL.search(value):
        raise ValueError(f"{value!r} is not an absolute path (/..., no control characters)")
    return value


DEB_NAME = r"[a-z0-9][a-z0-9+.-]+"
# epoch:upstream-revision, with apt's globs for a pin ("550.163.01-*")
DEB_VERSION = r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~*?-]*"

PackageName = Annotated[
    str, AfterValidator(shaped(DEB_NAME, f"a Debian package name ({DEB_NAME})"))
]
DebVersion = Annotated[
    str, AfterValidator(shaped(DEB_VERSION, "a Debian version (1.2-1, 2:1.0~rc1, 550.163.01-*)"))
]


def _file_path(value: str) -> str:
    """a file's absolute path (/..., not ending in /, . or ..; no control characters)"""
    _abs_path(value)
    if value.endswith("/") or value.rsplit("/", 1)[1] in (".", ".."):
        raise ValueError(f"{value!r} is not a file's path (it names a directory)")
    return value


AbsPath = Annotated[str, AfterValidator(_abs_path)]
FilePath = Annotated[str, AfterValidator(_file_path)]
Line = Annotated[str, AfterValidator(_no_control)]
"""One line of text: no newline or other control character (a tab is allowed)."""
Url = Annotated[
    str,
    AfterValidator(
        shaped(r"[a-z][a-z0-9+.-]*:[^\s\x00-\x1f\x7f]+", "a URL (scheme:..., no spaces)")
    ),
]
Word = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9_/.~][A-Za-z0-9_/.:~+-]*", "one word (no spaces)"))
]
"""A token of a sources line (suite, component): no spaces, not an option."""
ModuleName = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9_-]+", "a kernel module name ([A-Za-z0-9_-]+)"))
]
Mode = Annotated[str, AfterValidator(shaped(r"[0-7]{3,4}", "an octal mode (0644)"))]
_ID = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
Owner = Annotated[str, AfterValidator(shaped(f"{_ID}(?::{_ID})?", "user[:group]"))]
Name = Annotated[
    str, AfterValidator(shaped(r"[A-Za-z0-9_][A-Za-z0-9_.@:+-]*", "a name (not an option)"))
]
"""A systemd unit, an alternative, a conda env: letters, digits, `_.@:+-`, no leading `-`."""


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
    allow_change_held: bool = False
    """A hold the admin set (not one gpunode recorded) may be changed (--allow-change-held)."""

    def change(
        self,
        op: Operation,
        reason: str,
        commands: Sequence[str | Step],
        *,
        handlers: bool = True,
        reboot: bool = False,
        apt: bool = False,
        path: str | None = None,
        after: str | None = None,
        sudo: bool = True,
    ) -> Change:
        """`handlers`: the task's on_change commands run after `commands`."""
        steps = [c if isinstance(c, Step) else Step(c) for c in commands]
        steps += [Step(c) for c in self.on_change] if handlers else []
        return Change(
            role=self.role,
            task=self.task,
            op=op.name,
            reason=reason,
            steps=tuple(steps),
            sudo=sudo,
            reboot=reboot,
            apt=apt,
            apt_sources=op.changes_apt_sources,
            long_running=op.long_running,
            before_reboot=op.before_reboot,
            path=path,
            after=after,
            tags=self.tags,
        )

    def probe(self, probe: Probe) -> bool | None:
        return self.probes.get(probe.key)


class Operation:
    name: ClassVar[str]
    args_model: ClassVar[type[Args]]
    renders_template: ClassVar[bool] = False
    """Its `src:` is a template of the role, rendered into `content` before parsing."""
    changes_apt_sources: ClassVar[bool] = False
    """Its changes leave apt's lists stale (Change.apt_sources)."""
    long_running: ClassVar[bool] = False
    """Its changes may stay silent for minutes (Change.long_running)."""
    before_reboot: ClassVar[bool] = False
    """Its changes check the others' work: they run last, before the reboot."""

    def parse(self, raw: dict[str, Any]) -> Args:
        return self.args_model.model_validate(raw)

    path_args: ClassVar[tuple[str, ...]] = ()
    """The arguments `paths` reads. Before the facts are known only these are rendered
    (`parse_paths`): never a file's content, which may need the versions resolved."""

    def parse_paths(self, raw: dict[str, Any]) -> Args:
        """Arguments holding only `path_args` (validated as `parse` would), for `paths`."""
        given = _paths_model(self.args_model, self.path_args).model_validate(raw)
        return self.args_model.model_construct(**dict(given))

    def paths(self, args: Any) -> list[str]:
        """Files whose sha256 the facts round trip should report."""
        return []

    def probes(self, args: Any) -> list[Probe]:
        return []

    def plan(self, args: Any, ctx: OpContext) -> list[Change]:
        raise NotImplementedError


@cache
def _paths_model(model: type[Args], names: tuple[str, ...]) -> type[Args]:
    fields: Any = {n: (model.model_fields[n].annotation, model.model_fields[n]) for n in names}
    return create_model(f"{model.__name__}Paths", __base__=Args, **fields)


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
