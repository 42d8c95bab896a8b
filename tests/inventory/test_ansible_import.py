"""`gpunode inventory import`: Ansible's `ansible-inventory --list` JSON to a gpunode inventory.

tests/fixtures/ansible/list.json and list-export.json were made with ansible-core 2.19 from
hosts.ini beside them (`ansible-inventory -i hosts.ini --list [--export]`); where
ansible-inventory is on PATH, test_fixtures_are_what_ansible_prints makes them again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.inventory import load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ansible"


def gpunode(
    *args: str, stdin: str | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)} if home else None
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize("name", ["list.json", "list-export.json"])
def test_real_ansible_output_imports_and_checks(tmp_path: Path, name: str) -> None:
    out = tmp_path / "cluster.yaml"
    done = gpunode("inventory", "import", str(FIXTURES / name), "-o", str(out))
    assert done.returncode == 0, done.stderr
    # the host's ansible_ssh_private_key_file must exist for `check` to pass
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/h100_ed25519").write_text("key\n")
    checked = gpunode("check", str(out), home=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "4 hosts, 4 groups" in checked.stdout

    inv = load(out)
    a1, a2, h1 = (inv.hosts[n] for n in ("gpu-a100-01", "gpu-a100-02", "gpu-h100-01"))
    assert (a1.address, a1.ssh.port, a1.ssh.user) == ("192.0.2.11", 22, "ubuntu")
    assert (a2.address, a2.ssh.port) == ("192.0.2.12", 2222)
    # The host's own ansible_user wins over its group's, as in Ansible.
    assert (h1.ssh.user, h1.ssh.identity_file) == ("admin", "~/.ssh/h100_ed25519")
    assert inv.hosts["localhost"].connection == "local"
    assert sorted(inv.groups["gpu"]) == ["gpu-a100-01", "gpu-a100-02", "gpu-h100-01"]
    assert inv.groups["a100"] == ["gpu-a100-01", "gpu-a100-02"]
    assert "all" not in inv.groups and "ungrouped" not in inv.groups

    text = out.read_text()
    assert "hunter2" not in text and "become_pass" not in text
    assert "ansible_become_password: a password, not copied" in done.stderr
    assert "become_password_env" in done.stderr
    for var in ("ansible_python_interpreter", "ntp_server"):
        assert f"warning: {var}: no gpunode setting" in done.stderr


def test_stdin_to_stdout_and_child_groups_win_over_parents(tmp_path: Path) -> None:
    data = {
        "_meta": {"hostvars": {"n1": {"ansible_host": "192.0.2.1"}, "n2": {}}},
        "all": {"children": ["ungrouped", "gpu"], "vars": {"ansible_port": "2200"}},
        "gpu": {"children": ["fast"], "hosts": ["n2"], "vars": {"ansible_user": "parent"}},
        "fast": {"hosts": ["n1"], "vars": {"ansible_user": "child"}},
    }
    done = gpunode("inventory", "import", "-", stdin=json.dumps(data))
    assert done.returncode == 0, done.stderr
    (tmp_path / "inv.yaml").write_text(done.stdout)
    inv = load(tmp_path / "inv.yaml")
    assert inv.hosts["n1"].ssh.user == "child" and inv.hosts["n2"].ssh.user == "parent"
    assert inv.hosts["n1"].ssh.port == 2200  # all's vars are the defaults; "2200" from INI text
    assert inv.hosts["n2"].address == "n2"  # no ansible_host: Ansible connects to the name
    assert inv.hosts["n1"].groups == ["gpu", "fast"]


def test_hostile_names_and_values_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    bad_name = {"_meta": {"hostvars": {"x;reboot": {}}}, "all": {"hosts": ["x;reboot"]}}
    done = gpunode("inventory", "import", "-", "-o", str(out), stdin=json.dumps(bad_name))
    assert done.returncode == 4
    assert "host 'x;reboot' is not a name" in done.stderr
    assert not out.exists()

    bad_value = {"_meta": {"hostvars": {"n1": {"ansible_host": "-oProxyCommand=x"}}}}
    done = gpunode("inventory", "import", "-", "-o", str(out), stdin=json.dumps(bad_value))
    assert done.returncode == 4
    assert "hosts.n1.address" in done.stderr and "nothing was written" in done.stderr
    assert not out.exists()

    done = gpunode("inventory", "import", "-", stdin="[1, 2")
    assert done.returncode == 4 and "error: <stdin>:" in done.stderr
    done = gpunode("inventory", "import", str(tmp_path))
    assert done.returncode == 4 and "not a regular file" in done.stderr


def test_a_file_name_with_a_newline_never_becomes_yaml(tmp_path: Path) -> None:
    """The source's name heads the output (`# Imported from NAME`): a newline in it would
    start a YAML line of the attacker's, here a host whose connection runs locally."""
    source = tmp_path / "x\nhosts: {evil: {connection: local}}\n#.json"
    source.write_text((FIXTURES / "list.json").read_text())
    out = tmp_path / "cluster.yaml"
    done = gpunode("inventory", "import", str(source), "-o", str(out))
    assert done.returncode == 4, done.stderr
    assert "contains U+000A (LINE FEED)" in done.stderr and "\n" not in done.stderr.rstrip("\n")
    assert not out.exists()
    bad_out = tmp_path / "out\u202e.yaml"  # a bidi override in the output's name
    done = gpunode("inventory", "import", str(FIXTURES / "list.json"), "-o", str(bad_out))
    assert done.returncode == 4 and "U+202E" in done.stderr and not bad_out.exists()


def test_an_existing_file_is_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    out.write_text("keep me\n")
    source = str(FIXTURES / "list.json")
    done = gpunode("inventory", "import", source, "-o", str(out))
    assert done.returncode == 4 and "pass --force" in done.stderr
    assert out.read_text() == "keep me\n"
    done = gpunode("inventory", "import", source, "-o", str(out), "--force")
    assert done.returncode == 0
    assert "gpu-a100-01" in load(out).hosts


@pytest.mark.skipif(shutil.which("ansible-inventory") is None, reason="ansible-core not here")
@pytest.mark.parametrize(("name", "extra"), [("list.json", []), ("list-export.json", ["--export"])])
def test_fixtures_are_what_ansible_prints(name: str, extra: list[str]) -> None:
    made = subprocess.run(
        ["ansible-inventory", "-i", str(FIXTURES / "hosts.ini"), "--list", *extra],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    now, kept = json.loads(made.stdout), json.loads((FIXTURES / name).read_text())
    now["_meta"].pop("profile", None)
    kept["_meta"].pop("profile", None)
    assert now == kept


def test_an_ini_inventory_is_refused_naming_the_command_that_reads_it(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    done = gpunode("inventory", "import", str(FIXTURES / "hosts.ini"), "-o", str(out))
    assert done.returncode == 4
    assert done.stderr.strip() == (
        f"error: {FIXTURES / 'hosts.ini'}: not JSON (Expecting value at line 1): gpunode "
        "imports what ansible-inventory prints, not Ansible's INI or YAML files; run: "
        f"ansible-inventory -i {FIXTURES / 'hosts.ini'} --list | gpunode inventory import - "
        "-o cluster.yaml"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "jump", "left"),
    [
        ("-o ProxyJump=admin@bastion.example:2222", "admin@bastion.example:2222", None),
        ("-J hop1,hop2 -o ServerAliveInterval=5", "hop1,hop2", "-o ServerAliveInterval=5"),
        ('-o ProxyCommand="ssh -W %h:%p -q admin@bastion.example"', "admin@bastion.example", None),
        ("-o 'ProxyCommand=ssh -p 2200 -l root -W %h:%p bastion'", "root@bastion:2200", None),
        # what does more than relay is not translated: named, for the admin to decide
        ('-o ProxyCommand="nc -x proxy:1080 %h %p"', None, "-o ProxyCommand=nc -x proxy:1080"),
        ('-o ProxyCommand="ssh -i /k -W %h:%p bastion"', None, "-o ProxyCommand=ssh -i /k"),
    ],
)
def test_a_jump_host_in_ansible_ssh_common_args_becomes_proxy_jump(
    tmp_path: Path, args: str, jump: str | None, left: str | None
) -> None:
    data = {
        "_meta": {"hostvars": {"n1": {"ansible_host": "10.0.0.1"}}},
        "all": {"children": ["gpu"]},
        "gpu": {"hosts": ["n1"], "vars": {"ansible_ssh_common_args": args}},
    }
    done = gpunode("inventory", "import", "-", stdin=json.dumps(data))
    assert done.returncode == 0, done.stderr
    (tmp_path / "inv.yaml").write_text(done.stdout)
    assert load(tmp_path / "inv.yaml").hosts["n1"].ssh.proxy_jump == jump
    if left is None:
        assert "ansible_ssh_common_args" not in done.stderr
    else:
        assert f"warning: gpu: ansible_ssh_common_args '{left}" in done.stderr
