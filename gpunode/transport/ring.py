"""A command's output as kept in memory: the last OUTPUT_RING_BYTES of each stream.

Everything a command prints still reaches the caller's `on_output` as it arrives (the
live views, the run record's stream); only what `run` returns is bounded, so a host that
prints without end (a spewing `nvidia-smi`, a runaway log) cannot grow the controller.
What was dropped is counted, never hidden: `CommandResult.stdout_cut`, and a parser that
needs the whole output reads `CommandResult.whole_stdout`, which refuses a cut one.

A caller that reads a command's output as it streams and needs only its end (a monitor's
endless `nvidia-smi -lms`) keeps less with `keeping(cap)`: 4 MiB per stream per host filled
at a few KiB a second is memory that grows for an hour, for nothing.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

OUTPUT_RING_BYTES: Final = 4 << 20
"""4 MiB (UTF-8) of each stream, stdout and stderr each: the facts script's output is a few
tens of KiB, apt's for a whole CUDA install a few hundred; docs/security.md names it."""

_BLOCK: Final = 64 << 10  # small chunks are joined up to this size: few strs, cheap cuts
_cap: ContextVar[int] = ContextVar("output_ring_cap", default=OUTPUT_RING_BYTES)


@contextlib.contextmanager
def keeping(cap: int) -> Iterator[None]:
    """Commands run in this block, on this thread, keep the last `cap` bytes of each stream."""
    token = _cap.set(cap)
    try:
        yield
    finally:
        _cap.reset(token)


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class OutputRing:
    """The end of one stream: chunks in order, at most `cap` bytes, the start dropped."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = _cap.get() if cap is None else cap
        self.cut = 0
        """Bytes dropped from the start."""
        self._texts: deque[str] = deque()
        self._sizes: deque[int] = deque()  # each text's size in bytes
        self._size = 0

    def add(self, text: str) -> None:
        if not text:
            return
        n = _size(text)
        if self._texts and self._sizes[-1] + n <= _BLOCK:
            self._texts[-1] += text
            self._sizes[-1] += n
        else:
            self._texts.append(text)
            self._sizes.append(n)
        self._size += n
        while self._size > self.cap:
            size, excess = self._sizes[0], self._size - self.cap
            if size <= excess:
                self._texts.popleft()
                self._sizes.popleft()
                kept = 0
            else:  # cut inside the chunk, on a character boundary
                data = self._texts[0].encode("utf-8")[excess:]
                self._texts[0] = data.decode("utf-8", errors="ignore")
                kept = self._sizes[0] = _size(self._texts[0])
            self._size -= size - kept
            self.cut += size - kept

    def text(self) -> str:
        return "".join(self._texts)
