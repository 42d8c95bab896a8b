"""What scripts read: `check --json`'s problems as fields (file, line, column, key path,
message, fix) and `config`'s settings as the values they come to (paths, numbers) with
their source. Real processes, an XDG config dir of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpunode.exitcodes import ExitCode

MISTAKES = Path(__file__).resolve().parents[1] / "inventory" / "mistakes"


def gpunode(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    clean["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return subprocess.run(
        [sys.executable, "-m", "gpunode", *args], capture_output=True, text=True, timeout=60,
        cwd=tmp_path, env={**clean, **env},
    )  # fmt: skip


def test_check_json_problems_are_fields(tmp_path: Path) -> None:
    inv = MISTAKES / "python_without_wheels" / "inv.yaml"
    done = gpunode(tmp_path, "check", str(inv), "--json")
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    (problem,) = json.loads(done.stdout)["problems"]
    assert problem == {
        "where": f"{inv}:9:25",
        "file": str(inv),
        "line": 9,
        "column": 25,
        "field": "stack.conda.envs.train.python",
        "key_path": ["stack", "conda", "envs", "train", "python"],
        "message": 'PyTorch 2.7 has wheels for Python 3.9 to 3.13, not 3.14: use python: "3.13", '
        'or a PyTorch with wheels for it (pytorch: "2.9" or newer)',
        "fix": 'use python: "3.13", or a PyTorch with wheels for it (pytorch: "2.9" or newer)',
        "hosts": ["gpu-01", "gpu-02"],
    }
    # a file that does not parse: its position, no key, the fix
    bad = gpunode(tmp_path, "check", str(MISTAKES / "unclosed_brace" / "inv.yaml"), "--json")
    (problem,) = json.loads(bad.stdout)["problems"]
    assert (problem["line"], problem["column"], problem["key_path"]) == (2, 8, [])
    assert problem["fix"].startswith("end it with '}'")
    # a list index in the key path; --limit has no file
    limit = gpunode(tmp_path, "check", str(inv), "--limit", "nope", "--json")
    (problem,) = json.loads(limit.stdout)["problems"]
    assert (problem["file"], problem["line"], problem["column"]) == (None, None, None)


def test_config_shows_values_not_rules(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    inv = tmp_path / "site" / "inv.yaml"
    inv.write_text("hosts:\n" + "".join(f"  h{i}: {{address: 192.0.2.{i}}}\n" for i in range(3)))
    done = gpunode(tmp_path, "config", str(inv), "--json", XDG_STATE_HOME=str(tmp_path / "st"))
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["settings"]
    assert shown["forks"] == {"value": 3, "from": "built-in default: every selected host, up to 50"}
    assert shown["state_dir"]["value"] == str(tmp_path / "st" / "gpunode")  # platformdirs' path
    assert shown["ssh_transport"]["value"] == "paramiko"
    assert shown["allow_file_dirs"]["value"] == [str(inv.parent)]
    text = gpunode(tmp_path, "config", str(inv), XDG_STATE_HOME=str(tmp_path / "st")).stdout
    assert f"state_dir          {tmp_path / 'st' / 'gpunode'}  (built-in default: " in text
    assert "forks              3  (built-in default: every selected host, up to 50)" in text
    # a value from the environment is shown as given, with its variable
    env = gpunode(tmp_path, "config", "--json", GPUNODE_STATE_DIR="/srv/records")
    assert json.loads(env.stdout)["settings"]["state_dir"] == {
        "value": "/srv/records", "from": "environment GPUNODE_STATE_DIR"}  # fmt: skip
