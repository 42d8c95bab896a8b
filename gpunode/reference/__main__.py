"""Write the generated reference pages under the docs folder given (`docs`)."""

from __future__ import annotations

import sys
from pathlib import Path

from gpunode.reference import COMMAND, pages


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):  # `--help` is no folder to write into
        print(f"usage: {COMMAND}", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    docs = Path(argv[0])
    stale = docs / "commands"
    for old in stale.glob("*.md") if stale.is_dir() else []:
        old.unlink()  # a page for a command that no longer exists must go too
    for name, text in pages().items():
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
