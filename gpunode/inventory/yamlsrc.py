"""Strict YAML loading that remembers where every key and value came from.

YAML 1.2 rules (ruamel): `yes`/`no`/`on`/`off` stay strings, duplicate keys are
errors, `<<: *anchor` merges mappings. The result is plain Python data plus a
position map, so that later validation errors can name `file:line:column`.

Inventories are often assembled from generated pieces, so loading is bounded:
file size, nodes after alias expansion and nesting depth are capped, and tags
other than YAML's own scalar and collection tags are refused.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from gpunode.inventory.yamlnodes import build, check_events, scanner
from gpunode.inventory.yamlpos import Position, Source, YamlError

if TYPE_CHECKING:
    from ruamel.yaml.error import MarkedYAMLError

MAX_BYTES = 10 * 1024 * 1024

# What YAML itself allows in a stream (ruamel's reader would raise without a position).
_NOT_YAML = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def load_text(text: str, file: str) -> Source:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    _check_text(text, file)
    # "safe": plain str/int/float/bool/None scalars ("rt" would keep round-trip markers).
    yaml = YAML(typ="safe", pure=True)
    yaml.Scanner = scanner()
    try:
        check_events(yaml.parse(text), file)
        root = yaml.compose(text)
    except MarkedYAMLError as exc:
        raise YamlError(*_explain(exc, file)) from None
    except YAMLError as exc:
        raise YamlError(Position(file, 1, 1), str(exc).replace("\n", " ")) from None
    src = Source(file=file, data=None, text=text)
    src.positions[()] = Position(file, 1, 1)
    if root is not None:
        src.data = build(root, src, yaml.constructor)
    return src


_FLOW = {"mapping": ("{", "}"), "sequence": ("[", "]")}


def _explain(exc: MarkedYAMLError, file: str) -> tuple[Position, str]:
    """The parser's error at the place to fix, in words that say what to do: a tab where
    YAML wants spaces, a `{` or `[` never closed (shown where it opens, not where the
    parser gave up)."""
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    problem = " ".join(str(p) for p in (exc.context, exc.problem) if p).replace("\n", " ")
    if "'\\t'" in problem or "tab character" in problem:
        return Position(file, line, col), (
            "a tab character: YAML indents with spaces only; replace the tab with spaces"
        )
    flow = re.match(r"while parsing a flow (mapping|sequence)", str(exc.context or ""))
    if flow and exc.context_mark is not None and "expected ','" in str(exc.problem or ""):
        opened, closer = _FLOW[flow.group(1)]
        start = exc.context_mark
        return Position(file, start.line + 1, start.column + 1), (
            f"this '{opened}' is not closed: end it with '{closer}' (or add a missing ',')"
            f" before line {line}, column {col}, where the parser gave up"
        )
    return Position(file, line, col), problem


def load_file(path: str | Path) -> Source:
    where = Position(str(path), 1, 1)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise YamlError(where, "no such file") from None
    except OSError as exc:
        raise YamlError(where, f"cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO, device or socket"
            raise YamlError(where, f"not a regular file ({kind}): give the inventory as a file")
        if _kernel_file(st):  # /proc/kmsg: reading takes the kernel's messages (or blocks)
            raise YamlError(where, "a kernel file (/proc, /sys): give the inventory as a file")
        try:
            raw = _read(fd, MAX_BYTES + 1)  # the file may grow while we read
        except OSError as exc:
            raise YamlError(where, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise YamlError(where, _too_big())
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(where, f"not UTF-8 text ({exc.reason})") from None
    return load_text(text, str(path))


def _kernel_file(st: os.stat_result) -> bool:
    """`st` is on the file system of /proc or /sys."""
    for root in ("/proc", "/sys"):
        try:
            if os.stat(root).st_dev == st.st_dev:
                return True
        except OSError:
            continue
    return False


def _read(fd: int, limit: int) -> bytes:
    chunks = []
    while limit > 0:
        chunk = os.read(fd, min(limit, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def _too_big() -> str:
    return f"larger than {MAX_BYTES // 2**20} MiB: an inventory is a small text file"


def _check_text(text: str, file: str) -> None:
    if len(text) > MAX_BYTES // 4 and len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlError(Position(file, 1, 1), _too_big())
    bad = _NOT_YAML.search(text)
    if bad:
        i = bad.start()
        line, col = text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)
        raise YamlError(
            Position(file, line, col),
            f"character U+{ord(bad.group()):04X} is not allowed in YAML "
            "(binary data or a control character): remove it",
        )
