"""Version comparison: dotted numeric versions and Debian package versions.

Text comparison gets these wrong ("12.10" < "12.9", "550.127.05" < "550.54.15");
these functions compare the way dpkg and NVIDIA's release numbering mean them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cmp_to_key

_DOTTED = re.compile(r"^\d+(\.\d+)*$")


def dotted(version: str) -> tuple[int, ...]:
    """ "12.10" -> (12, 10). Raises ValueError for anything but digits and dots."""
    if not _DOTTED.match(version):
        raise ValueError(f"not a dotted numeric version: {version!r}")
    return tuple(int(p) for p in version.split("."))


def compare_dotted(a: str, b: str) -> int:
    """-1, 0 or 1; missing trailing parts count as 0 ("12.4" == "12.4.0")."""
    ta, tb = dotted(a), dotted(b)
    n = max(len(ta), len(tb))
    ta, tb = ta + (0,) * (n - len(ta)), tb + (0,) * (n - len(tb))
    return (ta > tb) - (ta < tb)


def matches_prefix(version: str, prefix: str) -> bool:
    """ "550.127.05" is within branch "550"; "12.4.1" within "12.4"; "12.40" is not in "12.4"."""
    return version == prefix or version.startswith(prefix + ".")


def _order(c: str) -> int:
    # dpkg: '~' sorts before everything, even the end of the string; letters before others.
    if c == "~":
        return -1
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return (ac > bc) - (ac < bc)
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = (a[i] > b[j]) - (a[i] < b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def split_debian(version: str) -> tuple[int, str, str]:
    """ "1:2.21.5-1+cuda12.4" -> (1, "2.21.5", "1+cuda12.4")."""
    epoch = 0
    if ":" in version:
        e, version = version.split(":", 1)
        epoch = int(e)
    upstream, _, revision = version.rpartition("-") if "-" in version else (version, "", "")
    return epoch, upstream, revision


def compare_debian(a: str, b: str) -> int:
    """Compare two Debian versions exactly as `dpkg --compare-versions` does."""
    ea, ua, ra = split_debian(a)
    eb, ub, rb = split_debian(b)
    if ea != eb:
        return (ea > eb) - (ea < eb)
    return _compare_part(ua, ub) or _compare_part(ra, rb)


debian_key = cmp_to_key(compare_debian)
dotted_key = cmp_to_key(compare_dotted)


def series(versions: Iterable[str], depth: int) -> list[str]:
    """The distinct upstream series, newest last: depth 2 gives "9.8", "9.10", "9.14"."""
    seen = {".".join(split_debian(v)[1].split(".")[:depth]) for v in versions}
    return sorted(seen, key=debian_key)
