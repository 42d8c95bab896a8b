"""Options several commands share, declared once: each is a decorator for a click command."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def inventory_argument(fn: F) -> F:
    return click.argument(
        "inventory",
        type=click.Path(dir_okay=False, path_type=str),
        metavar="INVENTORY",
        envvar="GPUNODE_INVENTORY",  # else gpunode.toml's `inventory`
    )(fn)


def limit_option(fn: F) -> F:
    return click.option(
        "-l",
        "--limit",
        metavar="PATTERN",
        help="Hosts to act on: names, groups, globs, ~regex, group[0], group[1:3], @file, "
        "'!exclude', '&intersect', comma-separated.",
    )(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def tags_option(fn: F) -> F:
    """`--tags` and `--skip-tags`; names no selected role offers are refused (exit 5)."""
    fn = click.option(
        "--skip-tags",
        metavar="TAGS",
        callback=lambda _ctx, _param, text: parse_tags(text),
        help="Leave out changes of these roles/tags (comma-separated).",
    )(fn)
    return click.option(
        "--tags",
        metavar="TAGS",
        callback=lambda _ctx, _param, text: parse_tags(text),
        help="Only changes of these roles/tags (comma-separated).",
    )(fn)


def forks_option(fn: F) -> F:
    """`-f/--forks`; None means the default of `gpunode.hostpool.fork_count`."""
    return click.option(
        "-f",
        "--forks",
        type=click.IntRange(1, 256),
        default=None,
        help="Hosts to work on at once (default: every selected host, up to 50).",
    )(fn)


def become_pass_option(fn: F) -> F:
    return click.option(
        "-K",
        "--ask-become-pass",
        is_flag=True,
        help="Prompt once for the sudo password (else become_password_env).",
    )(fn)


def verbose_option(fn: F) -> F:
    """`-v` counted: 1 shows the output of every command, 2 also the effective settings."""
    return click.option(
        "-v",
        "--verbose",
        count=True,
        help="-v: show the output of every command; -vv: also the settings and where from.",
    )(fn)


def allow_busy_option(fn: F) -> F:
    return click.option(
        "--allow-busy",
        is_flag=True,
        help="Reboot or change the driver even while processes use the GPUs (else such a "
        "host is refused, listing them).",
    )(fn)


def no_tui_option(fn: F) -> F:
    return click.option("--no-tui", is_flag=True, help="Plain output even in a terminal.")(fn)


def did_you_mean(word: str, known: list[str]) -> str:
    """' (did you mean 'X'?)' for a near miss among `known`, else ''."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class Choice(click.Choice):  # type: ignore[type-arg]
    """click.Choice whose error names the nearest choice first."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value not in self.choices:
            hint = did_you_mean(value, [str(c) for c in self.choices])
            if hint:
                self.fail(
                    f"{value!r}{hint}; one of {', '.join(map(str, self.choices))}", param, ctx
                )
        return super().convert(value, param, ctx)


def parse_tags(text: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())


def reboot_timeout_option(fn: F) -> F:
    """`--reboot-timeout`, for apply and the rolling upgrade alike."""
    return click.option(
        "--reboot-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="How long a rebooting host may take to come back with a new boot id "
        "(default: the inventory's reboot.timeout, else 600).",
    )(fn)


def apply_options(fn: F) -> F:
    """`apply`'s own options: how the run goes, rolls out and is shown."""
    decorators = [
        click.option("--check", is_flag=True, help="Read and plan only: no remote writes at all."),
        click.option("--diff", is_flag=True, help="Show the difference in each file changed."),
        click.option(
            "--detailed-exitcode",
            is_flag=True,
            help="With --check: exit 7 when changes are pending and no host failed.",
        ),
        click.option(
            "--serial",
            type=click.IntRange(1),
            default=None,
            help="Converge hosts in batches of N (rolling changes).",
        ),
        click.option(
            "--max-fail",
            type=click.FloatRange(0, 100),
            default=None,
            metavar="PCT",
            help="Skip later batches once more than PCT% of one batch's hosts failed.",
        ),
        reboot_timeout_option,
        click.option(
            "--no-reboot",
            is_flag=True,
            help="Make every change but the reboots; a host that needs one is reported "
            "'reboot pending' (exit 8) and the next apply reboots it.",
        ),
        allow_busy_option,
        click.option("-y", "--yes", is_flag=True, help="Apply without asking."),
        click.option(
            "--show-commands",
            is_flag=True,
            help="Before asking, print every host's full plan with its exact commands "
            "(the prompt's summary groups hosts and lists change titles only).",
        ),
        no_tui_option,
        click.option("--no-smoke", is_flag=True, help="Skip the smoke tests after converging."),
    ]
    for decorate in reversed(decorators):
        fn = decorate(fn)
    return fn


def allow_change_held_option(fn: F) -> F:
    return click.option(
        "--allow-change-held",
        is_flag=True,
        help="Let a change move a package the admin held (a hold gpunode did not set);"
        " without it such a host is refused.",
    )(fn)
