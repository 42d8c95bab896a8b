"""Which hosts go together: the canary first, then waves of a fixed size or a share."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
SIZE = re.compile(r"\A([1-9][0-9]{0,5})(%?)\Z")


class WaveSizeError(ValueError):
    pass


@dataclass(frozen=True)
class WaveSize:
    """`--wave-size`: N hosts, or N% of the hosts after the canary (at least one)."""

    value: int
    percent: bool = False

    @classmethod
    def parse(cls, text: str) -> WaveSize:
        m = SIZE.match(text.strip())
        if m is None or (m.group(2) and int(m.group(1)) > 100):
            raise WaveSizeError(
                f"--wave-size {text!r}: give a number of hosts (4) or a share of them (25%)"
            )
        return cls(int(m.group(1)), bool(m.group(2)))

    def hosts(self, total: int) -> int:
        if not self.percent:
            return self.value
        return max(1, math.floor(total * self.value / 100))


def waves(hosts: Sequence[T], canary: int, size: WaveSize) -> list[list[T]]:
    """The canary wave (the first `canary` hosts, when there are any), then the rest in
    waves of `size`, in inventory order."""
    first = list(hosts[:canary])
    rest = list(hosts[canary:])
    step = max(1, size.hosts(len(rest)))
    out = [first] if first else []
    out += [rest[i : i + step] for i in range(0, len(rest), step)]
    return out
