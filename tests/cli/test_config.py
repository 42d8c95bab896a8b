"""Settings: command line > environment > gpunode.toml next to the inventory > the user's
gpunode.toml > built-in, as a user runs gpunode (real processes, a config dir of the
test's own); click's usage errors exit 5."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gpunode.cli import cli

INVENTORY = """\
hosts:
  a: {address: 192.0.2.1}
  b: {address: 192.0.2.2, ssh: {transport: paramiko}}
"""


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    clean["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return subprocess.run([sys.executable, "-m", "gpunode", *args], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path,
                          env={**clean, **env})  # fmt: skip


def user_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "xdg" / "gpunode" / "gpunode.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def inventory(tmp_path: Path) -> Path:
    (tmp_path / "site").mkdir(exist_ok=True)
    inv = tmp_path / "site" / "inv.yaml"
    inv.write_text(INVENTORY)
    return inv


def setting(out: subprocess.CompletedProcess[str], key: str) -> str:
    """The `-vv` line of one setting: "value  (where from)"."""
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith(f"setting: {key} ")]
    return line.removeprefix(f"setting: {key}").strip()


def test_forks_precedence(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    mine = user_file(tmp_path, "forks = 3\n")
    # apply without --yes outside a terminal stops (exit 5) after showing the settings
    out = run(tmp_path, "apply", str(inv), "-vv")
    assert out.returncode == 5, out.stderr
    assert setting(out, "forks") == f"3  ({mine})"
    assert setting(out, "inventory") == f"{inv}  (command line)"
    beside = inv.parent / "gpunode.toml"
    beside.write_text("forks = 9\n")
    assert setting(run(tmp_path, "apply", str(inv), "-vv"), "forks") == f"9  ({beside})"
    env = run(tmp_path, "apply", str(inv), "-vv", GPUNODE_APPLY_FORKS="4")
    assert setting(env, "forks") == "4  (environment GPUNODE_APPLY_FORKS)"
    given = run(tmp_path, "apply", str(inv), "-vv", "-f", "5", GPUNODE_APPLY_FORKS="4")
    assert setting(given, "forks") == "5  (command line)"
    # -v alone shows no settings
    assert "setting:" not in run(tmp_path, "apply", str(inv), "-v").stderr


def test_default_inventory_and_transport_from_the_user_file(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    # the inventory is relative to the file that names it
    mine = user_file(tmp_path, 'inventory = "../../site/inv.yaml"\nssh_transport = "openssh"\n')
    out = run(tmp_path, "hosts", "--json")
    assert out.returncode == 0, out.stderr
    hosts = json.loads(out.stdout)["hosts"]
    # the file's transport for the host that sets none; the inventory's own wins
    assert hosts["a"]["ssh"]["transport"] == "openssh"
    assert hosts["b"]["ssh"]["transport"] == "paramiko"
    env = run(tmp_path, "hosts", "--json", GPUNODE_SSH_TRANSPORT="paramiko")
    assert json.loads(env.stdout)["hosts"]["a"]["ssh"]["transport"] == "paramiko"
    shown = json.loads(run(tmp_path, "config", "--json").stdout)["settings"]
    assert shown["ssh_transport"] == {"value": "openssh", "from": str(mine)}
    assert shown["inventory"] == {"value": str(inv), "from": str(mine)}


def test_state_dir_from_a_file_and_the_environment_over_it(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    user_file(tmp_path, f'state_dir = "{tmp_path / "mine"}"\n')
    out = run(tmp_path, "report")  # no such run: a usage error
    assert out.returncode == 5 and f"error: no runs in {tmp_path / 'mine' / 'runs'}" in out.stderr
    (inv.parent / "gpunode.toml").write_text(f'state_dir = "{tmp_path / "records"}"\n')
    shown = json.loads(run(tmp_path, "config", str(inv), "--json").stdout)["settings"]
    assert shown["state_dir"] == {"value": str(tmp_path / "records"),
                                  "from": str(inv.parent / "gpunode.toml")}  # fmt: skip
    env = json.loads(run(tmp_path, "config", str(inv), "--json", GPUNODE_STATE_DIR="/x").stdout)[
        "settings"
    ]
    assert env["state_dir"] == {"value": "/x", "from": "environment GPUNODE_STATE_DIR"}


def test_a_bad_file_is_bad_input_naming_the_line(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    beside = inv.parent / "gpunode.toml"
    beside.write_text("# site settings\nforks = 8\nfroks = 2\n")
    out = run(tmp_path, "check", str(inv))
    assert out.returncode == 4
    assert f"error: {beside}:3: froks: unknown key: use one of inventory, forks," in out.stderr
    beside.write_text("forks = 0\n")
    assert f"{beside}:1: forks: Input should be greater than or equal to 1" in (
        run(tmp_path, "check", str(inv)).stderr
    )
    beside.write_text("forks = \n")
    bad = run(tmp_path, "check", str(inv))
    assert bad.returncode == 4 and "(at line 1, column 9)" in bad.stderr


def test_click_usage_errors_exit_5() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["plan", "x.yaml", "--nope"]).exit_code == 5
    assert runner.invoke(cli, ["nosuch"]).exit_code == 5
    assert runner.invoke(cli, ["apply", "x.yaml", "--forks", "0"]).exit_code == 5
    no_check = runner.invoke(cli, ["apply", "x.yaml", "--detailed-exitcode", "--yes"])
    assert no_check.exit_code == 5 and "--detailed-exitcode needs --check" in no_check.output
    assert runner.invoke(cli, ["--help"]).exit_code == 0
