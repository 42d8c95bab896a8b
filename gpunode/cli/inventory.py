"""`gpunode inventory`: work with inventories themselves (import one from Ansible)."""

from __future__ import annotations

import io
import json
import os
import shlex
import stat
import sys
from typing import Any

import click

from gpunode.exitcodes import ExitCode

MAX_JSON_BYTES = 10 * 1024 * 1024


@click.group()
def inventory() -> None:
    """Work with inventory files."""


@inventory.command("import")
@click.argument("source", metavar="FILE|-")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the inventory to this file instead of standard output.",
)
@click.option("--force", is_flag=True, help="Overwrite the --output file if it exists.")
def import_(source: str, output: str | None, force: bool) -> None:
    """Convert the JSON of `ansible-inventory --list` (read from FILE, or - for standard
    input) into a gpunode inventory: hosts, groups (child groups flattened into their
    parents), `all`'s variables as defaults, and the connection variables ansible_host,
    ansible_user, ansible_port, ansible_ssh_private_key_file and ansible_connection: local,
    and a jump host in ansible_ssh_common_args (-J, ProxyJump, or a ProxyCommand that is only
    `ssh -W %h:%p HOP`) as ssh.proxy_jump. Passwords are never copied; every other variable
    (and ssh argument) is named on standard error.

    \b
      ansible-inventory -i hosts.ini --list | gpunode inventory import - -o cluster.yaml

    Exit codes: 0 written, 4 bad input: not such JSON, or it cannot become a valid inventory
    (nothing written).
    """
    from gpunode.inventory import InventoryError, loads
    from gpunode.inventory.ansible import ImportProblem, convert
    from gpunode.inventory.text import bad_char, printable

    # a name is written into the inventory's first line: a newline there would become YAML
    for what, given in (("FILE", source), ("--output", output)):
        wrong = bad_char(given) if given else None
        if wrong:
            click.echo(f"error: {what} {printable(given or '')}: the name {wrong}; rename the "
                       "file, or pipe it in with -", err=True)  # fmt: skip
            sys.exit(ExitCode.BAD_INPUT)
    name = "<stdin>" if source == "-" else source
    try:
        converted = convert(_json(_read(source), source))
    except (ImportProblem, ValueError, OSError) as exc:
        click.echo(f"error: {printable(name)}: {printable(str(exc))}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    text = render(converted.document, name)
    try:
        loads(text, output or "<output>")
    except InventoryError as exc:
        for problem in exc.problems:
            field = problem.field or "inventory"
            click.echo(f"error: {printable(name)}: {printable(field)}: "
                       f"{printable(problem.message)}", err=True)  # fmt: skip
        click.echo("nothing was written.", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    for warning in converted.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w" if force else "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        click.echo(f"error: {printable(output)} exists: pass --force to overwrite it", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    click.echo(f"wrote {printable(output)}", err=True)


def _json(text: str, source: str) -> Any:
    """The JSON `ansible-inventory --list` prints; anything else (an INI or YAML inventory
    itself) is refused naming the command that makes the JSON from it."""
    from gpunode.inventory.ansible import ImportProblem

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        given = "-i INVENTORY" if source == "-" else f"-i {shlex.quote(source)}"
        raise ImportProblem(
            f"not JSON ({exc.msg} at line {exc.lineno}): "
            "gpunode imports what ansible-inventory prints, not Ansible's INI or YAML "
            f"files; run: ansible-inventory {given} --list | gpunode inventory import - "
            "-o cluster.yaml"
        ) from None


def _read(source: str) -> str:
    from gpunode.inventory.ansible import ImportProblem

    if source == "-":
        data = sys.stdin.buffer.read(MAX_JSON_BYTES + 1)
    else:
        # O_NONBLOCK: a FIFO must not wait for a writer before it is refused.
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            raise ImportProblem(f"cannot open: {exc.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ImportProblem("not a regular file: give the JSON as a file, or - for stdin")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ImportProblem(f"larger than {MAX_JSON_BYTES // 2**20} MiB")
    return data.decode("utf-8")


def render(document: dict[str, Any], source: str) -> str:
    """The document as YAML, headed by where it came from."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    buf = io.StringIO()
    yaml.dump(document, buf)
    head = f"# Imported from {source} (ansible-inventory --list) by gpunode inventory import.\n"
    return head + buf.getvalue()
