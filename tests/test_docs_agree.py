"""The README and docs/ agree with the code: every `gpunode ...` command line they show
parses against its command (the command and its options exist), and every exit status they
name is the one gpunode/exitcodes.py gives that meaning."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpunode.cli import cli
from gpunode.exitcodes import RANK, ExitCode

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_SPAN = re.compile(r"`([^`]+)`")


def _shell_lines(text: str) -> tuple[list[str], str]:
    """The lines of the shell blocks (continuations joined), and the text outside blocks."""
    shell: list[str] = []
    prose: list[str] = []
    lang = None
    for line in text.splitlines():
        if line.startswith("```"):
            lang = None if lang is not None else line[3:].strip() or "text"
            continue
        if lang is None:
            prose.append(line)
        elif lang in ("sh", "bash", "console"):
            if shell and shell[-1].endswith("\\"):
                shell[-1] = shell[-1][:-1] + " " + line.strip()
            else:
                shell.append(line)
    return shell, "\n".join(prose)


def _lines(text: str) -> list[str]:
    """Command lines: each line of a shell block that runs gpunode, and each inline
    `gpunode ...` span."""
    shell, prose = _shell_lines(text)
    found = [line for line in shell if "gpunode " in line.split("#")[0]]
    prose = re.sub(r"``.*?``", "", prose, flags=re.S)
    found += [span for span in _SPAN.findall(prose) if span.startswith("gpunode ")]
    return found


def _invocations(line: str) -> list[list[str]]:
    """The gpunode argument lists of one line (a pipe or `&&` may hold several); a table's
    `[--opt]`, `A/B` and `FILE\\|-` placeholders are opened up."""
    line = line.replace("\\|", "").split(" #")[0]
    out = []
    for part in re.split(r"\|\||&&|\||;|\$\(", line):
        part = re.split(r"\s[<>]|\)", part)[0]
        try:
            words = shlex.split(part.replace("[", " ").replace("]", " "))
        except ValueError:
            words = part.split()
        while words and (words[0] in ("sudo", "$") or re.fullmatch(r"[A-Z_]+=\S*", words[0])):
            words = words[1:]  # a prompt, sudo, VAR=value before the command
        if words[:1] != ["gpunode"]:
            continue
        words = words[1:]
        if words and "/" in words[0] and not words[0].startswith(("/", ".")):
            continue
        if len(words) > 1 and "/" in words[1] and words[0] == "lab":
            out += [[words[0], sub] for sub in words[1].split("/")]
            continue
        out.append(words)
    return out


CASES = sorted(
    {
        (doc.relative_to(ROOT).as_posix(), tuple(words))
        for doc in DOCS
        for line in _lines(doc.read_text(encoding="utf-8"))
        for words in _invocations(line)
        if words
    }
)


def test_the_docs_show_command_lines() -> None:
    # the extraction finds what a reader sees: the quick start's commands among them
    readme = {words for doc, words in CASES if doc == "README.md"}
    assert ("plan", "lab.yaml", "--detailed-exitcode") in readme
    assert len(CASES) > 100


@pytest.mark.parametrize(("doc", "words"), CASES, ids=[f"{d}:{' '.join(w)}" for d, w in CASES])
def test_every_command_line_in_the_docs_parses(doc: str, words: tuple[str, ...]) -> None:
    if words[0] in ("-V", "--version", "--help", "-h"):
        return
    # --help after the arguments: click parses them all (an unknown command or option
    # fails) and then prints the help instead of running anything.
    result = CliRunner().invoke(cli, [*words, "--help"])
    if result.exit_code != 0 and words[-1].startswith("--"):
        # prose naming an option without its value (`gpunode smoke --only`): --help took
        # its place; the option must still be one the command's help lists
        result = CliRunner().invoke(cli, [*words[:-1], "--help"])
        assert words[-1] in result.output, f"{doc}: gpunode {' '.join(words)}\n{result.output}"
    assert result.exit_code == 0, f"{doc}: gpunode {' '.join(words)}\n{result.output}"


# What a sentence that names an exit status must be about: words of its meaning.
ABOUT: dict[ExitCode, tuple[str, ...]] = {
    ExitCode.FAILED: ("fail", "held by"),
    ExitCode.UNREACHABLE: ("unreachable", "no output", "banner", "reach"),
    ExitCode.BAD_INPUT: (
        "refuse",
        "bad",
        "inventory",
        "input",
        "invalid",
        "stack",
        "password",
        "touch",
        "changed since",
        "problem",
    ),
    ExitCode.USAGE: ("usage", "option", "--yes", "tag", "no such run", "not installed", "--limit"),
    ExitCode.HOSTKEY: ("key",),
    ExitCode.PENDING: ("pending", "detailed-exitcode"),
    ExitCode.REBOOT_PENDING: ("reboot",),
    ExitCode.DOCTOR_WARNING: ("warning",),
    ExitCode.DOCTOR_ERROR: ("error",),
    ExitCode.LOCKED: ("lock",),
    ExitCode.INTERRUPTED: ("interrupt", "ctrl-c", "quit"),
    ExitCode.PIPE_CLOSED: ("pipe", "closed"),
    ExitCode.TERMINATED: ("sigterm",),
}
# "exits 7", "exit code 6", "exit 4 (bad input)"; not a command's own status quoted from its
# output ("exit 100: E: ...", "`exit 7: curl ...`").
# Other programs' statuses the docs quote (nvidia-smi's, a failed step's own).
OTHERS = ("an unknown field exits 2", "(exit 5, `begin`")
_EXIT = re.compile(r"\bexit(?:s|ed|ing)?(?: code| status)?,? (\d+)\b(?!:)", re.I)
# A claim is read with its context: a paragraph, a list item or a table row.
_SEGMENT = re.compile(r"(?:^(?![-|] |\s*$).*\n?)+|^[-|] .*\n?(?:^(?![-|#] )(?:\S| ).*\n?)*", re.M)


def _mentions() -> list[tuple[str, int, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for seg in _SEGMENT.findall(text):
            for other in OTHERS:
                seg = seg.replace(other, "")
            for m in _EXIT.finditer(seg):
                out.append(
                    (doc.relative_to(ROOT).as_posix(), int(m.group(1)), " ".join(seg.split()))
                )
    return out


def test_every_exit_status_named_in_the_docs_means_what_exitcodes_says() -> None:
    mentions = _mentions()
    assert len(mentions) > 20
    wrong = []
    for doc, code, sentence in mentions:
        if code not in set(ExitCode):
            continue  # another program's status (apt's 100), quoted
        words = ABOUT.get(ExitCode(code))
        if words and not any(w in sentence.lower() for w in words):
            wrong.append(f"{doc}: exit {code} ({ExitCode(code).meaning}?): {sentence}")
    assert not wrong, "\n".join(wrong)


# "Exit status: 0 healthy, 9 a warning and no error, 2 a host failed, ..." (each command's
# help, and so its page): each "N words" pair.
_LIST = re.compile(r"Exit (?:codes|status): (.*?)(?:\n\n|$)", re.S)
_PAIR = re.compile(r"(?:^|, |or )(\d+) ([^,]+)")


def test_every_exit_status_a_commands_help_lists_means_what_exitcodes_says() -> None:
    wrong, seen = [], 0
    for doc in DOCS:
        for listed in _LIST.findall(doc.read_text(encoding="utf-8")):
            listed = " ".join(listed.split()).split(" Several:")[0]
            listed = re.sub(r"\([^)]*\)", "", listed)  # asides hold commas of their own
            for code, words in _PAIR.findall(listed):
                if words.startswith(">"):
                    continue  # a ranking (6 > 2 > 3), checked against RANK elsewhere
                seen += 1
                about = ABOUT.get(ExitCode(int(code))) if int(code) in set(ExitCode) else None
                if about and not any(w in words.lower() for w in about):
                    wrong.append(f"{doc.relative_to(ROOT)}: {code} {words}")
    assert seen > 30
    assert not wrong, "\n".join(wrong)


def test_the_ranking_table_is_exitcodes_rank() -> None:
    text = (ROOT / "docs" / "upgrades.md").read_text(encoding="utf-8")
    body = text.split("| some host... | exit |\n| --- | --- |\n", 1)[1].split("\n\n", 1)[0]
    codes = [int(line.rsplit("|", 2)[1]) for line in body.splitlines()]
    assert codes[-1] == 0
    assert codes[:-1] == [
        int(c) for c in RANK if c not in (ExitCode.DOCTOR_ERROR, ExitCode.DOCTOR_WARNING)
    ]


def test_every_command_page_shows_an_example() -> None:
    for page in sorted((ROOT / "docs" / "commands").glob("*.md")):
        if page.name == "README.md":
            continue
        examples = page.read_text(encoding="utf-8").split("## Examples\n\n```sh\n", 1)[1]
        assert not examples.startswith("```"), (
            f"{page.name}: no example: add one to EXAMPLES in gpunode/reference/commands.py"
        )


def test_the_readmes_install_lines_are_the_ones_the_fresh_machine_check_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Install\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split(" #")[0].strip() for line in block.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert "pipx install ." in lines
    check = (ROOT / "scripts" / "fresh-check.sh").read_text(encoding="utf-8")
    for line in lines:
        assert line in check, f"scripts/fresh-check.sh does not run the README's `{line}`"


def test_the_readmes_inventory_loads_as_written() -> None:
    from gpunode.inventory import loads

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    text = readme.split("## The inventory, in brief\n", 1)[1].split("```yaml\n", 1)[1]
    inv = loads(text.split("```", 1)[0], "README.md")
    assert sorted(inv.hosts) == ["gpu-h100-01", "gpu-h100-02"]
    assert inv.hosts["gpu-h100-02"].ssh.port == 2222


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]*))?\)")


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces `-`."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_link_between_the_docs_resolves() -> None:
    broken = []
    for doc in DOCS:
        for target, anchor in _LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (doc.parent / target).resolve()
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path.read_text()):
                broken.append(f"{doc.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, "\n".join(broken)


def test_every_variable_gpunode_reads_is_documented() -> None:
    from gpunode.cli.envvars import VARIABLES

    guide = (ROOT / "docs" / "inventory-and-versions.md").read_text(encoding="utf-8")
    for name, (meaning, _) in VARIABLES.items():
        assert f"| `{name}` | {meaning} |" in guide, name
