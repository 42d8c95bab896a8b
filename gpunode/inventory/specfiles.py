"""What an env's environment.yml or requirements.txt installs, read from its text: the
conda specs and channels, pip's requirements and index. The inventory checks each file
when it is loaded; the conda role's op carries what it read on its step (`Packages`), for
`gpunode mirror` and plan's mirror check.

Refused, naming FILE:LINE: what cannot work on a host, where gpunode writes this one file
alone (`-r`/`-c` of another file, `-e`, a local path) and an option pip's requirements
files do not take. Kept but marked unmirrorable: what pip takes from elsewhere than an
index (`--find-links`, `-e`, a URL, `--no-binary`); a mirror cannot serve those.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field

from gpunode.changes import Packages
from gpunode.inventory.yamlpos import YamlError
from gpunode.inventory.yamlsrc import load_text

_NAME = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQUIREMENT = re.compile(rf"{_NAME}\s*(\[[A-Za-z0-9._,\s-]*\])?\s*([<>=!~(;@].*)?", re.S)
_CHANNEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/+-]*")
_CONDA = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*([A-Za-z0-9_.*+!<>=~,|\s-]*)")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://", re.I)

_ANOTHER_FILE = (
    "names another file, which the host does not have: gpunode writes this file alone to"
    " the host; write the lines of that file into this one"
)
_VALUED = {"-i": "index", "--index-url": "index", "--extra-index-url": "extra",
           "--trusted-host": "", "--only-binary": "", "--use-feature": "",
           "-f": "elsewhere", "--find-links": "elsewhere", "--no-binary": "elsewhere",
           "-e": "elsewhere", "--editable": "elsewhere",
           "-r": "file", "--requirement": "file", "-c": "file", "--constraint": "file"}  # fmt: skip
_FLAGS = {"--pre": "", "--prefer-binary": "", "--require-hashes": "", "--no-index": "elsewhere"}


@dataclass
class _Pip:
    where: str
    specs: list[str] = field(default_factory=list)
    index_url: str | None = None
    index_line: int = 0  # the line naming the file's own index: messages name it, not its URL
    extra: str | None = None
    unmirrorable: str | None = None

    def elsewhere(self, line: int, why: str) -> None:
        self.unmirrorable = self.unmirrorable or f"{self.where}:{line}: {why}"

    def option(self, words: list[str], line: int) -> None:
        name, eq, value = words[0].partition("=")
        kind = _VALUED.get(name, _FLAGS.get(name))
        if kind is None:
            raise ValueError(f"{self.where}:{line}: {name} is not an option gpunode takes here")
        if name in _VALUED:
            value = value if eq else (words[1] if len(words) > 1 else "")
            if not value:
                raise ValueError(f"{self.where}:{line}: {name} wants a value")
        if kind == "file":
            raise ValueError(f"{self.where}:{line}: {name} {value} {_ANOTHER_FILE}")
        if kind == "elsewhere":
            self.elsewhere(line, f"{name} takes packages from outside an index")
        elif kind == "index":
            self.index_url, self.index_line = value, line
        elif kind == "extra" and self.extra is None:
            self.extra = value
        elif kind == "extra":
            self.elsewhere(line, "a second --extra-index-url (a mirror serves one)")

    def requirement(self, text: str, line: int) -> None:
        # per-requirement options (--hash=sha256:...) are the host's pip's to check
        spec = re.split(r"\s+--?[a-z]", text, maxsplit=1)[0].strip()
        if spec.startswith((".", "/", "~", "file:")) or (
            not _URL.match(spec) and not _REQUIREMENT.fullmatch(spec)
        ):
            raise ValueError(
                f"{self.where}:{line}: {spec!r} is not a requirement (name, extras, version,"
                " marker): a local path is not on the host"
            )
        if _URL.match(spec) or re.match(rf"{_NAME}\s*(\[[^\]]*\])?\s*@", spec):
            self.elsewhere(line, f"{spec} is taken from its URL, not from an index")
            return
        self.specs.append(spec)

    def line(self, text: str, line: int) -> None:
        text = re.sub(r"(^|\s)#.*", "", text).strip()
        if not text:
            return
        if text.startswith("-"):
            try:
                words = shlex.split(text)
            except ValueError as exc:
                raise ValueError(f"{self.where}:{line}: {exc}") from None
            self.option(words, line)
        else:
            self.requirement(text, line)

    def packages(self, env: str, index_url: str | None) -> Packages:
        origin = f"{self.where}:{self.index_line}" if self.index_line else self.where
        return Packages(
            "pip", env, tuple(self.specs), self.index_url or index_url, self.extra,
            origin=origin, unmirrorable=self.unmirrorable,
        )  # fmt: skip


@functools.cache
def check(kind: str, text: str, where: str) -> None:
    """ValueError naming FILE:LINE of what cannot work on a host; once per file's text (the
    inventory reads a file once per host that merges it)."""
    if kind == "environment":
        environment(text, where, env="", index_url=None)
    else:
        requirements(text, where, env="", index_url=None)


def requirements(text: str, where: str, *, env: str, index_url: str | None) -> Packages:
    """A requirements.txt's pip install: `index_url` unless the file names its own."""
    pip = _Pip(where)
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        first, joined = n + 1, lines[n]
        while joined.endswith("\\") and n + 1 < len(lines):  # a continued line
            n += 1
            joined = joined[:-1] + lines[n]
        pip.line(joined.removesuffix("\\"), first)
        n += 1
    return pip.packages(env, index_url)


def environment(text: str, where: str, *, env: str, index_url: str | None) -> tuple[Packages, ...]:
    """An environment.yml's conda install (its `dependencies:` from its `channels:`) and
    its `pip:` sub-list's install (through `index_url`, PIP_INDEX_URL, unless it names one)."""
    try:
        src = load_text(text, where)
    except YamlError as exc:
        raise ValueError(str(exc)) from None
    doc = src.data if src.data is not None else {}
    if not isinstance(doc, dict):
        raise ValueError(f"{where}:1: not an environment.yml (a mapping with dependencies:)")

    def at(*path: str | int) -> str:
        pos = src.position(path)
        return f"{pos.file}:{pos.line}"

    def listed(key: str) -> list[object]:
        got = doc.get(key) or []
        if not isinstance(got, list):
            raise ValueError(f"{at(key)}: {key} must be a list")
        return got

    channels: list[str] = []
    for i, c in enumerate(listed("channels")):
        if not isinstance(c, str) or not _CHANNEL.fullmatch(c):
            raise ValueError(f"{at('channels', i)}: {c!r} is not a conda channel or its URL")
        if c != "nodefaults":  # conda's word for "not the defaults too", not a channel
            channels.append(c.rstrip("/"))
    specs: list[str] = []
    named: list[str] = []  # channels a spec names (conda-forge::numpy)
    pip: _Pip | None = None
    for i, dep in enumerate(listed("dependencies")):
        if isinstance(dep, dict) and list(dep) == ["pip"]:
            pip = pip or _Pip(where)
            entries = dep["pip"] or []
            if not isinstance(entries, list):
                raise ValueError(f"{at('dependencies', i, 'pip')}: pip: must be a list")
            for j, entry in enumerate(entries):
                line = src.position(("dependencies", i, "pip", j)).line
                if not isinstance(entry, str):
                    raise ValueError(f"{where}:{line}: {entry!r} is not a pip requirement")
                pip.line(entry, line)
            continue
        spec = dep if isinstance(dep, str) else ""
        channel, _, spec = spec.rpartition("::")
        m = _CONDA.fullmatch(spec.strip())
        if (
            m is None
            or m[2][:1] not in "0123456789*<>=!~"
            or (channel and not _CHANNEL.fullmatch(channel))
        ):
            raise ValueError(
                f"{at('dependencies', i)}: {dep!r} is not a conda package spec"
                " (name, name=version, name>=version) or a `pip:` list"
            )
        named += [channel] if channel else []
        specs.append(_conda_spec(m[1], m[2].strip()))
    conda = Packages(
        "conda", env, tuple(specs), channels=tuple(dict.fromkeys([*channels, *named])),
        origin=where,
    )  # fmt: skip
    if pip is None:
        return (conda,)
    return (conda, pip.packages(env, index_url))


def _conda_spec(name: str, rest: str) -> str:
    """A spec as the mirror's channel reads it: name=1.26[=build], `name >=1.26,<2` (one
    constraint word), `name 1.26.4 build`."""
    word = re.sub(r"\s+", "", rest)
    if rest[:1] == "=" and rest[:2] != "==":
        return name + word
    if rest and rest[0] in "<>!~=":
        return f"{name} {word}"
    return " ".join([name, *rest.split()])
