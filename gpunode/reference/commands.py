"""docs/commands/<command>.md, one page per command, rendered from the click commands
themselves (usage, help, options with their defaults) and the exit status table of
gpunode/exitcodes.py, so the pages cannot disagree with `gpunode COMMAND --help`."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import click

from gpunode.exitcodes import ExitCode, table

EXAMPLES: dict[str, list[str]] = {
    "check": ["gpunode check inventories/lab.yaml", "gpunode check cluster.yaml --limit h100"],
    "hosts": ["gpunode hosts inventories/lab.yaml --limit gpu-h100-01 --json"],
    "schema": ["gpunode schema > gpunode-inventory.schema.json"],
    "inventory": [
        "ansible-inventory -i hosts.ini --list | gpunode inventory import - -o cluster.yaml",
        "gpunode inventory import inventory.json > cluster.yaml",
    ],
    "facts": ["gpunode facts inventories/lab.yaml --limit 'gpu-*' --json"],
    "plan": [
        "gpunode plan inventories/lab.yaml",
        "gpunode plan inventories/lab.yaml --detailed-exitcode"
        f"   # {int(ExitCode.PENDING)}: changes pending",
        "gpunode plan cluster.yaml --out cluster.plan   # then: gpunode apply cluster.plan",
    ],
    "apply": [
        "gpunode apply inventories/lab.yaml",
        "gpunode apply inventories/lab.yaml --check --diff",
        "gpunode apply cluster.yaml --serial 4 --max-fail 25 --yes --no-tui",
    ],
    "upgrade": [
        "gpunode upgrade cluster.yaml",
        "gpunode upgrade cluster.yaml --canary 2 --wave-size 25% --max-fail 10",
    ],
    "rollback": ["gpunode rollback 20261203T222017-9296a6 --limit gpu-h100-01"],
    "report": ["gpunode report", "gpunode report --list"],
    "doctor": [
        "gpunode doctor inventories/lab.yaml",
        "gpunode doctor cluster.yaml --limit gpu-h100-01 --json",
    ],
    "envs": ["gpunode envs inventories/lab.yaml --limit lab-01 > envs-lab-01.yml"],
    "cost": [
        "gpunode cost inventories/lab.yaml",
        "gpunode cost cluster.yaml --work 1e6 --hours 24 --budget 2000",
    ],
    "config": ["gpunode config", "gpunode config inventories/lab.yaml --json"],
    "smoke": ["gpunode smoke inventories/lab.yaml --only nccl-allreduce"],
    "top": ["gpunode top inventories/lab.yaml"],
    "exporter": [
        "gpunode exporter inventories/lab.yaml --listen 0.0.0.0:10140",
        "gpunode exporter inventories/lab.yaml --names simple --interval 5",
        "gpunode exporter inventories/lab.yaml --textfile /var/lib/node_exporter/textfile --once",
    ],
    "mirror": [
        "gpunode mirror cluster.yaml /srv/gpunode-mirror",
        "gpunode mirror build cluster.yaml /srv/gpunode-mirror --limit 'gpu-*'",
        "gpunode mirror serve /srv/gpunode-mirror --bind 0.0.0.0:8470",
    ],
}
"""Command lines shown on each page (tests parse each one against its command)."""


def commands() -> dict[str, click.Command]:
    """Every `gpunode` subcommand by name, in the order `gpunode --help` lists them."""
    from gpunode.cli import COMMANDS, cli

    ctx = click.Context(cli, info_name="gpunode")
    found = {name: cli.get_command(ctx, name) for name in COMMANDS}
    return {name: cmd for name, cmd in found.items() if cmd is not None}


def help_markdown(text: str) -> list[str]:
    """Click help text as Markdown: a `\\b` paragraph keeps its lines, in a code block."""
    out: list[str] = []
    for para in inspect.cleandoc(text.split("\f")[0]).split("\n\n"):
        if para.startswith("\b"):
            out += ["```", inspect.cleandoc(para.removeprefix("\b").strip("\n")), "```", ""]
        else:
            out += [" ".join(para.split()), ""]
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(param: click.Parameter, ctx: click.Context) -> str:
    default = param.get_default(ctx, call=False)
    unset = getattr(click.core, "UNSET", None)  # click >= 8.3: "no default given"
    if (
        default is unset
        or default is None
        or default is False
        or default == ()
        or callable(default)
    ):
        return ""
    return f"`{default}`"


def options_table(cmd: click.Command, ctx: click.Context) -> Iterator[str]:
    yield "| option | default | meaning |"
    yield "| --- | --- | --- |"
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or not isinstance(param, click.Option):
            continue
        names, text = record
        yield f"| `{_cell(names)}` | {_default(param, ctx)} | {_cell(text)} |"


def _usage(cmd: click.Command, ctx: click.Context) -> str:
    return " ".join([ctx.command_path, *cmd.collect_usage_pieces(ctx)])


def _section(cmd: click.Command, ctx: click.Context, level: str) -> Iterator[str]:
    yield "```"
    yield _usage(cmd, ctx)
    yield "```"
    yield ""
    yield from help_markdown(cmd.help or "")
    yield from options_table(cmd, ctx)
    if isinstance(cmd, click.Group):
        for sub_name, sub in cmd.commands.items():
            sub_ctx = click.Context(sub, info_name=sub_name, parent=ctx)
            yield ""
            yield f"{level} {sub_ctx.command_path}"
            yield ""
            yield from _section(sub, sub_ctx, level + "#")


def page(name: str, cmd: click.Command, command: str) -> str:
    from gpunode.cli import cli

    root = click.Context(cli, info_name="gpunode")
    ctx = click.Context(cmd, info_name=name, parent=root)
    lines = [
        f"# gpunode {name}",
        "",
        f"<!-- Generated from the command's own definition: `{command}`. Do not edit. -->",
        "",
        *_section(cmd, ctx, "##"),
        "",
        "## Examples",
        "",
        "```sh",
        *EXAMPLES.get(name, []),
        "```",
        "",
        "## Exit codes",
        "",
        *exit_table(),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def exit_table() -> list[str]:
    """Every status gpunode exits with (gpunode/exitcodes.py); the command's help above says
    which of them it uses."""
    rows = [f"| {code} | {_cell(meaning)} |" for code, meaning in table()]
    return ["| exit | meaning |", "| --- | --- |", *rows]


def _ranking() -> list[str]:
    """What gpunode/exitcodes.py says beyond its table (which status wins when hosts differ)."""
    from gpunode import exitcodes

    paragraphs = inspect.cleandoc(exitcodes.__doc__ or "").split("\n\n")[1:]
    return [" ".join(p.split()) for p in paragraphs]


def index(found: dict[str, click.Command], command: str) -> str:
    from gpunode.cli import COMMANDS

    lines = [
        "# Commands",
        "",
        f"<!-- Generated from the command line's definition: `{command}`. Do not edit. -->",
        "",
        "| command | what it does |",
        "| --- | --- |",
        *(f"| [`gpunode {n}`]({n}.md) | {_cell(COMMANDS[n][2])} |" for n in found),
        "",
        "Every command takes `-h`/`--help`; `gpunode --version` prints the version.",
        "",
        "## Exit codes",
        "",
        *exit_table(),
        "",
        *_ranking(),
    ]
    return "\n".join(lines) + "\n"


def pages(command: str) -> dict[str, str]:
    """File name under docs/commands/ -> its text."""
    found = commands()
    out = {f"{name}.md": page(name, cmd, command) for name, cmd in found.items()}
    out["README.md"] = index(found, command)
    return out
