"""A host in two groups that set the same setting differently: refused, both places named.

Groups are peers: nothing in an inventory says which of two groups means it, and the one
written last would win without a word. A group's own layers (its settings in the file, its
group_vars/ file, the host's entry under it) are one voice; two groups' voices may differ
only where the host itself decides (its entry under `hosts:` or its host_vars/ file).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from gpunode.inventory.errors import Problem, field_path
from gpunode.inventory.yamlpos import Path_, Position, Source

Layer = tuple[Path_, dict[str, Any]]
"""(path prefix in the source, settings)."""


def leaves(settings: dict[str, Any], at: Path_ = ()) -> dict[Path_, Any]:
    """Every value that is not a mapping, by its path: what a layer sets."""
    out: dict[Path_, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):  # an empty mapping sets nothing: merging keeps all
            out.update(leaves(value, (*at, key)))
        else:
            path: Path_ = (*at, key)
            out[path] = value
    return out


Voice = dict[Path_, tuple[Any, Path_]]
"""What one group says for a host: path -> (value, prefix of the layer that set it)."""


def voice(layers: Iterable[Layer], start: Voice | None = None) -> Voice:
    """What one group says, its later layers winning (over `start`, if given)."""
    out: Voice = dict(start or {})
    inner = _inner(out)
    for prefix, settings in layers:
        for path, value in leaves(settings).items():
            # a value replaces what the layers below set under it, and the reverse
            for n in range(1, len(path)):
                out.pop(path[:n], None)
            if path in inner:
                for known in [p for p in out if p[: len(path)] == path]:
                    del out[known]
            out[path] = (value, prefix)
            inner.update(path[:n] for n in range(1, len(path)))
    return out


def _inner(voice: Voice) -> set[Path_]:
    """Every path a voice sets values below."""
    return {path[:n] for path in voice for n in range(1, len(path))}


def _decided(path: Path_, own: dict[Path_, Any]) -> bool:
    """The host's own layers set this path, or a value above it that replaces it."""
    return any(path[:n] in own for n in range(1, len(path) + 1))


def differing(voices: Sequence[Voice]) -> list[tuple[Path_, int, int]]:
    """(path, i, j) where voice i and a later voice j set the path (or a value above or
    below it) differently."""
    out: list[tuple[Path_, int, int]] = []
    inner = [_inner(v) for v in voices]
    for j, later in enumerate(voices):
        for i in range(j):
            earlier = voices[i]
            for path, (value, _) in later.items():
                above = next(
                    (path[:n] for n in range(1, len(path) + 1) if path[:n] in earlier), None
                )
                if above == path and earlier[path][0] == value:
                    continue
                if above is not None:
                    out.append((above, i, j))
                elif path in inner[i]:
                    out.append((path, i, j))
    return list(dict.fromkeys(out))


def group_conflicts(
    src: Source,
    host_groups: dict[str, list[tuple[str, list[Layer]]]],
    host_own: dict[str, list[Layer]],
) -> list[Problem]:
    """Problems for each host whose groups set a setting differently that the host does not
    decide itself; one problem per place, naming every host it concerns.

    `host_groups`: per host, (group, that group's layers for the host, lowest first), in
    the order written; `host_own`: per host, its own layers outside every group.
    """
    found: dict[tuple[Path_, str, str, Position, Position, str, str], list[str]] = {}
    shared: dict[tuple[Path_, ...], Voice] = {}
    for host, groups in host_groups.items():
        if len(groups) < 2:
            continue
        own: dict[Path_, Any] = {}
        for _, settings in host_own.get(host, []):
            own.update(leaves(settings))
        # a group's own layers are the same for each of its hosts: read once
        voices = []
        for _, layers in groups:
            group_key = tuple(prefix for prefix, _ in layers[:-1])
            if group_key not in shared:
                shared[group_key] = voice(layers[:-1])
            voices.append(voice(layers[-1:], shared[group_key]))
        for path, i, j in differing(voices):
            if _decided(path, own):
                continue
            first, second = (_setting(voices[k], path) for k in (i, j))
            key = (
                path,
                groups[i][0],
                groups[j][0],
                _position(src, first[1], first[2]),
                _position(src, second[1], second[2]),
                _show(first[0]),
                _show(second[0]),
            )
            found.setdefault(key, []).append(host)
    problems = []
    for (path, g1, g2, pos1, pos2, v1, v2), hosts in found.items():
        who = f"host {hosts[0]} is" if len(hosts) == 1 else f"hosts {', '.join(hosts)} are"
        own_file = f"host_vars/{hosts[0]}.yaml" if len(hosts) == 1 else "host_vars/<host>.yaml"
        problems.append(
            Problem(
                pos1,
                f"hosts.{hosts[0]}.{field_path(path)}" if len(hosts) == 1 else field_path(path),
                f"{who} in groups {g1} and {g2}, which set it differently: {v1} here, "
                f"{v2} at {pos2} (the group written last would win): set it in one group, "
                f"or for the host itself (its entry under `hosts:` or {own_file})",
            )
        )
    return problems


def _setting(voice: Voice, path: Path_) -> tuple[Any, Path_, Path_]:
    """The value a voice gives `path` (the values it sets below it, where it sets a
    mapping), the prefix of the layer that wrote it, and the path written there."""
    for n in range(len(path), 0, -1):
        if path[:n] in voice:
            value, prefix = voice[path[:n]]
            return value, prefix, path[:n]
    below = sorted((p for p in voice if p[: len(path)] == path), key=lambda p: tuple(map(str, p)))
    mapping = {".".join(map(str, p[len(path) :])): voice[p][0] for p in below}
    return mapping, voice[below[0]][1], below[0]


def _position(src: Source, prefix: Path_, path: Path_) -> Position:
    full = (*prefix, *path)
    return src.positions.get((*full, "<value>")) or src.position(full)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value, sort_keys=True)
