"""paramiko, imported without invoke.

paramiko's config module imports invoke (and with it unittest.mock, a tenth of a second
of start-up) only to run the `Match exec` lines of an ssh_config. gpunode imports paramiko
with invoke held back, and gives it to paramiko's config module when an ssh_config is
read (`allow_match_exec`).
"""

from __future__ import annotations

import contextlib
import hmac
import importlib
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko as paramiko
else:

    def _load():
        if "paramiko" in sys.modules or "invoke" in sys.modules:
            return importlib.import_module("paramiko")
        sys.modules["invoke"] = None  # an ImportError for paramiko's optional import
        try:
            return importlib.import_module("paramiko")
        finally:
            del sys.modules["invoke"]

    paramiko = _load()

# paramiko checks each packet's MAC with a byte-by-byte loop in Python
# (util.constant_time_bytes_eq): a third of its thread's CPU on a converged host, where the
# facts arrive in dozens of packets. hmac.compare_digest is the same constant-time
# comparison, in C (packet.py looks the function up on paramiko.util at each packet).
paramiko.util.constant_time_bytes_eq = hmac.compare_digest  # type: ignore[assignment]

# paramiko logs its transport thread's failures with their tracebacks ("Exception
# (client): Error reading SSH protocol banner"); without a handler Python prints them on
# stderr. gpunode reports each failure itself, as a HostUnreachableError with what to do.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False


def allow_match_exec() -> None:
    """Hand invoke to paramiko's config module, which runs `Match exec` commands with it."""
    config = sys.modules["paramiko.config"]
    if getattr(config, "invoke", None) is None:
        # Without invoke, paramiko raises its own "install invoke" error on `Match exec`.
        with contextlib.suppress(ImportError):
            config.invoke = importlib.import_module("invoke")  # type: ignore[attr-defined]
