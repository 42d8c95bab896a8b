"""Host keys: known_hosts files read as OpenSSH reads them, and the policies for a new key.

`strict` refuses unknown keys, `accept-new` records a first key. A changed key is
refused under both (paramiko raises BadHostKeyException before any policy runs;
`describe_changed` words it). Never AutoAddPolicy: these policies either refuse or
append one line to the inventory's known_hosts file.

known_hosts is parsed here rather than by paramiko's HostKeys.load, which stops the
whole run on a line it does not understand (`@cert-authority`, `@revoked`, bad base64):

- `@revoked` lines: that key is refused for every host ("must not ever be accepted",
  sshd(8)), even where a plain line also lists it;
- `@cert-authority` lines: paramiko cannot verify host certificates, so they are skipped;
  a host they cover that has no plain key of its own is refused (strict) with a message
  saying so;
- plain lines: host patterns with `*`, `?` and `!negation`, hashed names (`|1|`), several
  names per line; unparseable lines are skipped, as OpenSSH does.

The inventory's file (default ~/.ssh/known_hosts) is read, then the global files
(/etc/ssh/ssh_known_hosts, /etc/ssh/ssh_known_hosts2) as OpenSSH's
GlobalKnownHostsFile. New keys are only ever appended to the inventory's file.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.transport._paramiko import paramiko
from gpunode.transport.base import HostKeyChangedError, HostKeyError, HostKeyRevokedError

__all__ = [
    "GLOBAL_KNOWN_HOSTS",
    "AcceptNewPolicy",
    "HostKeyChangedError",
    "HostKeyError",
    "HostKeyRevokedError",
    "KnownHosts",
    "StrictPolicy",
    "describe_changed",
    "describe_revoked",
    "fingerprint",
    "host_matches",
    "known_hosts_line",
    "known_hosts_name",
    "names_key_change",
    "policy_for",
]

GLOBAL_KNOWN_HOSTS: tuple[str, ...] = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
"""OpenSSH's GlobalKnownHostsFile default; read after the inventory's file."""


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(hostname: str, port: int) -> str:
    return hostname if port == 22 else f"[{hostname}]:{port}"


def known_hosts_line(hostname: str, port: int, key: paramiko.PKey) -> str:
    return f"{known_hosts_name(hostname, port)} {key.get_name()} {key.get_base64()}"


# -- reading known_hosts ----------------------------------------------------------------------


@dataclass(frozen=True)
class KnownLine:
    path: str
    lineno: int
    marker: str  # "", "@revoked" or "@cert-authority"
    patterns: str
    keytype: str
    blob: bytes

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lineno}"


@functools.lru_cache(maxsize=4096)  # every host is matched against every line of the file
def _glob_re(pattern: str) -> re.Pattern[str]:
    """An OpenSSH host pattern: `*` and `?` are wildcards, nothing else is special."""
    parts = ("." if ch == "?" else ".*" if ch == "*" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def _hashed_matches(entry: str, name: str) -> bool:
    """`|1|salt|hmac`: HMAC-SHA1 of the name under the salt, compared in constant time."""
    parts = entry.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt = base64.b64decode(parts[2], validate=True)
        want = base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return False
    got = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(got, want)


def host_matches(patterns: str, name: str) -> bool:
    """Whether a known_hosts line's host field covers `name` ("host" or "[host]:port").

    Comma-separated patterns; a matching `!pattern` excludes the host whatever else
    matches, as OpenSSH's match_hostname."""
    if patterns.startswith("|"):
        return _hashed_matches(patterns, name)
    matched = False
    for pattern in patterns.split(","):
        negate = pattern.startswith("!")
        if negate:
            pattern = pattern[1:]
        if not pattern:
            continue
        if "*" in pattern or "?" in pattern:
            hit = _glob_re(pattern).fullmatch(name) is not None
        else:  # a plain name (most lines): no expression to build
            hit = pattern.lower() == name.lower()
        if hit:
            if negate:
                return False
            matched = True
    return matched


def _parse(path: str, lineno: int, text: str) -> KnownLine | None:
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    marker = ""
    if fields[0].startswith("@"):
        marker, fields = fields[0].lower(), fields[1:]
        if marker not in ("@revoked", "@cert-authority"):
            return None  # OpenSSH ignores lines with a marker it does not know
    if len(fields) < 3:
        return None
    patterns, keytype, b64 = fields[:3]
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    return KnownLine(path, lineno, marker, patterns, keytype, blob)


@dataclass(frozen=True)
class _File:
    """One known_hosts file's usable lines, and where each plain name is among them."""

    lines: tuple[KnownLine, ...]
    named: dict[str, tuple[int, ...]]
    """A lower-cased name -> the lines whose patterns list it plainly (no wildcard, no
    negation, not hashed)."""
    other: tuple[int, ...]
    """The lines any name may match: wildcards, negations, hashed names."""
    revoked: frozenset[bytes]

    @classmethod
    def of(cls, lines: Sequence[KnownLine]) -> _File:
        named: dict[str, list[int]] = {}
        other = []
        for i, line in enumerate(lines):
            if line.patterns.startswith("|") or any(c in line.patterns for c in "*?!"):
                other.append(i)
                continue
            for pattern in {p.lower() for p in line.patterns.split(",") if p}:
                named.setdefault(pattern, []).append(i)
        revoked = frozenset(line.blob for line in lines if line.marker == "@revoked")
        return cls(tuple(lines), {k: tuple(v) for k, v in named.items()}, tuple(other), revoked)

    def candidates(self, name: str) -> list[KnownLine]:
        """The lines that may cover `name`, in file order (host_matches still decides)."""
        found = self.named.get(name.lower(), ())
        return [self.lines[i] for i in sorted((*found, *self.other))]


_READ: dict[str, tuple[tuple[int, ...], _File]] = {}
"""Each file as last parsed, by path, with the stat it was parsed at."""
_READ_LOCK = threading.Lock()


def _read(path: str) -> _File:
    """The file parsed, once a version of it: each host of an inventory reads the same
    known_hosts, so each host parsing every line of it made a fleet's start quadratic. A file
    written since (accept-new appends a line) is parsed again."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        st = os.fstat(fh.fileno())
        version = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _READ_LOCK:
            kept = _READ.get(path)
        if kept is not None and kept[0] == version:
            return kept[1]
        parsed = [_parse(path, n, text) for n, text in enumerate(fh, 1)]
    part = _File.of([line for line in parsed if line is not None])
    with _READ_LOCK:
        _READ[path] = (version, part)
    return part


@dataclass
class KnownHosts:
    """The known_hosts files read, in order: each parsed once a version (`_read`)."""

    files: list[str] = field(default_factory=list)
    parsed: list[_File] = field(default_factory=list, repr=False)

    @property
    def lines(self) -> list[KnownLine]:
        """Every usable line of the files, in the order read."""
        return [line for part in self.parsed for line in part.lines]

    @classmethod
    def load(cls, paths: Sequence[str], optional: Sequence[str] = ()) -> KnownHosts:
        """Read the files that exist: OSError for one of `paths` that cannot be read; one of
        `optional` that cannot be read is passed over, as ssh does with its global files."""
        known = cls()
        for p in [*paths, *optional]:
            full = os.path.expanduser(p)
            try:
                part = _read(full)
            except FileNotFoundError:
                continue
            except OSError:
                if p in paths:
                    raise
                continue
            known.parsed.append(part)
            known.files.append(full)
        return known

    @classmethod
    def for_settings(cls, known_hosts_file: str) -> KnownHosts:
        """The inventory's file (ssh.known_hosts_file), then the global ones."""
        return cls.load([known_hosts_file], optional=GLOBAL_KNOWN_HOSTS)

    def revoked(self, key: paramiko.PKey) -> KnownLine | None:
        """The `@revoked` line listing this key, if any (whatever host it names)."""
        blob = key.asbytes()
        for line in self.lines:
            if line.marker == "@revoked" and hmac.compare_digest(line.blob, blob):
                return line
        return None

    def plain_for(self, name: str) -> list[tuple[KnownLine, paramiko.PKey]]:
        """The plain keys known for `name`, revoked ones left out, in file order."""
        revoked = frozenset().union(*(part.revoked for part in self.parsed))
        out = []
        for line in (line for part in self.parsed for line in part.candidates(name)):
            if line.marker or line.blob in revoked or not host_matches(line.patterns, name):
                continue
            try:
                key = paramiko.PKey.from_type_string(line.keytype, line.blob)
            except Exception:  # a key type paramiko lacks, or a bad blob: skipped, as ssh does
                continue
            out.append((line, key))
        return out

    def authorities_for(self, name: str) -> list[KnownLine]:
        return [
            line
            for line in self.lines
            if line.marker == "@cert-authority" and host_matches(line.patterns, name)
        ]

    def add_to(self, keys: paramiko.HostKeys, name: str) -> None:
        """Put this host's plain keys (the first of each type) into paramiko's HostKeys,
        under the exact name paramiko looks up."""
        seen: set[str] = set()
        for _, key in self.plain_for(name):
            if key.get_name() not in seen:
                seen.add(key.get_name())
                keys.add(name, key.get_name(), key)

    def line_of(self, name: str, key: paramiko.PKey) -> KnownLine | None:
        blob = key.asbytes()
        for line, _ in self.plain_for(name):
            if line.blob == blob:
                return line
        return None


# -- policies for a key not in known_hosts ------------------------------------------------------


class _Policy(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts_file: str, known: KnownHosts | None = None) -> None:
        self.known_hosts_file = known_hosts_file
        self.known = known if known is not None else KnownHosts()

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        revoked = self.known.revoked(key)
        if revoked is not None:
            raise HostKeyRevokedError(describe_revoked(hostname, key, revoked))
        self.unknown(client, hostname, key)

    def unknown(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise NotImplementedError


class StrictPolicy(_Policy):
    def unknown(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}"
        cas = self.known.authorities_for(hostname)
        if cas:
            raise HostKeyError(
                f"no plain host key for {hostname}: it is covered by the @cert-authority line "
                f"at {cas[0].where}, but paramiko cannot verify host certificates: add the "
                f"host's key, or set ssh.host_key_policy: accept-new to record it on first "
                f"contact. It offered {key.get_name()} {fingerprint(key)}; if that is the "
                f"host's real key, add this line to {self.known_hosts_file}:\n  {line}"
            )
        raise HostKeyError(
            f"unknown host key for {hostname}: {key.get_name()} {fingerprint(key)}. "
            f"If that is the host's real key, add this line to {self.known_hosts_file}:\n"
            f"  {line}\n"
            "or set ssh.host_key_policy: accept-new for hosts being set up for the first time."
        )


_append_lock = threading.Lock()


class AcceptNewPolicy(_Policy):
    """Record a first key into known_hosts (appending; the file's other lines are kept)."""

    def unknown(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
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


def policy_for(
    name: str, known_hosts_file: str, known: KnownHosts | None = None
) -> paramiko.MissingHostKeyPolicy:
    if name == "strict":
        return StrictPolicy(known_hosts_file, known)
    if name == "accept-new":
        return AcceptNewPolicy(known_hosts_file, known)
    raise ValueError(f"unknown host key policy {name!r}: use strict or accept-new")


# -- messages -----------------------------------------------------------------------------------


CHANGED_PREFIX = "host key changed for "
REVOKED_PREFIX = "host key is revoked: "


def names_key_change(message: str) -> bool:
    """Whether an unreachable host's message is a changed or revoked key (for callers that
    only kept the message, not the HostKeyChangedError)."""
    return message.startswith((CHANGED_PREFIX, REVOKED_PREFIX))


def describe_changed(
    exc: paramiko.BadHostKeyException,
    hostname: str,
    port: int,
    known_hosts_file: str,
    known: KnownHosts | None = None,
) -> str:
    name = known_hosts_name(hostname, port)
    where = known.line_of(name, exc.expected_key) if known is not None else None
    at = f" ({where.where})" if where is not None else ""
    return (
        f"{CHANGED_PREFIX}{name}: known_hosts has "
        f"{exc.expected_key.get_name()} {fingerprint(exc.expected_key)}{at}, the host offered "
        f"{exc.key.get_name()} {fingerprint(exc.key)}. Someone may be intercepting "
        f"the connection, or the host was reinstalled. If the new key is right, remove the old "
        f"line from {known_hosts_file} (ssh-keygen -R '{name}' -f {known_hosts_file}) and add:\n"
        f"  {known_hosts_line(hostname, port, exc.key)}"
    )


def describe_revoked(name: str, key: paramiko.PKey, line: KnownLine) -> str:
    return (
        f"{REVOKED_PREFIX}{name} offered {key.get_name()} {fingerprint(key)}, which the "
        f"@revoked line at {line.where} lists; refused. Someone may be using a stolen key, "
        "or the host still has a key that was retired."
    )
