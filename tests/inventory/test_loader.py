"""Inventory loading: merging, strict YAML, error positions."""

from __future__ import annotations

import textwrap

import pytest

from gpunode.inventory import InventoryError, load, loads
from tests.conftest import EXAMPLE_INVENTORY


def _load(text: str):  # type: ignore[no-untyped-def]
    return loads(textwrap.dedent(text), "inv.yaml")


def _problems(text: str) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        _load(text)
    return [str(p) for p in exc.value.problems]


def test_shipped_example_validates() -> None:
    inv = load(EXAMPLE_INVENTORY)
    assert set(inv.hosts) == {"gpu-a100-01", "gpu-a100-02", "gpu-h100-01"}
    assert inv.groups == {"a100": ["gpu-a100-01", "gpu-a100-02"], "h100": ["gpu-h100-01"]}


def test_layers_merge_deeply_and_later_wins() -> None:
    inv = load(EXAMPLE_INVENTORY)
    h100 = inv.hosts["gpu-h100-01"]
    a100 = inv.hosts["gpu-a100-01"]
    # The group overrides only `branch`; flavor and hold still come from defaults.
    assert h100.stack.driver is not None and a100.stack.driver is not None
    assert (h100.stack.driver.branch, h100.stack.driver.flavor) == ("570", "open")
    assert h100.stack.driver.hold is True
    assert a100.stack.driver.branch == "550"
    # The host overrides only the port; user and connect_timeout still come from defaults.
    assert (h100.ssh.port, h100.ssh.user, h100.ssh.connect_timeout) == (2222, "ubuntu", 20.0)
    # Lists are replaced, not appended.
    assert h100.stack.cuda is not None and h100.stack.cuda.toolkits == ["12.8"]


def test_host_in_two_groups_merges_what_they_agree_on() -> None:
    inv = _load(
        """
        defaults: {stack: {nccl: "2.18"}}
        groups:
          first: {stack: {cudnn: "9", nccl: "2.21"}, hosts: {n1: {address: 127.0.0.1}}}
          second: {stack: {cudnn: "9", cuda: {toolkits: ["12.4"]}}, hosts: {n1: {}}}
        """
    )
    host = inv.hosts["n1"]
    assert host.groups == ["first", "second"]
    assert host.stack.cudnn is not None and host.stack.nccl is not None
    assert (host.stack.cudnn.version, host.stack.nccl.version) == ("9", "2.21")
    assert host.stack.cuda is not None and host.stack.cuda.toolkits == ["12.4"]


def test_unquoted_version_names_line_and_shows_what_was_typed() -> None:
    problems = _problems(
        """
        defaults:
          stack:
            cuda: {toolkits: [12.10]}
        """
    )
    assert problems == [
        "inv.yaml:4:23: defaults.stack.cuda.toolkits[0]: versions must be quoted strings: "
        'write "12.10" (YAML reads 12.10 as the number 12.1)'
    ]


@pytest.mark.parametrize("word", ["yes", "no", "on", "off"])
def test_yes_no_on_off_are_not_booleans(word: str) -> None:
    problems = _problems(f"defaults: {{stack: {{cuda_env: {word}}}}}\n")
    assert len(problems) == 1
    assert problems[0].startswith("inv.yaml:1:30: defaults.stack.cuda_env: ")
    assert "write true or false" in problems[0]


def test_duplicate_keys_are_errors() -> None:
    problems = _problems(
        """
        hosts:
          a: {address: 127.0.0.1}
          a: {address: 127.0.0.2}
        """
    )
    assert len(problems) == 1
    assert problems[0].startswith("inv.yaml:4:3: duplicate key 'a'")


def test_every_problem_is_reported_at_once_with_suggestions() -> None:
    problems = _problems(
        """
        defaults:
          ssh: {host_key_policy: lax, prot: 22}
          stack:
            driver: {branch: 550, flavor: closed}
        """
    )
    joined = "\n".join(problems)
    assert len(problems) == 4, joined
    assert "inv.yaml:3:26: defaults.ssh.host_key_policy: " in joined
    assert "inv.yaml:3:31: defaults.ssh.prot: unknown key 'prot': did you mean 'port'?" in joined
    assert (
        'inv.yaml:5:22: defaults.stack.driver.branch: versions must be quoted strings: write "550"'
        in joined
    )
    assert "inv.yaml:5:35: defaults.stack.driver.flavor: " in joined


def test_merged_host_error_points_at_the_layer_that_set_it() -> None:
    problems = _problems(
        """
        defaults:
          stack:
            cuda: {toolkits: ["12.4"]}
        groups:
          g:
            stack:
              cuda: {default: "12.8"}
            hosts:
              a: {address: 127.0.0.1}
        """
    )
    assert len(problems) == 1
    assert problems[0] == (
        "inv.yaml:7:5: hosts.a.stack: cuda.default '12.8' is not in cuda.toolkits ['12.4']: "
        "add it to toolkits or pick one of them"
    )


def test_a_layer_may_set_half_of_a_pair() -> None:
    inv = _load(
        """
        defaults: {stack: {cuda: {toolkits: ["12.4", "12.8"]}}}
        hosts: {a: {connection: local, stack: {cuda: {default: "12.4"}}}}
        """
    )
    cuda = inv.hosts["a"].stack.cuda
    assert cuda is not None and (cuda.toolkits, cuda.default) == (["12.4", "12.8"], "12.4")


def test_ssh_host_needs_an_address_local_does_not() -> None:
    problems = _problems("hosts:\n  a: {}\n")
    assert problems == [
        "inv.yaml:2:3: hosts.a: an ssh host needs an address: set `address:` or `connection: local`"
    ]
    inv = _load("hosts:\n  a: {connection: local}\n")
    assert inv.hosts["a"].connection == "local"


def test_not_a_mapping_and_broken_yaml() -> None:
    assert _problems("- a\n- b\n")[0].startswith("inv.yaml:1:1: an inventory is a mapping")
    assert _problems("defaults: {ssh: [\n")[0].startswith("inv.yaml:2:1: ")


def test_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InventoryError) as exc:
        load(tmp_path / "nope.yaml")
    assert str(exc.value).endswith("nope.yaml:1:1: no such file")
