"""What a host's settings need on the controller itself, checked by `gpunode check`: a file
named there but missing would fail only when the host is reached."""

from __future__ import annotations

import os
from pathlib import Path

from gpunode.inventory.model import Host, SshSettings
from gpunode.inventory.yamlpos import Path_


def controller_problems(host: Host, base: Path) -> list[tuple[Path_, str]]:
    """(field path, message) for each file the host's settings name that this machine lacks;
    `base` is the inventory's folder."""
    if host.connection != "ssh":
        return []
    return _identity_file(host, base) + _known_hosts_folder(host)


def _known_hosts_folder(host: Host) -> list[tuple[Path_, str]]:
    """A known_hosts file in a folder that does not exist holds no key: with `strict` every
    host would be refused as unknown, and the system's ssh cannot add one there."""
    written = host.ssh.known_hosts_file
    folder = Path(os.path.expanduser(written)).parent
    if folder.is_dir() or written == SshSettings.model_fields["known_hosts_file"].default:
        return []  # the default's ~/.ssh is made on first use
    if host.ssh.host_key_policy == "accept-new" and host.ssh.transport == "paramiko":
        return []  # gpunode makes the folder (0700) when it adds the first key
    return [(
        ("ssh", "known_hosts_file"),
        f"the known_hosts file {written!r} is in a folder that does not exist ({folder}): "
        f"fix the path, or create it (mkdir -p -m 700 {folder}) and add the hosts' keys "
        "(ssh-keyscan, checked out of band), or use host_key_policy: accept-new",
    )]  # fmt: skip


def _identity_file(host: Host, base: Path) -> list[tuple[Path_, str]]:
    written = host.ssh.identity_file
    if written is None:
        return []
    # as the transports open it: ~ expanded, a relative path from the current directory
    path = Path(os.path.expanduser(written))
    found = path if path.is_absolute() else Path.cwd() / path
    if found.is_file():
        return []
    what = "is a folder, not a key file" if found.is_dir() else "does not exist on this machine"
    hint = "fix the path, or drop identity_file to use the SSH agent and the ssh config's keys"
    beside = base / path
    if not path.is_absolute() and beside.is_file():
        hint = (
            f"a relative path is read from the current directory, and the key is beside the "
            f"inventory: write {str(beside.resolve())!r}"
        )
    shown = f"{written!r}" + (f" ({found})" if str(found) != written else "")
    return [(("ssh", "identity_file"), f"the SSH key {shown} {what}: {hint}")]
