"""The full output of a failed step, as the run record keeps it: each stream capped at
OUTPUT_CAP bytes (its end kept, where the error is), saying how much was cut."""

from __future__ import annotations

from dataclasses import dataclass

OUTPUT_CAP = 1 << 20  # bytes of each stream kept per failed step


@dataclass(frozen=True)
class StepOutput:
    command: str
    """As `plan` shows it: a file's content on stdin is never in it."""
    exit_code: int | None
    """None when the step never finished (timed out, connection lost)."""
    stdout: str
    stderr: str
    stdout_cut: int = 0
    """Bytes cut from the start of stdout (0: it is whole)."""
    stderr_cut: int = 0

    @classmethod
    def capped(
        cls,
        command: str,
        exit_code: int | None,
        stdout: str,
        stderr: str,
        cap: int = OUTPUT_CAP,
        cut: tuple[int, int] = (0, 0),
    ) -> StepOutput:
        """`cut`: bytes the transport already dropped from each stream's start."""
        out, out_cut = _tail(stdout, cap)
        err, err_cut = _tail(stderr, cap)
        return cls(command, exit_code, out, err, out_cut + cut[0], err_cut + cut[1])


def _tail(text: str, cap: int) -> tuple[str, int]:
    """The last `cap` bytes of `text` (from a line start when one is near) and the bytes cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= cap:
        return text, 0
    kept = data[-cap:]
    newline = kept.find(b"\n", 0, 4096)
    if newline >= 0:
        kept = kept[newline + 1 :]
    return kept.decode("utf-8", errors="ignore"), len(data) - len(kept)
