"""Convert the JSON of `ansible-inventory --list` into a gpunode inventory document.

Ansible's format: one key per group (`{"hosts": [...], "children": [...], "vars": {...}}`,
or a plain list of hosts), `all` and `ungrouped` among them, and `_meta.hostvars` with each
host's variables. gpunode's groups hold hosts directly, so a group gets every host of its
descendants; groups are written parents first, then by name, which is the order Ansible
merges group variables in (a child's value wins over its parent's). `all`'s variables become
`defaults`, each host's own variables its entry under `hosts` (which wins over its groups).

Only the connection variables have a gpunode meaning; every other variable is reported, never
dropped silently, and passwords are never copied into the file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpunode.inventory.conflicts import differing, voice
from gpunode.inventory.model import NAME, PATTERN_HINTS
from gpunode.inventory.text import printable

SECRETS = frozenset(
    {
        "ansible_password",
        "ansible_ssh_pass",
        "ansible_ssh_password",
        "ansible_become_password",
        "ansible_become_pass",
        "ansible_sudo_pass",
        "ansible_sudo_password",
    }
)
"""Passwords: never written to the inventory (gpunode reads them from the environment)."""

# Ansible variable -> path in gpunode's settings (legacy ansible_ssh_* spellings included).
SIMPLE: dict[str, tuple[str, ...]] = {
    "ansible_host": ("address",),
    "ansible_ssh_host": ("address",),
    "ansible_user": ("ssh", "user"),
    "ansible_ssh_user": ("ssh", "user"),
    "ansible_port": ("ssh", "port"),
    "ansible_ssh_port": ("ssh", "port"),
    "ansible_ssh_private_key_file": ("ssh", "identity_file"),
    "ansible_private_key_file": ("ssh", "identity_file"),
}
SSH_CONNECTIONS = frozenset({"ssh", "smart", "paramiko", "paramiko_ssh"})
_NAME = re.compile(NAME)


COMMON_ARGS = frozenset({"ansible_ssh_common_args", "ansible_ssh_extra_args"})
_HOP = re.compile(r"(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9._-]+(?::\d{1,5})?")


def jump_of(args: str) -> tuple[str | None, list[str]]:
    """The jump host in ssh arguments (`-J hop`, `-o ProxyJump=hop`, or a ProxyCommand that
    is only `ssh -W %h:%p hop`), as `ssh.proxy_jump` writes it, and the arguments left.
    Anything else (a ProxyCommand doing more) stays among the arguments left: it is not
    translated, only named."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None, [args]
    jump: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(words):
        word, nxt = words[i], words[i + 1] if i + 1 < len(words) else ""
        if word == "-J" and _hops(nxt):
            jump, i = nxt, i + 2
            continue
        option = nxt if word == "-o" else word[2:] if word.startswith("-o") else ""
        key, _, value = option.partition("=")
        if key.lower() == "proxyjump" and _hops(value.strip()):
            jump = value.strip()
        elif key.lower() == "proxycommand" and _w_command(value.strip()):
            jump = _w_command(value.strip())
        elif option:
            rest += [word, nxt] if word == "-o" else [word]
        else:
            rest.append(word)
        i += 2 if word == "-o" else 1
    return jump, rest


def _hops(spec: str) -> bool:
    return bool(spec) and all(_HOP.fullmatch(h) for h in spec.split(","))


def _w_command(command: str) -> str | None:
    """`ssh [-q] [-p PORT] [-l USER] -W %h:%p [user@]host` as a jump spec (a hop with its
    own key, -i, is not: ssh.proxy_jump takes the hop's key from the ssh config)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0] not in ("ssh", "/usr/bin/ssh") or "-W" not in words:
        return None
    user = port = host = None
    i = 1
    while i < len(words):
        w = words[i]
        if w == "-q":
            i += 1
        elif w in ("-p", "-l", "-W") and i + 1 < len(words):
            if w == "-p" and words[i + 1].isdigit():
                port = words[i + 1]
            elif w == "-l":
                user = words[i + 1]
            elif w == "-W" and words[i + 1] not in ("%h:%p", "[%h]:%p"):
                return None
            i += 2
        elif host is None and not w.startswith("-"):
            host, i = w, i + 1
        else:
            return None
    if host is None:
        return None
    spec = (f"{user}@" if user and "@" not in host else "") + host + (f":{port}" if port else "")
    return spec if _hops(spec) else None


class ImportProblem(ValueError):
    """The Ansible JSON cannot become a gpunode inventory; the message says where and why."""


@dataclass
class Converted:
    document: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    secrets: dict[str, list[str]] = field(default_factory=dict)
    """Password variables left out, with the groups and hosts that set them."""


def convert(data: Any) -> Converted:
    """The gpunode document for `ansible-inventory --list` output, with what was not carried."""
    if not isinstance(data, dict):
        raise ImportProblem("not the JSON of `ansible-inventory --list`: expected an object")
    meta = data.get("_meta") or {}
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    hostvars = _mapping(hostvars or {}, "_meta.hostvars")
    groups = {name: _group(name, body) for name, body in data.items() if name != "_meta"}
    for name in groups:
        _check_name(name, "group")
    for name in [*hostvars, *(h for g in groups.values() for h in g.hosts)]:
        _check_name(name, "host")

    out = Converted(document={})
    unknown: dict[str, list[str]] = {}
    defaults = _settings(
        _mapping(groups["all"].vars if "all" in groups else {}, "all.vars"), "all", out, unknown
    )
    if defaults:
        out.document["defaults"] = defaults
    doc_groups: dict[str, Any] = {}
    for name in _ordered(groups):
        if name in {"all", "ungrouped"}:
            continue
        body = _settings(_mapping(groups[name].vars, f"{name}.vars"), name, out, unknown)
        members = _members(name, groups)
        if members:
            body["hosts"] = {h: None for h in members}
        if body:
            doc_groups[name] = body
    if doc_groups:
        out.document["groups"] = doc_groups
    grouped = {h for g in doc_groups.values() for h in g.get("hosts", {})}
    every = [*hostvars, *(h for g in groups.values() for h in g.hosts)]
    hosts: dict[str, Any] = {}
    for name in dict.fromkeys(every):
        entry = _settings(_mapping(hostvars.get(name) or {}, name), name, out, unknown, host=True)
        if "address" not in entry and entry.get("connection") != "local":
            entry["address"] = name  # Ansible connects to the name when ansible_host is unset
        if entry or name not in grouped:
            hosts[name] = entry
    _decide_for_hosts(doc_groups, hosts)
    if hosts:
        out.document["hosts"] = hosts
    for var, where in sorted(unknown.items()):
        out.warnings.append(f"{var}: no gpunode setting; not imported (set on {_few(where)})")
    for var, where in sorted(out.secrets.items()):
        out.warnings.append(
            f"{var}: a password, not copied (set on {_few(where)}): put it in an environment "
            "variable and name that with become_password_env, or pass -K"
        )
    return out


def _decide_for_hosts(groups: dict[str, Any], hosts: dict[str, Any]) -> None:
    """Where a host's groups set a variable differently, Ansible takes the group it merges
    last (the deepest child); gpunode refuses groups that disagree, so that group's value is
    written into the host's own entry, which decides."""
    members: dict[str, list[dict[str, Any]]] = {}
    for body in groups.values():
        for host in body.get("hosts", {}):
            members.setdefault(host, []).append({k: v for k, v in body.items() if k != "hosts"})
    for host, bodies in members.items():
        voices = [voice([((), body)]) for body in bodies]
        winner = voice(((), body) for body in bodies)
        for path in dict.fromkeys(p for p, _, _ in differing(voices)):
            node = hosts.setdefault(host, {})
            for part in path[:-1]:
                node = node.setdefault(part, {})
            for key, (value, _) in winner.items():
                if key[: len(path)] == path:
                    sub = node
                    for part in key[len(path) - 1 : -1]:
                        sub = sub.setdefault(part, {})
                    sub.setdefault(key[-1], value)


def _few(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


@dataclass
class _Group:
    hosts: list[str]
    children: list[str]
    vars: Any


def _group(name: str, body: Any) -> _Group:
    if isinstance(body, list):  # the older script format: a group is its list of hosts
        return _Group(_strings(body, f"{name}"), [], {})
    body = _mapping(body, name)
    extra = sorted(set(body) - {"hosts", "children", "vars"})
    if extra:
        raise ImportProblem(
            f"{printable(name)}: unexpected keys {', '.join(map(printable, extra))}: "
            "a group has hosts, children and vars"
        )
    hosts = _strings(body.get("hosts") or [], f"{name}.hosts")
    return _Group(hosts, _strings(body.get("children") or [], f"{name}.children"),
                  body.get("vars") or {})  # fmt: skip


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportProblem(f"{printable(where)}: expected an object, got {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImportProblem(f"{printable(where)}: expected a list of names")
    return list(value)


def _check_name(name: str, kind: str) -> None:
    if not _NAME.match(name):
        raise ImportProblem(f"{kind} {printable(repr(name))} is not {PATTERN_HINTS[NAME]}")


def _ordered(groups: dict[str, _Group]) -> list[str]:
    """Groups by depth below `all`, then name: the order Ansible merges their variables in."""
    depth: dict[str, int] = {}

    def walk(name: str, level: int, seen: tuple[str, ...]) -> None:
        if name in seen:
            raise ImportProblem(f"group {printable(name)!r} is its own descendant")
        if depth.get(name, -1) >= level:
            return
        depth[name] = level
        for child in groups[name].children if name in groups else []:
            walk(child, level + 1, (*seen, name))

    roots = [n for n in groups if not any(n in g.children for g in groups.values())]
    for name in roots:
        walk(name, 1 if name != "all" else 0, ())
    for name in groups:  # only in cycles: walk() above reports them
        walk(name, 1, ())
    return sorted(groups, key=lambda n: (depth.get(n, 1), n))


def _members(name: str, groups: dict[str, _Group]) -> list[str]:
    """A group's hosts and its descendants', in order, each once."""
    seen: dict[str, None] = {}
    todo = [name]
    visited: set[str] = set()
    while todo:
        current = todo.pop(0)
        if current in visited or current not in groups:
            continue
        visited.add(current)
        seen.update(dict.fromkeys(groups[current].hosts))
        todo.extend(groups[current].children)
    return list(seen)


def _settings(
    variables: dict[str, Any],
    owner: str,
    out: Converted,
    unknown: dict[str, list[str]],
    host: bool = False,
) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for var, value in variables.items():
        for path, converted in _translate(var, value, owner, out):
            if path == ("address",) and not host:
                out.warnings.append(
                    f"{printable(owner)}: ansible_host on a group is not imported "
                    "(an address belongs to one host)"
                )
                continue
            node = settings
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = converted
        known = {*SIMPLE, *SECRETS, *COMMON_ARGS, "ansible_connection"}
        if var not in known:
            unknown.setdefault(printable(var), []).append(printable(owner))
    return settings


def _translate(
    var: str, value: Any, owner: str, out: Converted
) -> Iterator[tuple[tuple[str, ...], Any]]:
    if var in SECRETS:
        out.secrets.setdefault(printable(var), []).append(printable(owner))
    elif var == "ansible_connection":
        if value == "local":
            yield ("connection",), "local"
        elif value not in SSH_CONNECTIONS:
            out.warnings.append(
                f"{printable(owner)}: ansible_connection {printable(str(value))!r} has no "
                "gpunode equivalent (ssh or local); not imported"
            )
    elif var in COMMON_ARGS:
        jump, rest = jump_of(str(value))
        if jump is not None:
            yield ("ssh", "proxy_jump"), jump
        if rest:
            out.warnings.append(
                f"{printable(owner)}: {var} {printable(' '.join(rest))!r} not imported "
                "(gpunode takes a jump host from it; other ssh options: ssh.options with "
                "ssh.transport: openssh, or your ssh config)"
            )
    elif var in SIMPLE:
        path = SIMPLE[var]
        if path == ("ssh", "port") and isinstance(value, str) and value.isdigit():
            value = int(value)  # INI inventories may give the port as text
        yield path, value
