"""A long-running monitor's heap kept small: glibc's malloc tuned, and trimmed now and then.

Streaming hosts make many short-lived strings of up to megabytes (reads, decodes, split
lines), one thread per host. glibc raises its mmap threshold after the first such block
is freed, so the later ones come from per-thread arenas, which fragment: the memory soak
(bench/memsoak.py) saw `exporter` and `top` grow 16 to 23 % in 10 minutes while the memory
Python held stayed flat. A fixed threshold hands big blocks back to the kernel when freed,
two arenas bound the per-thread ones, and a trim every TRIM_EVERY seconds returns free pages.
Elsewhere (musl, macOS) nothing is done.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Final

MMAP_THRESHOLD: Final = 128 << 10  # glibc's own default, held fixed
ARENAS: Final = 2
TRIM_EVERY: Final = 30.0
_M_MMAP_THRESHOLD: Final = -3  # <malloc.h>
_M_ARENA_MAX: Final = -8


def _glibc() -> Any | None:
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_small(stop: threading.Event) -> None:
    """Tune malloc (before the sampler's threads start) and trim it until `stop` is set."""
    libc = _glibc()
    if libc is None:
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    libc.mallopt(_M_ARENA_MAX, ARENAS)

    def trim() -> None:
        while not stop.wait(TRIM_EVERY):
            libc.malloc_trim(0)

    threading.Thread(target=trim, name="heap-trim", daemon=True).start()
