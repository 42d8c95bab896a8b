"""Open the right transport for an inventory host."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from gpunode.transport.base import Transport
from gpunode.transport.secret import Secret, take_from_env, unusable

if TYPE_CHECKING:
    from gpunode.inventory.model import Host


def become_password_for(host: Host, prompted: Secret | None = None) -> Secret | None:
    """The sudo password: the one typed at -K, else the host's become_password_env
    (taken out of the environment on first read: see Secret.from_env)."""
    if prompted is not None:
        return prompted
    return Secret.from_env(host.become_password_env)


def take_become_passwords(hosts: Iterable[Host]) -> None:
    """Take every host's become_password_env out of the environment now, before anything
    starts a child process that would inherit it."""
    take_from_env({h.become_password_env for h in hosts if h.become_password_env})


def password_problem(hosts: Iterable[Host], prompted: Secret | None = None) -> str | None:
    """Why a sudo password given cannot be used, naming where it came from (never the
    value), or None. Checked before any host is contacted."""
    sources = [("the sudo password typed at -K", prompted)] if prompted is not None else [
        (f"the sudo password in environment variable {name}", Secret.from_env(name))
        for name in sorted({h.become_password_env for h in hosts if h.become_password_env})
    ]  # fmt: skip
    for source, secret in sources:
        why = unusable(secret.reveal()) if secret is not None else None
        if why is not None:
            return f"{source} contains {why}: sudo reads a password as one line of text"
    return None


def open_transport(host: Host, *, become_password: Secret | None = None) -> Transport:
    """A transport for `host`, not yet connected (call .connect()); with `become: none`
    it never uses sudo."""
    t = _open(host, become_password)
    if host.become == "none":
        from gpunode.transport.nobecome import NoBecome

        return NoBecome(t)
    return t


# The release that fixed the Terrapin attack (CVE-2023-48795) in paramiko.
PARAMIKO_FLOOR = (3, 4)


@cache  # asked for each host
def paramiko_problem() -> str | None:
    """Why the installed paramiko must not be used, or None: the version it says, once
    imported (the run's warm thread imports it at start; it reads its own metadata then,
    so the walk of sys.path's folders is not made twice)."""
    try:
        from gpunode.transport._paramiko import paramiko
    except ImportError:
        return "paramiko is not installed: pip install 'paramiko>=3.4'"
    found = str(getattr(paramiko, "__version__", ""))
    parts = tuple(int(p) for p in found.split(".")[:2] if p.isdigit())
    if parts < PARAMIKO_FLOOR:
        return (
            f"paramiko {found} is older than 3.4, which fixed the Terrapin attack "
            "(CVE-2023-48795): upgrade it (pip install 'paramiko>=3.4')"
        )
    return None


def module_for(host: Host) -> str:
    """The module of the transport `open_transport` gives `host` (`_open` picks by it, and
    execute.warm imports it ahead)."""
    if host.connection == "local":
        return "gpunode.transport.local"
    if host.ssh.transport == "openssh":
        return "gpunode.transport.openssh"
    return "gpunode.transport.ssh"


def _open(host: Host, become_password: Secret | None) -> Transport:
    kind = module_for(host)
    if kind == "gpunode.transport.openssh":
        from gpunode.transport.openssh import OpenSSHTransport

        assert host.address is not None
        return OpenSSHTransport(
            host.name,
            host.address,
            host.ssh,
            become_password=become_password,
            become_pty=host.become_pty,
        )
    if kind == "gpunode.transport.local":
        from gpunode.transport.local import LocalTransport

        return LocalTransport(
            host.name, become_password=become_password, command_timeout=host.ssh.command_timeout
        )
    if problem := paramiko_problem():
        from gpunode.transport.base import HostUnreachableError

        raise HostUnreachableError(problem)
    from gpunode.transport.ssh import SSHTransport

    assert host.address is not None
    return SSHTransport(
        host.name,
        host.address,
        host.ssh,
        become_password=become_password,
        become_pty=host.become_pty,
    )
