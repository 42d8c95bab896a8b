"""The `gpunode` command line.

Subcommands are imported only when run, so `gpunode --help` stays fast:
textual, paramiko and pydantic load only for the commands that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from gpunode import __version__
from gpunode.exitcodes import ExitCode, help_text

# name -> (module, attribute, one-line help shown by `gpunode --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("gpunode.cli.check", "check", "Validate an inventory and its stacks; touch no host."),
    "hosts": ("gpunode.cli.hosts", "hosts", "Show each host's merged desired state."),
    "schema": ("gpunode.cli.schema", "schema", "Print the inventory's JSON Schema."),
    "facts": ("gpunode.cli.facts", "facts", "Gather what each host has, in one round trip."),
    "plan": ("gpunode.cli.plan", "plan", "Show what apply would change on each host."),
    "apply": ("gpunode.cli.apply", "apply", "Converge hosts to the inventory."),
    "report": ("gpunode.cli.report", "report", "Show a recorded run."),
    "smoke": ("gpunode.cli.smoke", "smoke", "Run the GPU smoke tests on each host."),
    "top": ("gpunode.cli.top", "top", "Live GPU view of every host (nvitop for a lab)."),
    "lab": ("gpunode.lab.cli", "lab", "Simulated Ubuntu GPU hosts over real SSH and apt."),
}


class LazyGroup(click.Group):
    """Subcommands imported when run; click's usage errors (bad options, no such command,
    bad values) exit 5, the usage status of gpunode's table, rather than click's 2, and
    an interrupt exits 130 rather than click's 1."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _usage_status(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_status(exc)
            raise
        except (KeyboardInterrupt, click.Abort) as exc:
            # Ctrl-C, also at a prompt (click turns that into Abort): 130, as a shell would.
            click.echo("\ninterrupted", err=True)
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, attr, _ = spec
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                return None  # not built yet
            raise
        cmd: click.Command = getattr(mod, attr)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _usage_status(exc: click.UsageError) -> None:
    """Make click's usage error exit 5 when shown; its message and hints stay as they are."""
    vars(exc)["exit_code"] = ExitCode.USAGE  # an instance value over click's class-wide 2


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
