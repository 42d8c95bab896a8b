"""Talking to a lab's supervisor over its Unix socket: one JSON line each way."""

from __future__ import annotations

import json
import socket
from typing import Any

from gpunode_lab.state import LabPaths


class SupervisorGone(Exception):
    pass


def request(paths: LabPaths, op: str, timeout: float = 300, **args: Any) -> dict[str, Any]:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(paths.socket))
            s.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise SupervisorGone(f"the lab's supervisor is not answering ({exc})") from exc
    if not data:
        raise SupervisorGone("the lab's supervisor closed the connection")
    reply: dict[str, Any] = json.loads(data)
    return reply


def alive(paths: LabPaths) -> bool:
    try:
        return bool(request(paths, "ping", timeout=5).get("ok"))
    except SupervisorGone:
        return False


def accepts(address: str, port: int) -> bool:
    """Whether a host's sshd takes a TCP connection (booted and not refusing)."""
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False
