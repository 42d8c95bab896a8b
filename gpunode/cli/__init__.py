"""The `gpunode` command line.

Subcommands are imported only when run, so `gpunode --help` stays fast:
textual, paramiko and pydantic load only for the commands that need them. Other
distributions add commands through the `gpunode.commands` entry points (see plugins.py):
the lab's `gpunode lab` comes that way.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from gpunode import __version__
from gpunode.cli import plugins
from gpunode.exitcodes import help_text

# name -> (module, attribute, one-line help shown by `gpunode --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("gpunode.cli.check", "check", "Validate an inventory and its stacks; touch no host."),
    "hosts": ("gpunode.cli.hosts", "hosts", "Show each host's merged desired state."),
    "schema": ("gpunode.cli.schema", "schema", "Print the inventory's JSON Schema."),
    "inventory": ("gpunode.cli.inventory", "inventory", "Import an inventory from Ansible."),
    "facts": ("gpunode.cli.facts", "facts", "Gather what each host has, in one round trip."),
    "plan": ("gpunode.cli.plan", "plan", "Show what apply would change on each host."),
    "apply": ("gpunode.cli.apply", "apply", "Converge hosts to the inventory."),
    "report": ("gpunode.cli.report", "report", "Show a recorded run."),
    "smoke": ("gpunode.cli.smoke", "smoke", "Run the GPU smoke tests on each host."),
    "top": ("gpunode.cli.top", "top", "Live GPU view of every host (nvitop for a lab)."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *self._plugin_names()]

    @staticmethod
    def _plugin_names() -> list[str]:
        names = [*plugins.installed(), *plugins.KNOWN]
        return [n for n in dict.fromkeys(names) if n not in COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return self._plugin(cmd_name)
        module, attr, _ = spec
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                return None  # not built yet
            raise
        cmd: click.Command = getattr(mod, attr)
        return cmd

    @staticmethod
    def _plugin(cmd_name: str) -> click.Command | None:
        ep = plugins.installed().get(cmd_name)
        if ep is not None:
            return plugins.load(ep)
        return plugins.not_installed(cmd_name) if cmd_name in plugins.KNOWN else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in COMMANDS.items()]
        found = plugins.installed()
        rows += [(name, plugins.summary(name, found.get(name))) for name in self._plugin_names()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=LazyGroup, context_settings=CONTEXT, epilog=help_text())
@click.version_option(__version__, "-V", "--version", prog_name="gpunode")
def cli() -> None:
    """gpunode: declare the NVIDIA driver, CUDA, cuDNN, NCCL and conda stack each GPU host
    should have; gpunode connects over SSH, plans the difference, converges every host in
    parallel, and proves the GPUs work.

    \b
    Start here:
      gpunode check inventories/lab.yaml     validate, touch nothing
      gpunode plan  inventories/lab.yaml     what would change
      gpunode apply inventories/lab.yaml     converge, then smoke-test
      gpunode lab up --hosts 4               simulated GPU hosts to try it on
    """


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="gpunode")
