"""A change the host began and never ended runs again, whole, at its place in the plan,
whatever the facts say; the holds it set are gpunode's, and recorded again."""

from __future__ import annotations

import shlex

import pytest
from test_planner import NO_SYSTEMD, converged

from gpunode.changes import Change, Step
from gpunode.execute.journal import entry_key, entry_line
from gpunode.facts.model import HostFacts, JournalEntry
from gpunode.facts.parse import parse_facts
from gpunode.inventory import Host
from gpunode.plan.rerun import held_by_journal, ordinal
from gpunode.roles.ops.apt import record_holds_step
from gpunode.roles.ops.base import sha256
from tests.plan.planhelpers import fresh_facts, plan_host

RUN = "20261203T101500-a1b2c3"
LDCONF = "/etc/ld.so.conf.d/gpunode-cuda.conf"


def begun(c: Change, reached: int, run: str = RUN) -> JournalEntry:
    """The entry the executor leaves for `c`, read back through the facts' parser."""
    text = f"### journal\nentry {entry_key(c)} {reached} {entry_line(c, run)}\n### end\n"
    (e,) = parse_facts(text).journal
    return e


def fresh_change(host: Host, role: str, op: str) -> Change:
    plan = plan_host(host, fresh_facts(), probes=NO_SYSTEMD)
    return next(c for c in plan.changes if (c.role, c.op) == (role, op))


def ldconf(host: Host) -> Change:
    return next(
        c for c in plan_host(host, fresh_facts(), probes=NO_SYSTEMD).changes if c.path == LDCONF
    )


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 102, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "102nd", "111th",
    ]  # fmt: skip


def test_a_cut_change_runs_again_whole_although_the_facts_look_converged(
    host: Host, fresh: HostFacts
) -> None:
    """ld.so.conf written, ldconfig never ran: the file's hash is right, the plan was empty."""
    c = ldconf(host)
    assert c.commands[-1] == "ldconfig"
    facts = converged(host, fresh).model_copy(update={"journal": [begun(c, 2)]})
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    (again,) = plan.changes
    assert (again.role, again.task, again.op) == (c.role, c.task, c.op)
    assert again.reason == f"interrupted at its 2nd command in run {RUN}"
    key = entry_key(c)
    # the file's content is the host's root-only copy of the stdin it was first written with
    assert again.steps[0].command == (
        f"{{ {c.steps[0].command}\n}} < /var/lib/gpunode/journal/{key}.1.in"
    )
    assert again.steps[0].stdin is None
    assert again.commands[1:] == c.commands[1:]


def test_it_keeps_its_place_among_the_others(host: Host, fresh: HostFacts) -> None:
    facts = converged(host, fresh)
    files = dict(facts.files)
    files["/etc/modprobe.d/gpunode-blacklist-nouveau.conf"] = "absent"  # driver: earlier
    files["/etc/profile.d/gpunode-cuda.sh"] = "absent"  # cuda_env's first task: earlier
    gone = Change("old_role", "a task no role has now", "command", "why", ())
    gone = Change(gone.role, gone.task, gone.op, gone.reason, ldconf(host).steps[1:])
    journal = [begun(ldconf(host), 2), begun(gone, 1)]
    plan = plan_host(
        host, facts.model_copy(update={"files": files, "journal": journal}), probes=NO_SYSTEMD
    )
    assert [(c.role, c.op, c.reason.split(" in run ")[0]) for c in plan.changes] == [
        ("old_role", "command", "interrupted at its 1st command"),  # walked no more: first
        ("driver", "module_blacklist", "nouveau not blacklisted"),
        ("cuda_env", "template", "/etc/profile.d/gpunode-cuda.sh missing"),
        ("cuda_env", "template", "interrupted at its 2nd command"),
    ]


def test_the_plans_own_change_is_kept_once_with_the_journals_reason(
    host: Host, fresh: HostFacts
) -> None:
    c = ldconf(host)
    facts = converged(host, fresh)
    files = {**facts.files, LDCONF: sha256("an older content\n")}
    plan = plan_host(
        host, facts.model_copy(update={"files": files, "journal": [begun(c, 1)]}), probes=NO_SYSTEMD
    )
    (kept,) = plan.changes
    assert kept.reason == f"interrupted at its 1st command in run {RUN}"
    assert kept.steps == c.steps  # the plan's own: the file's content on stdin


def test_tags_select_the_journals_changes_too(host: Host, fresh: HostFacts) -> None:
    facts = converged(host, fresh).model_copy(update={"journal": [begun(ldconf(host), 2)]})
    assert len(plan_host(host, facts, probes=NO_SYSTEMD, tags=["cuda_env"]).changes) == 1
    assert plan_host(host, facts, probes=NO_SYSTEMD, tags=["driver"]).changes == ()
    assert plan_host(host, facts, probes=NO_SYSTEMD, skip_tags=["cuda_env"]).changes == ()


def driver_transaction(host: Host) -> Change:
    c = fresh_change(host, "driver+cuda_toolkit", "apt_packages")
    assert any(s.command.startswith("apt-mark hold -- ") for s in c.steps)
    return c


def test_holds_a_cut_change_set_are_recorded_again(host: Host, fresh: HostFacts) -> None:
    """`apt-mark hold` ran, the hold record did not: the holds are gpunode's, and the change
    runs again whole (its record step among its commands)."""
    c = driver_transaction(host)
    facts = converged(host, fresh)
    lost = ["libnvidia-compute-550", "nvidia-open-550"]
    held = [n for n in facts.gpunode_holds if n not in lost]
    hold_step = next(i for i, s in enumerate(c.steps, 1) if s.command.startswith("apt-mark hold"))
    facts = facts.model_copy(update={"gpunode_holds": held, "journal": [begun(c, hold_step + 1)]})
    assert held_by_journal(facts) == lost
    (again,) = plan_host(host, facts, probes=NO_SYSTEMD).changes
    assert again.reason == f"interrupted at its {ordinal(hold_step + 1)} command in run {RUN}"
    record = record_holds_step([], []).command
    (rec,) = [s for s in again.steps if s.command.startswith("{ " + record)]
    n = again.steps.index(rec) + 1
    assert rec.command.endswith(f"< /var/lib/gpunode/journal/{entry_key(c)}.{n}.in")


def test_a_kept_change_records_the_holds_the_record_lost(host: Host, fresh: HostFacts) -> None:
    """The plan's own transaction (a package to move) holds only what is not held yet: the
    holds the cut run set are recorded by a step added to it."""
    c = driver_transaction(host)
    facts = converged(host, fresh)
    packages = dict(facts.packages)
    # the same transaction is planned again: a package of each of its roles is missing
    packages.pop("cuda-toolkit-12-4")
    packages.pop("libnvidia-compute-550")
    facts = facts.model_copy(
        update={
            "packages": packages,
            "gpunode_holds": [
                "libcudnn9-cuda-12",
                "libcudnn9-dev-cuda-12",
                "libnccl-dev",
                "libnccl2",
            ],
            "journal": [begun(c, 4)],
        }
    )
    plan = plan_host(host, facts, probes=NO_SYSTEMD)
    (kept,) = [x for x in plan.changes if (x.role, x.task) == (c.role, c.task)]
    assert kept.reason == f"interrupted at its 4th command in run {RUN}"
    last = kept.steps[-1]
    assert last.command == record_holds_step([], []).command
    assert last.stdin == "nvidia-open-550\n"  # the plan's own record has the other


def test_an_admin_hold_is_not_taken_for_gpunodes(host: Host, fresh: HostFacts) -> None:
    """Only the packages a begun change's `apt-mark hold` names are gpunode's: libnccl2,
    held and unrecorded too, stays the admin's."""
    facts = converged(host, fresh)
    hold = Step("apt-mark hold -- " + shlex.join(["nvidia-open-550"]))
    c = Change("driver", "t", "apt_packages", "why", (hold,))
    facts = facts.model_copy(update={"gpunode_holds": [], "journal": [begun(c, 1)]})
    assert held_by_journal(facts) == ["nvidia-open-550"]
    assert facts.packages["libnccl2"].held


@pytest.mark.parametrize("reached", [1, 2])
def test_the_plan_names_the_run_and_the_command(host: Host, fresh: HostFacts, reached: int) -> None:
    c = ldconf(host)
    facts = converged(host, fresh).model_copy(
        update={"journal": [begun(c, reached, "20261203T090000-ffffff")]}
    )
    (again,) = plan_host(host, facts, probes=NO_SYSTEMD).changes
    assert again.reason == (
        f"interrupted at its {ordinal(reached)} command in run 20261203T090000-ffffff"
    )
