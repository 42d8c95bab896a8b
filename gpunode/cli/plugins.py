"""Commands that other distributions add to `gpunode`, through the `gpunode.commands`
entry-point group.

A distribution declares, in its pyproject.toml:

    [project.entry-points."gpunode.commands"]
    lab = "gpunode_lab.cli:lab"      # name = "module:attribute" of a click command

The CLI lists these names next to its own commands, shows the distribution's summary as
their help (so `gpunode --help` imports none of them), and loads one only when it runs.
gpunode never imports such a module by name.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import click

from gpunode.exitcodes import ExitCode

GROUP = "gpunode.commands"

# Commands that gpunode's own distributions provide: name -> (help, how to install).
KNOWN: dict[str, tuple[str, str]] = {
    "lab": (
        "Simulated Ubuntu GPU hosts over real SSH and apt.",
        "pip install -e ./gpunode_lab in a gpunode checkout (scripts/setup.sh does it)",
    ),
}


def installed() -> dict[str, EntryPoint]:
    """The commands installed distributions add, by name (the first one wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)
    return found


def summary(name: str, ep: EntryPoint | None) -> str:
    """One line of help for a plugin command, without importing it."""
    if name in KNOWN:
        text = KNOWN[name][0]
        return text if ep is not None else f"{text} (not installed)"
    dist = ep.dist if ep is not None else None
    return (dist.metadata["Summary"] if dist is not None else None) or ""


def load(ep: EntryPoint) -> click.Command:
    cmd = ep.load()
    if not isinstance(cmd, click.Command):
        raise click.ClickException(f"{ep.value} (entry point {GROUP}:{ep.name}) is no command")
    return cmd


def not_installed(name: str) -> click.Command:
    """A stand-in for a known command whose distribution is missing: it says how to install
    it and exits with the usage status, whatever arguments it is given."""
    how = KNOWN[name][1]

    @click.pass_context
    def explain(ctx: click.Context) -> None:
        click.echo(f"gpunode {name} is not installed: {how}", err=True)
        ctx.exit(ExitCode.USAGE)

    return click.Command(
        name,
        callback=explain,
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
