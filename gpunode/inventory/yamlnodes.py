"""Bounded YAML: refuse deep nesting, alias bombs and foreign tags; nodes to plain data.

An inventory may be assembled from generated or copied pieces, so nothing in it may
cost more than a small file should: at most MAX_NODES values once aliases and `<<`
merges are expanded, MAX_DEPTH levels of nesting, and only YAML's own tags (a
`!!python/object` or a `!custom` tag means the file was meant for another reader).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from gpunode.inventory.yamlpos import Path_, Position, Source, YamlError

MAX_NODES = 100_000
MAX_DEPTH = 64

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}
_MERGE = _CORE + "merge"


def too_many() -> str:
    return (
        f"more than {MAX_NODES} values once aliases are expanded (a YAML bomb?): "
        "an inventory is far smaller; remove the repeated aliases"
    )


def too_deep() -> str:
    return f"nested deeper than {MAX_DEPTH} levels: an inventory is far shallower"


@cache
def scanner() -> Any:
    from ruamel.yaml.scanner import Scanner, ScannerError

    class _Scanner(Scanner):  # type: ignore[misc, unused-ignore]  # Any where ruamel ships no types
        # Deep flow nesting (`[[[[...`) costs the scanner quadratic time before the
        # parser sees the depth: stop at the first bracket too many.
        def fetch_flow_collection_start(self, token: Any, to_push: str) -> None:
            if len(self.flow_context) >= MAX_DEPTH:
                raise ScannerError(None, None, too_deep(), self.reader.get_mark())
            super().fetch_flow_collection_start(token, to_push)

    return _Scanner


def check_events(events: Iterable[Any], file: str) -> None:
    """Refuse depth, node count and tags on the event stream, before composing anything."""
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        MappingStartEvent,
        NodeEvent,
        ScalarEvent,
    )

    depth = nodes = 0
    for event in events:
        if isinstance(event, CollectionEndEvent):
            depth -= 1
        if not isinstance(event, NodeEvent):
            continue
        at = Position(file, event.start_mark.line + 1, event.start_mark.column + 1)
        nodes += 1
        if nodes > MAX_NODES:
            raise YamlError(at, too_many())
        if isinstance(event, AliasEvent):
            continue
        tag = getattr(event, "tag", None)
        tag = None if tag is None else str(tag)
        if isinstance(event, ScalarEvent):
            fits = tag in _SCALAR_TAGS
        else:
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlError(at, too_deep())
            fits = tag == _CORE + ("map" if isinstance(event, MappingStartEvent) else "seq")
        if tag is not None and not fits:
            shown = "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag
            raise YamlError(
                at, f"tag {shown} is not supported: remove it (quote the value to keep it as text)"
            )


def build(root: Any, src: Source, constructor: Any) -> Any:
    builder = _Builder(src, constructor)
    builder.measure(root)
    return builder.plain(root, (), 0)


def _children(node: Any) -> list[Any]:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, SequenceNode) else []


class _Builder:
    """Nodes to plain data, expanding aliases and `<<` merges within the node budget."""

    def __init__(self, src: Source, constructor: Any) -> None:
        self.src = src
        self.constructor = constructor
        self.nodes = 0
        self.open: set[int] = set()  # nodes being built: an alias back to one is a loop

    def at(self, node: Any) -> Position:
        return Position(self.src.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def no_loop(self, node: Any) -> None:
        if id(node) in self.open:
            raise YamlError(
                self.at(node), "an alias refers to a node that contains it: remove the loop"
            )

    def measure(self, root: Any) -> None:
        """Refuse an alias bomb before expanding it: each node's expanded size, computed once.

        Aliases point back to nodes already measured (document order), so this recursion
        is no deeper than the text's own nesting.
        """
        sizes: dict[int, int] = {}

        def size(node: Any) -> int:
            if id(node) not in sizes:
                self.no_loop(node)
                self.open.add(id(node))
                sizes[id(node)] = 1 + sum(size(c) for c in _children(node))
                self.open.discard(id(node))
            return sizes[id(node)]

        if size(root) > MAX_NODES:
            raise YamlError(self.at(_culprit(root, sizes)), too_many())

    def plain(self, node: Any, path: Path_, depth: int) -> Any:
        from ruamel.yaml.nodes import MappingNode, SequenceNode

        self.enter(node, depth)
        self.open.add(id(node))
        try:
            if isinstance(node, MappingNode):
                out: dict[Any, Any] = {}
                for key, (knode, vnode) in self.pairs(node, depth).items():
                    here: Path_ = (*path, key)
                    self.src.positions[here] = self.at(knode)
                    value_at: Path_ = (*here, "<value>")
                    self.src.positions[value_at] = self.at(vnode)
                    out[key] = self.plain(vnode, here, depth + 1)
                return out
            if isinstance(node, SequenceNode):
                items = []
                for i, value in enumerate(node.value):
                    item: Path_ = (*path, i)
                    self.src.positions[item] = self.at(value)
                    items.append(self.plain(value, item, depth + 1))
                return items
            return self.scalar(node)
        finally:
            self.open.discard(id(node))

    def enter(self, node: Any, depth: int) -> None:
        # measure() bounds the total; this still bounds depth reached through aliases.
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise YamlError(self.at(node), too_many())
        if depth > MAX_DEPTH:
            raise YamlError(self.at(node), too_deep())
        self.no_loop(node)

    def pairs(self, node: Any, depth: int) -> dict[Any, tuple[Any, Any]]:
        """A mapping's entries with `<<` merges applied: its own keys win, then earlier merges."""
        from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

        own: dict[Any, tuple[Any, Any]] = {}
        merged: dict[Any, tuple[Any, Any]] = {}
        merge_seen = False
        for knode, vnode in node.value:
            if not isinstance(knode, ScalarNode):
                raise YamlError(self.at(knode), "a key must be plain text, not a list or mapping")
            if knode.tag == _MERGE:
                if merge_seen:
                    self.duplicate(node, knode, "<<")
                merge_seen = True
                for source in vnode.value if isinstance(vnode, SequenceNode) else [vnode]:
                    if not isinstance(source, MappingNode):
                        raise YamlError(
                            self.at(source),
                            "`<<` merges mappings: write `<<: *anchor` or `<<: [*a, *b]`",
                        )
                    self.enter(source, depth + 1)
                    self.open.add(id(source))
                    try:
                        for key, pair in self.pairs(source, depth + 1).items():
                            merged.setdefault(key, pair)
                    finally:
                        self.open.discard(id(source))
                continue
            key = self.scalar(knode)
            if key in own:
                self.duplicate(node, knode, key)
            own[key] = (knode, vnode)
        return {**merged, **own}

    def duplicate(self, mapping: Any, knode: Any, key: Any) -> None:
        raise YamlError(
            self.at(knode),
            f"duplicate key {str(key)!r} (this mapping starts at line "
            f"{mapping.start_mark.line + 1}): a key may appear once per mapping; "
            "remove or merge the repeat",
        )

    def scalar(self, node: Any) -> Any:
        from ruamel.yaml.error import YAMLError

        try:
            return self.constructor.construct_object(node, deep=True)
        except (YAMLError, ValueError, TypeError, KeyError) as exc:
            raise YamlError(self.at(node), f"cannot read {node.value!r}: {exc}") from None


def _culprit(root: Any, sizes: dict[int, int]) -> Any:
    """The node where expanding in document order first passes MAX_NODES, stopping at
    the alias that repeats an earlier node: that is the line to fix."""
    seen: set[int] = set()

    def mark(node: Any) -> None:
        if id(node) not in seen:
            seen.add(id(node))
            for child in _children(node):
                mark(child)

    node, budget = root, MAX_NODES
    while True:
        seen.add(id(node))
        budget -= 1
        for child in _children(node):
            if sizes[id(child)] > budget:
                if id(child) in seen:
                    return node
                node = child
                break
            mark(child)
            budget -= sizes[id(child)]
        else:
            return node
