"""Every operation, case by case, from data: tests/ops/<op>/<case>.yaml.

A case gives the task's arguments, the host facts the operation reads (a small mapping,
and/or `facts_fixture:`, a captured host under tests/fixtures/facts), the answer to each
probe the operation asks (by its exact command: the case lists them all), and what must
come out: `changes:` (reason and exact steps, stdin where a step has one; `[]` for a host
that already has it) or `error:` (text the refusal must contain, for arguments that are
rejected when parsed or planned). The operation is called directly, not through the
planner, so each case shows one operation's contract. tests/ops/service/stop_only.yaml:

    about: Enabled as wanted but running where it should be stopped; only the stop is planned.
    args: {unit: unattended-upgrades.service, started: false}
    probes:
      test -d /run/systemd/system: true
      systemctl is-enabled --quiet unattended-upgrades.service: true
      systemctl is-active --quiet unattended-upgrades.service: true
    changes:
    - reason: unattended-upgrades.service running
      steps:
      - systemctl stop unattended-upgrades.service

A step with stdin (or apt targets) is a mapping: {command, stdin, installs}; `reboot`,
`apt`, `sudo` and `path` are stated where they are not false, false, true and none.
Optional keys: `context:` (the task's apt_lock_timeout, on_change), `notes:` (what the
operation notes instead of a change), `paths:` (the files whose sha256 it asks the facts for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from ruamel.yaml import YAML

from gpunode.changes import Change, Step
from gpunode.facts.model import HostFacts
from gpunode.facts.parse import parse_facts
from gpunode.roles.ops import OPERATIONS, OpContext

HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures" / "facts"
CASES = sorted(HERE.glob("*/*.yaml"))
KEYS = {"about", "args", "facts", "facts_fixture", "probes", "context", "changes", "notes"}
KEYS |= {"paths", "error"}
# reboot and module_reload always yield a change: the task's `when:` says one is needed
ALWAYS_CHANGES = {"reboot", "module_reload"}


def load(path: Path) -> dict[str, Any]:
    case = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert isinstance(case, dict) and not set(case) - KEYS, f"{path}: keys are {sorted(KEYS)}"
    assert case.get("about"), f"{path}: say what the case shows under `about:`"
    assert ("changes" in case) != ("error" in case), f"{path}: `changes:` or `error:`"
    return case


def host_facts(case: dict[str, Any]) -> HostFacts:
    base: dict[str, Any] = {}
    if "facts_fixture" in case:
        text = (FIXTURES / case["facts_fixture"] / "facts-assembled.txt").read_text()
        base = parse_facts(text).model_dump()
    return HostFacts.model_validate({**base, **case.get("facts", {})})


def shown_step(step: Step) -> str | dict[str, Any]:
    """A step as a case writes it: its command, or a mapping when it has more."""
    if step.stdin is None and not step.installs:
        return step.command
    out: dict[str, Any] = {"command": step.command}
    if step.stdin is not None:
        out["stdin"] = step.stdin
    if step.installs:
        out["installs"] = list(step.installs)
    return out


def shown(change: Change, like: dict[str, Any]) -> dict[str, Any]:
    """The change as a case writes it; `after` only where the case states it."""
    out: dict[str, Any] = {
        "reason": change.reason,
        "steps": [shown_step(s) for s in change.steps],
        "reboot": change.reboot,
        "apt": change.apt,
        "sudo": change.sudo,
        "path": change.path,
    }
    if "after" in like:
        out["after"] = change.after
    return out


def expected(change: dict[str, Any]) -> dict[str, Any]:
    return {"reboot": False, "apt": False, "sudo": True, "path": None, **change}


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_case(path: Path) -> None:
    case = load(path)
    op = OPERATIONS[path.parent.name]
    given = case.get("context", {})
    context = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}

    if "error" in case:
        with pytest.raises((ValidationError, ValueError)) as raised:
            args = op.parse(case["args"])
            op.plan(args, OpContext("role", "task", host_facts(case), **context))
        assert case["error"] in str(raised.value)
        return

    args = op.parse(case["args"])
    answers: dict[str, bool | None] = case.get("probes", {})
    asked = op.probes(args)
    assert sorted(answers) == sorted(p.command for p in asked), "the case answers every probe"
    probes = {p.key: answers[p.command] for p in asked if answers[p.command] is not None}
    ctx = OpContext("role", "task", host_facts(case), probes=probes, **context)

    changes = op.plan(args, ctx)

    wanted = [expected(c) for c in case["changes"]]
    assert len(changes) == len(wanted), [shown(c, {}) for c in changes]
    assert [shown(c, w) for c, w in zip(changes, wanted, strict=True)] == wanted
    assert all(c.op == op.name and c.role == "role" and c.task == "task" for c in changes)
    assert ctx.notes == case.get("notes", [])
    if "paths" in case:
        assert op.paths(args) == case["paths"]


def test_every_operation_has_cases_that_change_converge_and_refuse() -> None:
    folders = {p.name for p in HERE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == set(OPERATIONS), "one folder per operation, named as it"
    for name in OPERATIONS:
        cases = [load(p) for p in sorted((HERE / name).glob("*.yaml"))]
        kinds = {
            "error" if "error" in c else "changes" if c["changes"] else "converged" for c in cases
        }
        want = {"changes", "error"} | (set() if name in ALWAYS_CHANGES else {"converged"})
        assert want <= kinds, f"{name}: missing {sorted(want - kinds)} cases"
