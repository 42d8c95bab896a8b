"""`gpunode config`: the settings in effect, and where each came from."""

from __future__ import annotations

import os

import click

from gpunode.cli.options import json_option


@click.command("config")
@click.argument(
    "inventory",
    required=False,
    type=click.Path(dir_okay=False, path_type=str),
    metavar="[INVENTORY]",
    envvar="GPUNODE_INVENTORY",
)
@json_option
def config(inventory: str | None, as_json: bool) -> None:
    """Print the effective settings (inventory, forks, state_dir, ssh_transport,
    allow_ssh_commands, allow_file_dirs) as the values they come to (paths, numbers) and
    where each came from: the command line, the environment, a gpunode.toml next to INVENTORY,
    the user's $XDG_CONFIG_HOME/gpunode/gpunode.toml, or the built-in default (the first
    wins). Every option of every command also reads GPUNODE_<COMMAND>_<OPTION>, e.g.
    GPUNODE_APPLY_FORKS=8.

    Exit status: 0, or 4 when a gpunode.toml is bad.
    """
    rows = settings_rows(inventory, click.get_current_context())
    if as_json:
        from gpunode.views.envelope import dumps

        doc = {key: {"value": value, "from": source} for key, value, source in rows}
        click.echo(dumps("config", {"settings": doc}))
        return
    for line in settings_text(rows):
        click.echo(line)


def settings_rows(inventory: str | None, ctx: click.Context) -> list[tuple[str, object, str]]:
    """(setting, value, where from). The parameters of the command running (`ctx`) as
    click resolved them; for a command without --forks, every GPUNODE_<COMMAND>_FORKS set
    in the environment as a row of its own (it wins for that command only)."""
    from gpunode.cli import settings as cfg

    settings = cfg.load(inventory)
    rows = settings.effective()
    for i, (key, value, _) in enumerate(rows):
        if key in ctx.params:
            rows[i] = (key, ctx.params[key], _source(ctx, key, settings.sources.get(key, "")))
        if rows[i][2] == "built-in default":
            rows[i] = (key, *_builtin(key, value, inventory))
    if "forks" in ctx.params:
        return rows
    for name, value in sorted(os.environ.items()):
        if name.startswith("GPUNODE_") and name.endswith("_FORKS"):
            command = name.removeprefix("GPUNODE_").removesuffix("_FORKS").lower()
            rows.append((f"forks ({command})", value, f"environment {name}"))
    return rows


def _builtin(key: str, rule: object, inventory: str | None) -> tuple[object, str]:
    """A built-in default as the value it comes to here (a path, a number), and the rule
    that gave it: what `config` shows instead of the rule's words alone."""
    from pathlib import Path

    if key == "state_dir":
        from gpunode import records

        return str(records.state_dir()), f"built-in default: {rule}"
    if key == "forks":
        from gpunode.hostpool import MAX_FORKS, fork_count

        hosts = _host_count(inventory)
        value = fork_count(None, hosts) if hosts else MAX_FORKS
        return value, f"built-in default: {rule}"
    if key == "ssh_transport":
        return "paramiko", "built-in default, unless the inventory sets ssh.transport"
    if key == "allow_file_dirs":
        folder = [str(Path(inventory).resolve().parent)] if inventory else []
        return folder, f"built-in default: {rule}"
    return rule, "built-in default"


def _host_count(inventory: str | None) -> int:
    """How many hosts the inventory has, 0 when there is none or it does not load (`check`
    says why)."""
    if not inventory:
        return 0
    from gpunode.inventory import InventoryError, load

    try:
        return len(load(inventory).hosts)
    except (InventoryError, OSError, ValueError):
        return 0


def _source(ctx: click.Context, key: str, file: str) -> str:
    """Where click took the command's parameter `key` from."""
    from click.core import ParameterSource

    source = ctx.get_parameter_source(key)
    if source is ParameterSource.ENVIRONMENT:
        param = next(p for p in ctx.command.params if p.name == key)
        envvar = param.envvar or f"{ctx.auto_envvar_prefix}_{key.upper()}"
        return f"environment {envvar}"
    if source is ParameterSource.DEFAULT_MAP:
        return file
    if source is ParameterSource.COMMANDLINE:
        return "command line"
    return "built-in default"


def settings_text(rows: list[tuple[str, object, str]]) -> list[str]:
    def shown(value: object) -> str:
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "none"
        return "-" if value is None else str(value)

    return [f"{key:<18} {shown(value)}  ({src})" for key, value, src in rows]


def echo_settings(inventory: str | None) -> None:
    """`-vv`: the settings in effect, on stderr, before the command's own output."""
    for line in settings_text(settings_rows(inventory, click.get_current_context())):
        click.echo(f"setting: {line}", err=True)
