"""Each stack component is declared once (gpunode/components.py): every list derived from the
declaration agrees with it, and names only what exists."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gpunode.cli import cli
from gpunode.cli.smoke import smoke
from gpunode.components import (
    CLI_TESTS,
    COMPONENTS,
    MULTINODE,
    SMOKE_TESTS,
    SUITE_TESTS,
    repository,
)
from gpunode.doctor.rules import RULES
from gpunode.facts.model import HostFacts
from gpunode.inventory.model import Host, Stack
from gpunode.roles.walk import builtin_roles
from gpunode.smoke.runner import selected_tests, suite_files

REPO = Path(__file__).resolve().parent.parent


def _only_choices() -> list[str]:
    option = next(p for p in smoke.params if p.name == "only")
    assert isinstance(option.type, click.Choice)
    return list(option.type.choices)


def test_smoke_names_agree_everywhere() -> None:
    field = Stack.model_fields["smoke"].annotation
    (literal,) = typing.get_args(field)  # list[SmokeTest]
    assert list(typing.get_args(literal)) == list(SUITE_TESTS)
    assert _only_choices() == [*SUITE_TESTS, MULTINODE] == list(CLI_TESTS)
    owned = [t for c in COMPONENTS for t in c.smoke]
    assert sorted(owned) == sorted(SUITE_TESTS), "each smoke test belongs to one component"


@pytest.mark.parametrize("test", SMOKE_TESTS, ids=lambda t: t.name)
def test_each_smoke_test_ships_its_script(test: typing.Any) -> None:
    files = suite_files()
    assert test.script in files
    assert "components.py" in files  # the driver reads the declaration on the host
    assert test.runs in ("system", "each", "first", "bindings")
    assert (test.module is None) == (test.runs == "system")
    assert test.selected in ("always", "declared", "asked")


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.field)
def test_each_component_names_what_exists(component: typing.Any) -> None:
    assert component.field in Stack.model_fields
    assert (REPO / "roles" / component.role / "tasks.yaml").is_file()
    if component.repository:
        assert (REPO / "roles" / repository(component.repository).role / "tasks.yaml").is_file()
    for fact in component.facts:
        assert fact in HostFacts.model_fields, fact
    for prefix in component.doctor:
        assert any(r.id.startswith(prefix) for r in RULES), prefix
    assert component.hold == (component.policy in ("package", "driver"))
    # unattended-upgrades is kept off every package of NVIDIA's repository
    assert bool(component.unattended) == (component.repository == "nvidia")
    assert all(re.fullmatch(r"// [^\n]*|[a-z0-9][a-z0-9.+-]*", e) for e in component.unattended)
    if component.hold:
        model = Stack.model_fields[component.field].annotation
        fields = next(a for a in typing.get_args(model) if hasattr(a, "model_fields"))
        assert {"update", "hold"} <= set(fields.model_fields), component.field


def test_builtin_roles_follow_the_declaration() -> None:
    host = Host.model_validate(
        {
            "name": "h",
            "connection": "local",
            "stack": {
                "containers": {},
                "nccl": "2",
                "driver": {"branch": "580"},
                "cuda": {"toolkits": ["12.8"]},
                "roles": ["mine"],
            },
        }
    )
    roles = builtin_roles(host)
    assert roles == [
        "unattended_upgrades",
        "nvidia_repo",
        "driver",
        "cuda_toolkit",
        "nccl",
        "container_repo",
        "container_toolkit",
        "mine",
    ]


def test_default_smoke_tests_add_the_declared_components() -> None:
    bare = Host.model_validate({"name": "h", "connection": "local"})
    both = Host.model_validate(
        {"name": "h", "connection": "local", "stack": {"tensorrt": "10", "dcgm": {}}}
    )
    always = [t.name for t in SMOKE_TESTS if t.selected == "always"]
    assert selected_tests(bare) == always
    assert selected_tests(both) == [*always, "tensorrt", "dcgm"]


def test_smoke_only_containers_is_accepted(tmp_path: Path) -> None:
    """`stack.smoke: [containers]` was accepted while `--only containers` was refused."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  here:\n    connection: local\n    become: none\n")
    res = CliRunner().invoke(cli, ["smoke", str(inv), "--only", "containers", "--json"])
    assert "Invalid value for '--only'" not in res.output
    assert '"name": "containers"' in res.output
    refused = CliRunner().invoke(cli, ["smoke", str(inv), "--only", "no-such-test"])
    assert refused.exit_code != 0 and "Invalid value for '--only'" in refused.output
