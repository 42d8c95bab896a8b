"""Host key policies: `strict` refuses unknown keys, `accept-new` records a first key.

A changed key is refused under both (paramiko raises BadHostKeyException before any
policy runs; `describe_changed` words it). Never AutoAddPolicy: these policies
either refuse or append one line to the inventory's known_hosts file.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from pathlib import Path

import paramiko

from gpunode.transport.base import HostUnreachableError


class HostKeyError(HostUnreachableError):
    """The host's key is unknown (strict) or changed: the host is refused."""


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(hostname: str, port: int) -> str:
    return hostname if port == 22 else f"[{hostname}]:{port}"


def known_hosts_line(hostname: str, port: int, key: paramiko.PKey) -> str:
    return f"{known_hosts_name(hostname, port)} {key.get_name()} {key.get_base64()}"


class StrictPolicy(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts_file: str) -> None:
        self.known_hosts_file = known_hosts_file

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}"
        raise HostKeyError(
            f"unknown host key for {hostname}: {key.get_name()} {fingerprint(key)}. "
            f"If that is the host's real key, add this line to {self.known_hosts_file}:\n"
            f"  {line}\n"
            "or set ssh.host_key_policy: accept-new for hosts being set up for the first time."
        )


_append_lock = threading.Lock()


class AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Record a first key into known_hosts (appending; the file's other lines are kept)."""

    def __init__(self, known_hosts_file: str) -> None:
        self.known_hosts_file = known_hosts_file

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        path = Path(os.path.expanduser(self.known_hosts_file))
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _append_lock:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            existing = path.read_bytes() if path.exists() else b""
            with path.open("ab") as fh:
                if existing and not existing.endswith(b"\n"):
                    fh.write(b"\n")
                fh.write(line.encode())
        client.get_host_keys().add(hostname, key.get_name(), key)


def policy_for(name: str, known_hosts_file: str) -> paramiko.MissingHostKeyPolicy:
    if name == "strict":
        return StrictPolicy(known_hosts_file)
    if name == "accept-new":
        return AcceptNewPolicy(known_hosts_file)
    raise ValueError(f"unknown host key policy {name!r}: use strict or accept-new")


def describe_changed(
    exc: paramiko.BadHostKeyException, hostname: str, port: int, known_hosts_file: str
) -> str:
    return (
        f"host key for {known_hosts_name(hostname, port)} has CHANGED: "
        f"known {exc.expected_key.get_name()} {fingerprint(exc.expected_key)}, "
        f"offered {exc.key.get_name()} {fingerprint(exc.key)}. Someone may be intercepting "
        f"the connection, or the host was reinstalled. If the new key is right, remove the old "
        f"line from {known_hosts_file} (ssh-keygen -R '{known_hosts_name(hostname, port)}"
        f"' -f {known_hosts_file}) and add:\n  {known_hosts_line(hostname, port, exc.key)}"
    )
