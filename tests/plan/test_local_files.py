"""Files an inventory names resolve, after symlinks, under its folder (or one the
controller's user allows); a file only its owner may read (a key, a token) never goes to
the hosts unless the env is declared `secret`, and a secret's content is written 0600 and
never shown by --diff or kept in the run record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_frameworks import NO_SYSTEMD, conda_stack, titled

from gpunode.facts.model import HostFacts, OsRelease
from gpunode.inventory import InventoryError, load
from gpunode.records import private_file_note
from tests.plan.planhelpers import plan_host

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n"


def inventory(folder: Path, env: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    inv = folder / "inv.yaml"
    inv.write_text(conda_stack(f'channels: [conda-forge]\nenvs:\n  t: {{python: "3.11", {env}}}'))
    return inv


def check(inv: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    clean["XDG_CONFIG_HOME"] = str(inv.parent.parent / "xdg")
    return subprocess.run([sys.executable, "-m", "gpunode", "check", str(inv)],
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env={**clean, **env})  # fmt: skip


def test_a_symlink_to_a_private_key_is_refused_naming_it(tmp_path: Path) -> None:
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text(KEY)
    key.chmod(0o600)
    site = tmp_path / "site"
    inv = inventory(site, "requirements_file: envs/t.txt")
    (site / "envs").mkdir()
    (site / "envs" / "t.txt").symlink_to(key)
    out = check(inv)
    assert out.returncode == 4, out.stdout + out.stderr
    assert f"'envs/t.txt' is {key}, outside the inventory's folder {site}" in out.stderr
    assert "BEGIN OPENSSH" not in out.stdout + out.stderr
    # declaring it secret does not bring in a file from outside
    inv = inventory(site, "requirements_file: envs/t.txt, secret: true")
    assert check(inv).returncode == 4
    # the controller's user may allow the folder (never the inventory's author) ...
    assert f"{key} is not world-readable" in check(
        inventory(site, "requirements_file: envs/t.txt"), GPUNODE_ALLOW_FILE_DIRS=str(key.parent)
    ).stderr.replace("'envs/t.txt': ", "")
    # ... and a gpunode.toml beside the inventory cannot
    (site / "gpunode.toml").write_text(f'allow_file_dirs = ["{key.parent}"]\n')
    beside = check(inv)
    assert beside.returncode == 4 and "allow_file_dirs: only your own" in beside.stderr


def test_a_private_file_goes_to_hosts_only_declared_secret_and_then_0600_unshown(
    tmp_path: Path, fresh: HostFacts
) -> None:
    (tmp_path / "envs").mkdir()
    token = tmp_path / "envs" / "t.txt"
    token.write_text("--index-url https://user:tok3n@pypi.example/simple\neinops==0.8.1\n")
    token.chmod(0o600)
    with pytest.raises(InventoryError, match=r"is not world-readable .* `secret: true`"):
        load(inventory(tmp_path, "requirements_file: envs/t.txt"))
    host = load(inventory(tmp_path, "requirements_file: envs/t.txt, secret: true")).hosts["gpu1"]
    plan = plan_host(host, fresh, probes=NO_SYSTEMD)
    (copy,) = titled(plan.changes, "conda: requirements file of t")
    assert "chmod -- 0600" in copy.commands[0]
    assert private_file_note(None, copy.commands) == "(content of a 0600 file not recorded)\n"
    assert "tok3n" not in " ".join(copy.commands)
    # a world-readable file stays as it was: 0644, its diff shown
    token.chmod(0o644)
    host = load(inventory(tmp_path, "requirements_file: envs/t.txt")).hosts["gpu1"]
    (copy,) = titled(plan_host(host, fresh, probes=NO_SYSTEMD).changes, "conda: requirements file")
    assert "chmod -- 0644" in copy.commands[0] and private_file_note(None, copy.commands) == ""


def test_a_role_template_linked_to_a_key_is_refused_naming_it(tmp_path: Path) -> None:
    from gpunode.plan.planner import plan_host as plan
    from gpunode.roles import search_path
    from gpunode.roles.loader import load_role

    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text(KEY)
    key.chmod(0o600)
    role = tmp_path / "site" / "roles" / "motd"
    (role / "templates").mkdir(parents=True)
    (role / "tasks.yaml").write_text(
        "- name: motd\n  op: template\n  src: motd.j2\n  path: /etc/motd\n"
    )
    (role / "templates" / "motd.j2").symlink_to(key)
    inv = tmp_path / "site" / "inventory.yaml"
    inv.write_text("hosts:\n  gpu1: {connection: local, stack: {roles: [motd]}}\n")
    load_role.cache_clear()
    facts = HostFacts(os=OsRelease(id="ubuntu", version_id="22.04", codename="jammy"))
    refused = plan(load(inv).hosts["gpu1"], facts, search=search_path(inv)).refused
    assert refused is not None and f"motd.j2 is {key}, outside the role's" in refused
    assert "BEGIN OPENSSH" not in refused
    # a private file of the role's own is not sent either
    (role / "templates" / "motd.j2").unlink()
    (role / "templates" / "motd.j2").write_text("hello\n")
    (role / "templates" / "motd.j2").chmod(0o600)
    refused = plan(load(inv).hosts["gpu1"], facts, search=search_path(inv)).refused
    assert refused is not None and "motd.j2 is not world-readable" in refused
