"""docs/troubleshooting.md's findings table is the rule table."""

from __future__ import annotations

import re
from pathlib import Path

from gpunode.doctor.rules import RULES

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def test_the_guide_lists_every_rule_with_its_severity() -> None:
    body = GUIDE.read_text().split("| rule | severity | finding |\n| --- | --- | --- |\n", 1)[1]
    rows = [
        re.match(r"\| `([a-z.-]+)` \| (\w+) \|", line)
        for line in body.split("\n\n")[0].splitlines()
    ]
    assert all(rows)
    assert [(m.group(1), m.group(2)) for m in rows if m] == [(r.id, r.severity) for r in RULES]
