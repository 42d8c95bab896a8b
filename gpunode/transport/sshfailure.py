"""Why `ssh` failed, from its exit status 255 and stderr, as gpunode's error classes.

The master connection runs at LogLevel=DEBUG1 so that its stderr names the key the
host offered ("Server host key: TYPE SHA256:..."): a changed or unknown key is
reported with its fingerprint, as the paramiko transport does. Debug lines are only
read here, never shown. hostkeys (and with it paramiko) is imported only on a failure.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from gpunode.transport.base import (
    HostKeyChangedError,
    HostKeyError,
    HostKeyRevokedError,
    HostUnreachableError,
    TransportError,
)

_OFFERED = re.compile(r"Server host key: (\S+) (SHA256:[A-Za-z0-9+/]+)")
_SENT = re.compile(r"fingerprint for the (\S+) key sent by the remote host is\s+(SHA256:[^\s.]+)")
_OFFENDING = re.compile(r"Offending \S+ key in (.+):([0-9]+)\s*$", re.MULTILINE)
_CHANGED_NAME = re.compile(r"Host key for (\S+) has changed")
_UNKNOWN_NAME = re.compile(r"host key is known for (\S+) and you have requested strict")

# What ssh itself says when it, not the remote command, fails (the last line of stderr).
_SSH_SAYS = (
    "ssh: ",
    "kex_exchange_identification:",
    "Connection closed by ",
    "Connection reset by ",
    "Connection timed out",
    "Connection to ",
    "client_loop: ",
    "Timeout, server ",
    "Host key verification failed.",
    "Permission denied (",
    "mux_client_",
    "Control socket connect",
    "ControlSocket ",
    "banner exchange",
    "Bad owner or permissions",
    "channel_by_id:",
)


def _said(stderr: str) -> list[str]:
    """stderr's lines meant for people: no debug output, no `@@@` banner."""
    lines = (line.strip() for line in stderr.splitlines())
    return [line for line in lines if line and not line.startswith(("debug", "@"))]


def is_ssh_failure(exit_code: int, stderr: str) -> bool:
    """Whether a command's exit 255 came from ssh (connection lost, refused...) rather than
    from the remote command."""
    said = _said(stderr)
    return exit_code == 255 and bool(said) and any(s in said[-1] for s in _SSH_SAYS)


def blob_fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _offered(stderr: str) -> str:
    found = _SENT.search(stderr) or _OFFERED.search(stderr)
    return f"{found.group(1)} {found.group(2)}" if found else "a key"


def _known_line(stderr: str) -> str:
    """The known_hosts line ssh found offending, as "TYPE SHA256:... (file:line)"."""
    from gpunode.transport.hostkeys import KnownHosts

    found = _OFFENDING.search(stderr)
    if not found:
        return "another key"
    path, lineno = found.group(1), int(found.group(2))
    try:
        lines = KnownHosts.load([path]).lines
    except OSError:
        return f"another key ({path}:{lineno})"
    for line in lines:
        if line.lineno == lineno:
            return f"{line.keytype} {blob_fingerprint(line.blob)} ({path}:{lineno})"
    return f"another key ({path}:{lineno})"


def _revoked_line(stderr: str, files: Sequence[str]) -> str:
    """ " (the @revoked line at file:line)" for the offered key, if one of `files` has it."""
    from gpunode.transport.hostkeys import KnownHosts

    found = _OFFERED.search(stderr)
    if not found:
        return ""
    for line in KnownHosts.load([], optional=files).lines:
        if line.marker == "@revoked" and blob_fingerprint(line.blob) == found.group(2):
            return f" (the @revoked line at {line.where})"
    return ""


def no_banner(exc: BaseException, silent: bool, elapsed: float, timeout: float) -> str:
    """paramiko's failure before a login, in words: a port that stayed silent until the
    timeout, or one that closed the connection at once (it said "Error reading SSH protocol
    banner" for both)."""
    msg = str(exc) or type(exc).__name__
    if "banner" not in msg and not silent:
        return msg
    if elapsed < 0.9 * timeout:
        return (
            f"the port accepted TCP, then closed the connection after {elapsed:.1f}s without "
            "an SSH banner: it is not an SSH server, or sshd turned this client away "
            "(MaxStartups, hosts.deny, fail2ban, a firewall); see sshd's log on the host, "
            "or `ssh -v` from here"
        )
    return f"no SSH banner within {timeout:g}s (the port accepts TCP but is silent)"


_JUMP = re.compile(r"Setting implicit ProxyCommand from ProxyJump: (.+)$", re.MULTILINE)
_PROXY = re.compile(r"Executing proxy command: (exec .+)$", re.MULTILINE)
_PROXY_CLOSED = ("kex_exchange_identification:", "Connection closed by UNKNOWN")


def jump_failure(
    stderr: str, *, env: Mapping[str, str], timeout: float, config: str | None
) -> TransportError | None:
    """Why a ProxyJump hop failed, when the master could only say that its connection
    closed: a master that persists sends the hop's stderr to /dev/null (OpenSSH keeps it
    from holding a terminal), so the hop's own words ("Host key verification failed.") are
    lost. The hop's command, as ssh composed it from the inventory's -J, runs once more
    with its stderr read; None when the failure was not the hop's."""
    said = _said(stderr)
    jump, proxy = _JUMP.search(stderr), _PROXY.search(stderr)
    if not (jump and proxy and said and any(s in said[-1] for s in _PROXY_CLOSED)):
        return None
    try:
        words = shlex.split(jump.group(1))
        done = subprocess.run(
            ["/bin/sh", "-c", proxy.group(1)], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
            timeout=timeout, env=dict(env), start_new_session=True,
        )  # fmt: skip
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return None
    hop_said = _said(done.stderr)
    if done.returncode != 255 or not hop_said:
        return None
    user = words[words.index("-l") + 1] if "-l" in words[:-1] else None
    port = words[words.index("-p") + 1] if "-p" in words[:-1] else None
    hop = (f"{user}@" if user else "") + words[-1] + (f":{port}" if port else "")
    why = "; ".join(hop_said[-3:]).rstrip(".")
    where = f"the ssh config {config}" if config else "your ssh config"
    if "Host key verification failed" in why:
        return HostKeyError(
            f"jump host {hop}: {why}. The hop is a second ssh that reads {where} alone, not "
            "ssh.known_hosts_file: add the jump host's key to the UserKnownHostsFile there "
            "(or its default, ~/.ssh/known_hosts)"
        )
    return HostUnreachableError(
        f"jump host {hop}: {why} (the hop is a second ssh that reads {where} alone)"
    )


def classify(
    stderr: str, *, label: str, name: str, known_hosts_files: Sequence[str]
) -> TransportError:
    """The error for a failed `ssh` (exit 255). `label` is user@host:port for messages,
    `name` the host as known_hosts names it, `known_hosts_files` the files ssh read (the
    first is where new keys go)."""
    from gpunode.transport.hostkeys import CHANGED_PREFIX, REVOKED_PREFIX

    known_hosts_file = known_hosts_files[0] if known_hosts_files else "~/.ssh/known_hosts"
    said = _said(stderr)
    text = "\n".join(said)
    why = "; ".join(said[-3:]) or "ssh exited 255 without saying why"
    if "REVOKED HOST KEY" in stderr or "is marked as revoked" in stderr or "revoked by" in text:
        return HostKeyRevokedError(
            f"{REVOKED_PREFIX}{name} offered {_offered(stderr)}, which is revoked"
            f"{_revoked_line(stderr, known_hosts_files)}; refused. Someone may be using a "
            "stolen key, or the host still has a key that was retired."
        )
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr:
        found = _CHANGED_NAME.search(text)
        changed = found.group(1) if found else name
        return HostKeyChangedError(
            f"{CHANGED_PREFIX}{changed}: known_hosts has {_known_line(stderr)}, the host "
            f"offered {_offered(stderr)}. Someone may be intercepting the connection, or the "
            "host was reinstalled. If the new key is right, remove the old line "
            f"(ssh-keygen -R '{changed}' -f {known_hosts_file}) and record the new one "
            "(ssh.host_key_policy: accept-new, once)"
        )
    if "Host key verification failed" in text or "Certificate invalid" in text:
        found = _UNKNOWN_NAME.search(text)
        if found:
            return HostKeyError(
                f"unknown host key for {found.group(1)}: {_offered(stderr)}. If that is the "
                f"host's real key, add it to {known_hosts_file}, or set "
                "ssh.host_key_policy: accept-new for hosts being set up for the first time."
            )
        return HostKeyError(f"host key of {name} refused by ssh: {why}")
    if "Permission denied" in text:
        return HostUnreachableError(f"authentication failed for {label}: {why}")
    if "banner exchange" in text:
        return HostUnreachableError(
            f"no SSH banner from {label} (the port accepts TCP but is silent): {why}"
        )
    return HostUnreachableError(f"ssh to {label} failed: {why}")
