"""Defaults from gpunode.toml files and the environment, and where each setting came from.

Precedence, first wins: the command line; the environment (click's GPUNODE_<COMMAND>_<OPTION>
for every option, GPUNODE_INVENTORY, GPUNODE_STATE_DIR, GPUNODE_SSH_TRANSPORT); a
gpunode.toml next to the inventory; the user's $XDG_CONFIG_HOME/gpunode/gpunode.toml
(~/.config when unset); the built-in default. Files are read with tomllib and checked
with a pydantic model: an unknown key or a bad value is an error naming the file and line.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same module, from PyPI
    import tomli as tomllib

FILE_NAME = "gpunode.toml"
KEYS = ("inventory", "forks", "state_dir", "ssh_transport", "allow_ssh_commands", "allow_file_dirs")
ENV = {
    "inventory": "GPUNODE_INVENTORY",
    "state_dir": "GPUNODE_STATE_DIR",
    "ssh_transport": "GPUNODE_SSH_TRANSPORT",
    "allow_ssh_commands": "GPUNODE_ALLOW_SSH_COMMANDS",
    "allow_file_dirs": "GPUNODE_ALLOW_FILE_DIRS",
}
"""Environment variables of the settings that are no command's option (forks is one:
GPUNODE_<COMMAND>_FORKS, as click names it)."""
BUILTIN = {
    "inventory": None,
    "forks": "every selected host, up to 50",
    "state_dir": "the platform's user state directory",
    "ssh_transport": "paramiko (unless the inventory sets ssh.transport)",
    "allow_ssh_commands": False,
    "allow_file_dirs": "the inventory's folder only",
}
CONTROLLER_ONLY = ("allow_ssh_commands", "allow_file_dirs")
"""What an inventory may do to the controller: only the user's own file (or the environment)
says, never a gpunode.toml beside an inventory, which the inventory's author may write."""


FROM_FILES: set[str] = set()
"""The variables of ENV this process set from a file (`export_unset`), not found set."""


class ConfigError(Exception):
    """A gpunode.toml that cannot be used: `file:line: what is wrong`."""


@dataclass
class Settings:
    """The settings from the files, each with the file it came from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def effective(self) -> list[tuple[str, Any, str]]:
        """(key, value, where from) for every key: environment, then files, then built-in."""
        rows: list[tuple[str, Any, str]] = []
        for key in KEYS:
            env = ENV.get(key)
            if env and os.environ.get(env) and env not in FROM_FILES:
                rows.append((key, os.environ[env], f"environment {env}"))
            elif key in self.values:
                rows.append((key, self.values[key], self.sources[key]))
            else:
                rows.append((key, BUILTIN[key], "built-in default"))
        return rows


def export_unset(settings: Settings) -> None:
    """Settings that are no command's option reach the code through their environment
    variable: set it from the files when the environment has none."""
    for key, env in ENV.items():
        if key != "inventory" and key in settings.values and not os.environ.get(env):
            value = settings.values[key]
            os.environ[env] = os.pathsep.join(value) if isinstance(value, list) else str(value)
            FROM_FILES.add(env)


def user_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpunode" / FILE_NAME


def files_for(inventory: str | None) -> list[Path]:
    """The files that apply, lowest precedence first: the user's, the inventory's."""
    found = [user_file()]
    if inventory:
        found.append(Path(inventory).resolve().parent / FILE_NAME)
    return [f for f in dict.fromkeys(found) if f.is_file()]


def load(inventory: str | None) -> Settings:
    """The user's file, then the one next to `inventory` over it (each only if present).
    A file next to the user's default inventory counts once that inventory is known."""
    settings = Settings()
    _merge(settings, files_for(None))
    inv = inventory or settings.values.get("inventory")
    _merge(settings, [f for f in files_for(inv) if f not in files_for(None)])
    return settings


def _merge(settings: Settings, files: list[Path]) -> None:
    for path in files:
        for key, value in read(path).items():
            if key in CONTROLLER_ONLY and path != user_file():
                raise ConfigError(
                    f"{path}:{_line(path.read_text(encoding='utf-8'), key)}: {key}: only your "
                    f"own {user_file()} (or {ENV[key]}) may set it, not a file beside an "
                    "inventory: move it there"
                )
            if key == "inventory":
                # relative to the file that names it, not to the working directory
                value = str((path.parent / str(value)).resolve()) if value else value
            settings.values[key] = value
            settings.sources[key] = str(path)


def read(path: Path) -> dict[str, Any]:
    """One file's settings, checked; ConfigError names the file and line."""
    from pydantic import ValidationError

    from gpunode.cli.settingsmodel import FileSettings

    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        checked = FileSettings.model_validate(data)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            key = str(e["loc"][0]) if e["loc"] else ""
            unknown = e["type"] == "extra_forbidden"
            what = f"unknown key: use one of {', '.join(KEYS)}" if unknown else e["msg"]
            problems.append(f"{path}:{_line(text, key)}: {key}: {what}")
        raise ConfigError("\n".join(problems)) from None
    return checked.model_dump(exclude_unset=True)


def _line(text: str, key: str) -> int:
    """The line that sets `key` (tomllib gives no positions); 1 when none is found."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return 1
