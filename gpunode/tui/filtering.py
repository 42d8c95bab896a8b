"""Host filter typed after `/`: a substring, or a glob when it has * ? or [."""

from __future__ import annotations

import fnmatch


def matches(name: str, pattern: str) -> bool:
    pattern = pattern.strip()
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern.lower() in name.lower()
