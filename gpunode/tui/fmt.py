"""Small text renderings shared by the views (pure functions, no Textual)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from rich.text import Text

from gpunode.safetext import printable

SPARKS = "▁▂▃▄▅▆▇█"

# status -> (mark, Rich style)
MARKS: dict[str, tuple[str, str]] = {
    "waiting": ("·", "dim"),
    "connecting": ("…", "cyan"),
    "gathering": ("…", "cyan"),
    "planning": ("◌", "cyan"),
    "applying": ("▶", "bold cyan"),
    "rebooting": ("↻", "bold magenta"),
    "smoke": ("◆", "cyan"),
    "ok": ("✔", "green"),
    "changed": ("✚", "yellow"),
    "failed": ("✘", "bold red"),
    "unreachable": ("⊘", "bold red"),
    "hostkey-changed": ("⊘", "bold red"),
    "skipped": ("–", "dim"),
    "reboot-pending": ("↻", "yellow"),
    "interrupted": ("■", "yellow"),
    # monitor links
    "live": ("●", "green"),
    "stale": ("◌", "yellow"),
    "down": ("⊘", "red"),
    "unreadable": ("✘", "bold red"),  # SSH works, the GPUs cannot be read
    # smoke statuses
    "pass": ("✔", "green"),
    "warn": ("!", "yellow"),
    "fail": ("✘", "bold red"),
    "skip": ("–", "dim"),
}


def mark(status: str) -> tuple[str, str]:
    return MARKS.get(status, ("?", ""))


def sparkline(values: Sequence[float], width: int, top: float = 100.0) -> str:
    """The last `width` values as block characters, 0..top."""
    tail = list(values)[-width:]
    out = []
    for v in tail:
        frac = 0.0 if top <= 0 else min(max(v / top, 0.0), 1.0)
        out.append(SPARKS[min(int(frac * len(SPARKS)), len(SPARKS) - 1)])
    return "".join(out).rjust(width)


def bar(done: int, total: int, width: int = 12) -> str:
    if total <= 0:
        return " " * width
    filled = round(width * min(done, total) / total)
    return "█" * filled + "░" * (width - filled)


def elapsed(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds)
    if s < 3600:
        return f"{s // 60:d}:{s % 60:02d}"
    return f"{s // 3600:d}h{(s % 3600) // 60:02d}m"


def num(v: float | int | None, fmt: str = "{:.0f}", none: str = "-") -> str:
    return none if v is None else fmt.format(v)


def gib(mib: int | float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f}"


def pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def inert(cell: Text | str) -> Text:
    """A cell or a pane as Text with every control character shown escaped (the one
    sanitiser, `printable`), styles kept. A str becomes Text, never markup: a process named
    `[/x]` or `[link=...]` shows as written instead of ending a tag or making a link."""
    if isinstance(cell, str):
        return Text(printable(cell, lines=True))
    plain = cell.plain
    if printable(plain, lines=True) == plain:
        return cell
    out = Text(style=cell.style, justify=cell.justify, no_wrap=cell.no_wrap, end=cell.end)
    cuts = sorted({0, len(plain)} | {s.start for s in cell.spans} | {s.end for s in cell.spans})
    for a, b in pairwise(cuts):
        piece = printable(plain[a:b], lines=True)
        at = len(out)
        out.append(piece)
        for span in cell.spans:
            if span.start <= a and span.end >= b:
                out.stylize(span.style, at, at + len(piece))
    return out
