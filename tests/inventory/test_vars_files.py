"""group_vars/ and host_vars/ beside an inventory: Ansible's precedence, errors at their lines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpunode.inventory import InventoryError, load

INVENTORY = """\
defaults:
  ssh: {user: from-defaults, port: 2200}
  stack:
    driver: {branch: "550"}
groups:
  a100:
    ssh: {user: from-group}
    hosts:
      n1: {address: 192.0.2.1}
      n2: {address: 192.0.2.2, ssh: {user: from-host}}
hosts:
  n3: {address: 192.0.2.3}
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"inv.yaml": INVENTORY, **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root / "inv.yaml"


def test_files_merge_host_over_group_over_all(tmp_path: Path) -> None:
    inv = load(
        _write(
            tmp_path,
            {
                "group_vars/all.yaml": "ssh: {user: from-all-file, port: 2300}\n",
                "group_vars/a100.yml": "ssh: {user: from-group-file}\ngpus: {model: A100}\n",
                "host_vars/n1.yaml": "ssh: {port: 2401}\n",
                "host_vars/n3.yaml": "address: 192.0.2.33\n",
            },
        )
    )
    n1, n2, n3 = (inv.hosts[n] for n in ("n1", "n2", "n3"))
    # group_vars/a100 wins over the file's group and all; host_vars/n1 wins over both.
    assert (n1.ssh.user, n1.ssh.port, n1.gpus.model) == ("from-group-file", 2401, "A100")
    # The inventory's own host entry still wins over its group's file.
    assert (n2.ssh.user, n2.ssh.port) == ("from-host", 2300)
    # group_vars/all wins over `defaults`; host_vars may set the address.
    assert (n3.ssh.user, n3.address, n3.stack.driver) == (
        "from-all-file",
        "192.0.2.33",
        inv.hosts["n1"].stack.driver,
    )
    assert str(inv.where("n1", ("ssh", "port"))).startswith(str(tmp_path / "host_vars/n1.yaml"))


def test_unknown_key_in_a_group_file_names_that_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, {"group_vars/a100.yaml": "gpus: {model: A100}\nssh:\n  usr: x\n"})
    with pytest.raises(InventoryError) as err:
        load(path)
    (problem,) = err.value.problems
    assert str(problem) == (
        f"{tmp_path}/group_vars/a100.yaml:3:3: ssh.usr: unknown key 'usr': did you mean 'user'?"
    )
    # The command line reports it the same way and exits 2.
    done = subprocess.run(
        [sys.executable, "-m", "gpunode", "check", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 4
    assert f"{tmp_path}/group_vars/a100.yaml:3:3: ssh.usr: unknown key" in done.stderr


def test_merged_errors_and_file_errors_point_into_the_files(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "host_vars/n2.yaml": "# n2\nrepos: {nvidia: http://mirror.lab/cuda}\n",
            "group_vars/all.yaml": "become: yes\n",
        },
    )
    with pytest.raises(InventoryError) as err:
        load(path)
    messages = [str(p) for p in err.value.problems]
    assert messages == [f"{tmp_path}/group_vars/all.yaml:1:9: become: Input should be 'sudo' "
                        "or 'none'"]  # fmt: skip
    (tmp_path / "group_vars/all.yaml").write_text("become: sudo\n")
    with pytest.raises(InventoryError) as err:
        load(path)
    (problem,) = err.value.problems
    # Validated on the merged host (insecure_http may come from another layer), reported here.
    assert str(problem).startswith(f"{tmp_path}/host_vars/n2.yaml:2:1: hosts.n2.repos: ")
    assert "nvidia uses http://" in str(problem)


def test_a_group_file_that_is_not_a_mapping_or_written_twice(tmp_path: Path) -> None:
    path = _write(tmp_path, {"group_vars/a100.yaml": "- a\n- b\n"})
    with pytest.raises(InventoryError, match=r"a100.yaml:1:1: expected a mapping"):
        load(path)
    (tmp_path / "group_vars/a100.yaml").write_text("{}\n")
    (tmp_path / "group_vars/a100.yml").write_text("{}\n")
    with pytest.raises(InventoryError, match=r"both .*a100.yaml and .*a100.yml exist"):
        load(path)
