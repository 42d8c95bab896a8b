"""Open the right transport for an inventory host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.transport.base import Transport
from gpunode.transport.secret import Secret

if TYPE_CHECKING:
    from gpunode.inventory.model import Host


def become_password_for(host: Host, prompted: Secret | None = None) -> Secret | None:
    """The sudo password: the one typed at -K, else the host's become_password_env."""
    if prompted is not None:
        return prompted
    return Secret.from_env(host.become_password_env)


def open_transport(host: Host, *, become_password: Secret | None = None) -> Transport:
    """A transport for `host`, not yet connected (call .connect())."""
    if host.connection == "local":
        from gpunode.transport.local import LocalTransport

        return LocalTransport(
            host.name, become_password=become_password, command_timeout=host.ssh.command_timeout
        )
    from gpunode.transport.ssh import SSHTransport

    assert host.address is not None
    return SSHTransport(host.name, host.address, host.ssh, become_password=become_password)
