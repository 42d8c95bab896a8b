"""The shape of a gpunode.toml (gpunode.cli.settings reads it); apart so that reading no file
imports no pydantic."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class FileSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    inventory: str | None = None
    """The inventory when a command is given none (relative to the file)."""
    forks: Annotated[int, Field(ge=1, le=256)] | None = None
    """Hosts to work on at once (`--forks`)."""
    state_dir: str | None = None
    """Where run records go (GPUNODE_STATE_DIR)."""
    ssh_transport: Literal["paramiko", "openssh"] | None = None
    """`ssh.transport` for hosts whose inventory sets none."""
    allow_ssh_commands: bool | None = None
    """Inventories may make ssh run commands on this machine (ProxyCommand, `Match exec`
    ...); only the user's own file may set it."""
    allow_file_dirs: list[str] | None = None
    """Folders besides an inventory's own that its files (requirements_file ...) may be in;
    only the user's own file may set it."""
