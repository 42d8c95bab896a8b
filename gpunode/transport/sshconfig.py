"""Where and how to connect: the inventory's ssh settings merged with ~/.ssh/config.

Values the inventory sets explicitly win; otherwise ~/.ssh/config (HostName, User,
Port, IdentityFile, ProxyJump) applies; otherwise the inventory's defaults.
ssh.proxy_jump wins over the config's ProxyJump.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpunode.inventory import sshcommands
from gpunode.inventory.model import SshSettings
from gpunode.transport._paramiko import allow_match_exec, paramiko
from gpunode.transport.sshcli import home_path


@dataclass(frozen=True)
class Endpoint:
    alias: str  # what was asked for (inventory address or a ProxyJump entry)
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    jump: tuple[Endpoint, ...] = ()  # ProxyJump hops, first hop first

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


# What an ssh config may say that the paramiko transport does not read (it reads HostName,
# User, Port, IdentityFile, ProxyJump and Match); the system's ssh reads them all.
_UNREAD = {
    k.lower(): k
    for k in ("Include", "ProxyCommand", "CertificateFile", "UserKnownHostsFile",
              "GlobalKnownHostsFile", "KnownHostsCommand", "HostKeyAlias")
}  # fmt: skip
_MATCH_READ = {"all", "canonical", "final", "exec", "host", "originalhost", "user", "localuser"}


def unread(path: str | None) -> list[str]:
    """The keywords of the ssh config at `path` that the paramiko transport ignores, each
    once ("Match localnetwork" for a Match criterion it does not know)."""
    if not path:
        return []
    try:
        text = Path(home_path(path)).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: list[str] = []
    for line in text.splitlines():
        words = line.replace("=", " ").split()
        if not words or words[0].startswith("#"):
            continue
        key = words[0].lower()
        said = _UNREAD.get(key)
        if key == "match":
            odd = [w for w in words[1:] if w.lower() in _MATCH_CRITERIA - _MATCH_READ]
            said = f"Match {odd[0].lower()}" if odd else None
        if said and said not in found:
            found.append(said)
    return found


_MATCH_CRITERIA = _MATCH_READ | {"localnetwork", "tagged", "version", "sessiontype", "command"}


def load_config(path: str | None) -> paramiko.SSHConfig | None:
    if not path:
        return None
    full = home_path(path)
    if not os.path.exists(full):
        return None
    # checked again where paramiko would run a `Match exec` of a file the inventory named
    why = sshcommands.refusal(path)
    if why:
        raise ValueError(why)
    allow_match_exec()
    return paramiko.SSHConfig.from_path(full)


def _split_jump(spec: str) -> tuple[str | None, str, int | None]:
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port = None
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
        return user, host, port
    if spec.count(":") == 1:
        host, p = spec.split(":")
        return user, host, int(p)
    return user, spec, port


def resolve(
    address: str, ssh: SshSettings, config: paramiko.SSHConfig | None, _depth: int = 0
) -> Endpoint:
    """The endpoint for an inventory host."""
    explicit = ssh.model_fields_set
    found = config.lookup(address) if config is not None else {}
    hostname = found.get("hostname", address)
    user = ssh.user if "user" in explicit or "user" not in found else found["user"]
    port = ssh.port if "port" in explicit or "port" not in found else int(found["port"])
    if ssh.identity_file:
        identities: tuple[str, ...] = (os.path.expanduser(ssh.identity_file),)
    else:
        identities = tuple(os.path.expanduser(p) for p in found.get("identityfile", []))
    jumps: tuple[Endpoint, ...] = ()
    proxy = ssh.proxy_jump or found.get("proxyjump")
    if proxy and proxy.lower() != "none":
        if _depth > 5:
            raise ValueError(f"ProxyJump for {address} loops or nests too deep")
        hops = []
        for spec in proxy.split(","):
            juser, jhost, jport = _split_jump(spec.strip())
            hops.append(_resolve_jump(jhost, juser, jport, config, _depth + 1))
        jumps = tuple(hops)
    return Endpoint(address, hostname, port, user, identities, jumps)


def _resolve_jump(
    alias: str, user: str | None, port: int | None, config: paramiko.SSHConfig | None, depth: int
) -> Endpoint:
    found = config.lookup(alias) if config is not None else {}
    base = resolve(alias, SshSettings(), config, depth)
    return Endpoint(
        alias=alias,
        hostname=base.hostname,
        port=port if port is not None else (int(found["port"]) if "port" in found else 22),
        user=user or found.get("user") or os.environ.get("USER", "root"),
        identity_files=base.identity_files,
        jump=base.jump,
    )
