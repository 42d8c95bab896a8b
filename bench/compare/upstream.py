"""What a run took from the upstream repository, summed from its web server's access log.

The lab's repository writes one line per answered request (gpunode_lab/supervisor.py), in
the common log format: `CLIENT - - [DATE] "METHOD PATH PROTO" STATUS BYTES`, BYTES being
the body bytes really sent. Counting from the server's side is what an uplink sees, the same
for every tool; nothing here trusts what a tool says it fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.mirror.build import INDEXES

LINE = re.compile(r'^(\S+) \S+ \S+ \[[^\]]*\] "(\S+) (\S+)[^"]*" (\d{3}) (\d+|-)$')


@dataclass
class Fetched:
    requests: int = 0
    bytes: int = 0
    debs: int = 0  # files
    deb_bytes: int = 0
    index_bytes: int = 0
    other_bytes: int = 0
    by_path: dict[str, int] = field(default_factory=dict)  # .deb path -> times sent (GET, 200)

    def as_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "bytes": self.bytes,
            "debs": self.debs,
            "deb_bytes": self.deb_bytes,
            "index_bytes": self.index_bytes,
            "other_bytes": self.other_bytes,
            "distinct_debs": len(self.by_path),
        }


def offset(log: Path) -> int:
    """Where the log ends now: count() from here sees only what comes after."""
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def count(log: Path, start: int = 0) -> Fetched:
    """Requests and body bytes in `log` after byte `start` (lines that are not requests,
    such as the server's error notes, are skipped)."""
    out = Fetched()
    try:
        with log.open("rb") as fh:
            fh.seek(start)
            text = fh.read().decode(errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        _, method, path, status, sent = m.groups()
        size = 0 if sent == "-" else int(sent)
        out.requests += 1
        out.bytes += size
        name = path.split("?", 1)[0].rsplit("/", 1)[-1]
        if name.endswith(".deb"):
            out.deb_bytes += size
            if method == "GET" and status == "200":
                out.debs += 1
                out.by_path[path] = out.by_path.get(path, 0) + 1
        elif name in INDEXES:  # an apt folder's indexes, as gpunode mirror keeps them
            out.index_bytes += size
        else:
            out.other_bytes += size
    return out
