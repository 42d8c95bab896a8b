"""What a host's settings need on the controller itself, checked by `gpunode check`: a file
named there but missing would fail only when the host is reached."""

from __future__ import annotations

import os
from pathlib import Path

from gpunode.inventory.model import Host
from gpunode.inventory.yamlpos import Path_


def controller_problems(host: Host, base: Path) -> list[tuple[Path_, str]]:
    """(field path, message) for each file the host's settings name that this machine lacks;
    `base` is the inventory's folder."""
    written = host.ssh.identity_file
    if host.connection != "ssh" or written is None:
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
