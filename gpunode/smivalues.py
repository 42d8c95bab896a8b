"""What nvidia-smi prints where a value does not exist on this GPU or driver.

Shared by the facts parser and the monitor, which read the same CSV and table fields.
"""

from __future__ import annotations

_MISSING = frozenset(
    {
        "",
        "n/a",
        "not supported",
        "unknown error",
        "gpu is lost",
        "requested functionality has been deprecated",
    }
)


def is_missing(text: str) -> bool:
    """True for "[N/A]", "N/A", "[Not Supported]", "" and the like."""
    return text.strip().strip("[]").strip().lower() in _MISSING
