"""The `gpunode` command line.

Subcommands are imported only when run, so `gpunode --help` stays fast:
textual, paramiko and pydantic load only for the commands that need them. Other
distributions add commands through the `gpunode.commands` entry points (see plugins.py):
the lab's `gpunode lab` comes that way.
"""

from __future__ import annotations

import gc
import importlib
from typing import Any, NoReturn

import click

from gpunode import __version__
from gpunode.cli import plugins
from gpunode.exitcodes import ExitCode, help_text

GC_THRESHOLD = 100_000
"""The program's first-generation threshold for Python's cycle collector (`run`)."""

# name -> (module, attribute, one-line help shown by `gpunode --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("gpunode.cli.check", "check", "Validate an inventory and its stacks; touch no host."),
    "hosts": ("gpunode.cli.hosts", "hosts", "Show each host's merged desired state."),
    "schema": ("gpunode.cli.schema", "schema", "Print the inventory's JSON Schema."),
    "inventory": ("gpunode.cli.inventory", "inventory", "Import an inventory from Ansible."),
    "facts": ("gpunode.cli.facts", "facts", "Gather what each host has, in one round trip."),
    "envs": ("gpunode.cli.envs", "envs", "Export each host's conda envs as installed."),
    "doctor": ("gpunode.cli.doctor", "doctor", "Diagnose each host's driver, GPUs and CUDA."),
    "plan": ("gpunode.cli.plan", "plan", "Show what apply would change on each host."),
    "apply": ("gpunode.cli.apply", "apply", "Converge hosts to the inventory."),
    "upgrade": ("gpunode.cli.upgrade", "upgrade", "Upgrade hosts in waves, draining Slurm."),
    "rollback": ("gpunode.cli.upgrade", "rollback", "Return an upgrade's hosts, in waves."),
    "report": ("gpunode.cli.report", "report", "Show a recorded run."),
    "smoke": ("gpunode.cli.smoke", "smoke", "Run the GPU smoke tests on each host."),
    "cost": ("gpunode.cli.cost", "cost", "Rank GPU types by measured work per cost."),
    "top": ("gpunode.cli.top", "top", "Live GPU view of every host (nvitop for a lab)."),
    "exporter": (
        "gpunode.cli.exporter",
        "exporter",
        "GPU metrics of every host, for Prometheus.",
    ),
    "config": ("gpunode.cli.config", "config", "Show the effective settings, and where from."),
    "mirror": ("gpunode.cli.mirror", "mirror", "Fetch once what the hosts install; serve it."),
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

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if name in COMMANDS and cmd is not None:
            from gpunode.cli import envvars

            envvars.check(name, cmd)  # before gpunode.toml's settings join the environment
            ctx.default_map = {name: defaults_for(ctx, name, cmd, rest)}
        return name, cmd, rest

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


def defaults_for(
    ctx: click.Context, name: str, cmd: click.Command, args: list[str]
) -> dict[str, object]:
    """The command's defaults from gpunode.toml files (below the command line and the
    environment, which click reads first); settings that are no option of the command go to
    the environment when it has none (GPUNODE_STATE_DIR, GPUNODE_SSH_TRANSPORT)."""
    from gpunode.cli import settings as config

    # Which inventory (command line or GPUNODE_INVENTORY) picks the file next to it:
    # a lenient parse that reports nothing and runs nothing.
    peek = cmd.make_context(name, list(args), parent=ctx, resilient_parsing=True)
    inventory = peek.params.get("inventory")
    try:
        settings = config.load(inventory if isinstance(inventory, str) else None)
    except (config.ConfigError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(ExitCode.BAD_INPUT) from None
    config.export_unset(settings)
    params = {p.name for p in cmd.params}
    return {k: v for k, v in settings.values.items() if k in params and v is not None}


def _usage_status(exc: click.UsageError) -> None:
    """Make click's usage error exit 5 when shown; a bad value that came from the
    environment names its variable (GPUNODE_APPLY_FORKS), not only the option."""
    vars(exc)["exit_code"] = ExitCode.USAGE  # an instance value over click's class-wide 2
    param, ctx = getattr(exc, "param", None), exc.ctx
    if not isinstance(exc, click.BadParameter) or param is None or ctx is None or not param.name:
        return
    from click.core import ParameterSource

    if ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        envvar = param.envvar or f"{ctx.auto_envvar_prefix}_{param.name.upper()}"
        shown = "/".join(getattr(param, "opts", [])) or param.name
        exc.param_hint = f"environment variable {envvar} ({ctx.command_path} {shown})"


CONTEXT = {
    "help_option_names": ["-h", "--help"],
    "max_content_width": 100,
    "auto_envvar_prefix": "GPUNODE",  # GPUNODE_APPLY_FORKS=8 is apply's --forks 8
}


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


def run() -> NoReturn:
    """The `gpunode` program: `main`, then an exit that skips the interpreter's teardown."""
    from gpunode.cli.leave import leave

    # A command's first half second is mostly imports, hundreds of modules, each a burst of
    # objects that live as long as the process. At Python's default threshold (700) the
    # cycle collector ran about 150 times in a converged one-host apply, once over the whole
    # heap, for about a sixth of its CPU (docs/benchmarks.md); at this one, eight times.
    # Cycles are still collected in the long-lived commands (the exporter, the TUI).
    gc.set_threshold(GC_THRESHOLD)
    try:
        main()
    except SystemExit as exc:
        leave(exc.code)
    except Exception as exc:
        from gpunode.records import StateDirError

        if not isinstance(exc, StateDirError):
            raise
        click.echo(f"error: {exc}", err=True)  # a state directory of someone else's
        leave(ExitCode.BAD_INPUT)
    leave(0)
