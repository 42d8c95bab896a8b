"""The facts' `journal` section: each change begun on the host and not ended, as the
executor wrote it (gpunode/execute/journal.py), and the command it had reached."""

from __future__ import annotations

from gpunode.changes import Change, Step
from gpunode.execute.journal import entry_key, entry_line
from gpunode.facts.parse import parse_facts

LDCONF = Change(
    "cuda_env",
    "CUDA libraries for the dynamic linker",
    "template",
    "/etc/ld.so.conf.d/gpunode-cuda.conf missing",
    (Step("install-the-file", "/usr/local/cuda/lib64\n"), Step("ldconfig")),
    tags=("cuda_env",),
)


def facts_text(*lines: str) -> str:
    return "### journal\n" + "".join(f"{ln}\n" for ln in lines) + "### end\n"


def test_an_entry_reads_back_as_written() -> None:
    key = entry_key(LDCONF)
    facts = parse_facts(facts_text(f"entry {key} 2 {entry_line(LDCONF, '20261203T101500-a1b2c3')}"))
    assert facts.errors == []
    (e,) = facts.journal
    assert (e.key, e.run, e.title, e.op, e.reached) == (
        key,
        "20261203T101500-a1b2c3",
        "cuda_env: CUDA libraries for the dynamic linker",
        "template",
        2,
    )
    assert [(s.command, s.stdin) for s in e.steps] == [
        ("install-the-file", True),
        ("ldconfig", False),
    ]
    assert e.tags == ["cuda_env"]
    assert e.stdin_path(1) == f"/var/lib/gpunode/journal/{key}.1.in"


def test_no_journal_means_no_entry() -> None:
    assert parse_facts(facts_text()).journal == []
    assert parse_facts("### end\n").journal == []


def test_an_unreadable_entry_is_named_and_the_others_still_count() -> None:
    good = f"entry {entry_key(LDCONF)} 1 {entry_line(LDCONF, 'run-1')}"
    facts = parse_facts(
        facts_text(
            "entry 0123456789abcdef 1 {not json",
            good,
            f"entry ../../etc 1 {entry_line(LDCONF, 'run-1')}",  # not a key: never a path
            f"entry {entry_key(LDCONF)} 1 {entry_line(LDCONF, 'run 1; rm -rf /')}",
        )
    )
    assert [e.run for e in facts.journal] == ["run-1"]
    assert len(facts.errors) == 3, facts.errors
    assert all(err.startswith("journal: entry ") for err in facts.errors)


def test_a_counter_that_is_no_number_reads_as_the_first_command() -> None:
    line = f"entry {entry_key(LDCONF)} ? {entry_line(LDCONF, 'run-1')}"
    (e,) = parse_facts(facts_text(line)).journal
    assert e.reached == 1


def test_the_cuda_alternatives_mode_is_read() -> None:
    """A run cut before its `update-alternatives --set` leaves /usr/local/cuda in the auto
    mode a toolkit's package installed it in: the facts say which."""
    text = "### cuda-alternative\n/usr/local/cuda-12.4\nmode auto\n### end\n"
    facts = parse_facts(text)
    assert (facts.cuda_alternative, facts.cuda_alternative_mode) == ("/usr/local/cuda-12.4", "auto")
    facts = parse_facts("### cuda-alternative\nmode manual\n### end\n")  # no link, a state file
    assert (facts.cuda_alternative, facts.cuda_alternative_mode) == (None, "manual")
    assert (
        parse_facts("### cuda-alternative\n/usr/local/cuda-13.0\n### end\n").cuda_alternative_mode
        is None
    )
