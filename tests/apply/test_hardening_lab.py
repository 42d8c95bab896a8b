"""Hardening, on lab hosts through the CLI: `plan` and `apply --check` run no shell a role
wrote (and `apply` none on a host it refuses), and a managed file is never written through
a planted symlink nor readable by others on its way to its mode."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from test_apply_lab import HOSTS

from tests.apply.labhelpers import Lab, apply, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NO_STACK: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "nccl": None,
                            "cuda_env": False, "smoke": [], "conda": None}  # fmt: skip
# Probes run as the SSH user: each leaves a mark in /tmp when (and only when) it runs.
UNLESS = "touch /tmp/gpunode-unless-ran; test -e /etc/hardening/tuned"
OPTED_IN = "touch /tmp/gpunode-optin-ran; true"
PROBE_TASKS = f"""\
- name: tune, checked by the role's own shell
  op: command
  cmd: "touch /etc/hardening/tuned"
  unless: "{UNLESS}"

- name: a read-only check, opted in to plan and --check
  op: command
  cmd: "touch /etc/hardening/never"
  unless: "{OPTED_IN}"
  check_mode_probe: true
"""
MARKS = "/tmp/gpunode-unless-ran /tmp/gpunode-optin-ran"


def marks(inv: Path, host: str) -> set[str]:
    out = on_host(inv, host, f"for f in {MARKS}; do [ -e $f ] && echo $f; done; true")
    return {m.rsplit("-", 2)[-2] for m in out.split()}  # "unless", "optin"


def role(tmp: Path, tasks: str) -> None:
    d = tmp / "roles" / "hardening"
    d.mkdir(parents=True, exist_ok=True)
    (d / "tasks.yaml").write_text(tasks)


def test_plan_and_check_run_no_role_shell_apply_only_on_hosts_it_changes(
    lab: Lab, tmp_path: Path
) -> None:
    role(tmp_path, PROBE_TASKS)
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["hardening"])
    for host in HOSTS:
        on_host(inv, host, f"sudo rm -rf /etc/hardening {MARKS} && sudo mkdir /etc/hardening")
    before = {h: lab.tree(h) for h in HOSTS}

    plan = lab.gpunode("plan", str(inv), "--json")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)["hosts"]
    for host in HOSTS:
        (tune,) = doc[host]["changes"]  # the opted-in check ran and passed: no change
        assert tune["reason"] == f"would check `{UNLESS}` at apply"
        assert marks(inv, host) == {"optin"}
        on_host(inv, host, f"rm -f {MARKS}")

    code, evs = apply(lab, inv, "--check")
    assert code == 0 and of(evs, "change-started") == []
    for host in HOSTS:
        (would,) = of(evs, "change-finished", host)
        assert would["status"] == "skipped" and UNLESS in would["message"]
        assert marks(inv, host) == {"optin"}
        assert lab.tree(host) == before[host]
        on_host(inv, host, f"rm -f {MARKS}")

    # a host the plan refuses (a driver branch too old for its CUDA) runs none either
    bad = lab.inventory(tmp_path / "refused", **{**NO_STACK, "driver": {"branch": "550"},
                        "cuda": {"toolkits": ["12.8"]}}, roles=["hardening"])  # fmt: skip
    role(tmp_path / "refused", PROBE_TASKS)
    code, evs = apply(lab, bad, "--limit", "lab-02", "--no-smoke")
    assert code == 4  # refused before any change
    (done,) = of(evs, "host-finished", "lab-02")
    assert "refused" in done["message"] and "12.8" in done["message"]
    assert of(evs, "change-started") == []
    assert "unless" not in marks(inv, "lab-02")
    assert lab.tree("lab-02") == before["lab-02"]
    on_host(inv, "lab-02", f"rm -f {MARKS}")

    # applying: the check runs, fails, the command runs; then it passes, nothing runs
    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    for host in HOSTS:
        assert [c["reason"] for c in of(evs, "plan-ready", host)[0]["changes"]] == [
            f"`{UNLESS}` failed"
        ]
        assert marks(inv, host) == {"unless", "optin"}
        assert on_host(inv, host, "ls /etc/hardening") == "tuned\n"
    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0 and of(evs, "change-started") == []


SECRET_TASKS = """\
- name: a private file
  op: file
  path: /etc/hardening/secret
  content: "{{ vars.secret }}\\n"
  mode: "0600"

- name: a private file in a world-writable directory
  op: file
  path: /etc/hardening/drop/secret
  content: "{{ vars.secret }}\\n"
  mode: "0600"
"""
SHADOW = "root:$6$lab$notreallyahash:19000:0:99999:7:::\n"


class Watcher(threading.Thread):
    """Every mode a file under `root` had while it ran, from the host's overlay upper
    directory (what the host writes lands there), polled as fast as it goes."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root, self.seen, self.stop = root, set[tuple[str, int]](), threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for dirpath, _, files in os.walk(self.root):
                for name in files:
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except FileNotFoundError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        rel = os.path.relpath(os.path.join(dirpath, name), self.root)
                        self.seen.add((rel, stat.S_IMODE(st.st_mode)))


def test_a_managed_file_is_not_written_through_a_planted_link_nor_readable(
    lab: Lab, tmp_path: Path
) -> None:
    role(tmp_path, SECRET_TASKS)
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["hardening"], vars={"secret": "s3cret"})
    host = "lab-01"
    setup = (
        "sudo rm -rf /etc/hardening && sudo mkdir -p /etc/hardening/drop"
        " && sudo chmod 1777 /etc/hardening/drop"
        f" && printf %s '{SHADOW}' | sudo tee /etc/hardening/shadow >/dev/null"
        " && sudo chmod 0600 /etc/hardening/shadow"
        # root's own link at the old fixed name (left by an attacker), and one that any user
        # can plant in the world-writable directory
        " && sudo ln -s /etc/hardening/shadow /etc/hardening/secret.gpunode-new"
        " && ln -s /etc/hardening/shadow /etc/hardening/drop/secret.gpunode-new"
    )
    on_host(inv, host, setup)
    # the planted link works: root writing to the old fixed name, as the old step did, writes
    # the shadow file (put back right after)
    on_host(inv, host, "echo PWNED | sudo tee /etc/hardening/secret.gpunode-new >/dev/null")
    assert on_host(inv, host, "sudo cat /etc/hardening/shadow") == "PWNED\n"
    on_host(inv, host, f"printf %s '{SHADOW}' | sudo tee /etc/hardening/shadow >/dev/null")

    plan = json.loads(lab.gpunode("plan", str(inv), "--json", "--limit", host).stdout)
    steps = [s for c in plan["hosts"][host]["changes"] for s in c["commands"]]
    assert len(steps) == 2
    for step in steps:
        assert ".gpunode-new" not in step
        assert step.index("umask 077") < step.index("tmp=$(mktemp -- /etc/hardening/")
        assert step.index('chmod -- 0600 "$tmp"') < step.index('mv -fT -- "$tmp" /etc/hardening/')

    watcher = Watcher(lab.upper(host) / "etc" / "hardening")
    watcher.start()
    try:
        code, evs = apply(lab, inv, "--no-smoke", "--limit", host)
    finally:
        watcher.stop.set()
        watcher.join(timeout=10)
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]

    assert on_host(inv, host, "sudo cat /etc/hardening/shadow") == SHADOW
    for d in ("/etc/hardening", "/etc/hardening/drop"):
        assert (
            on_host(inv, host, f"sudo stat -c '%F %a %U' {d}/secret") == "regular file 600 root\n"
        )
        assert on_host(inv, host, f"sudo cat {d}/secret") == "s3cret\n"
        # the planted link is left as it was, and nothing else is left behind
        assert on_host(inv, host, f"readlink {d}/secret.gpunode-new") == "/etc/hardening/shadow\n"
        names = on_host(inv, host, f"sudo ls -A {d}").split()
        assert sorted(n for n in names if "secret" in n) == ["secret", "secret.gpunode-new"]

    # every state of every file the apply wrote (the temporary ones too): never readable by
    # group or others
    written = {(n, m) for n, m in watcher.seen if "secret" in n and "gpunode-new" not in n}
    assert {n for n, _ in written} >= {"secret", "drop/secret"}
    assert [(n, oct(m)) for n, m in written if m & 0o077] == []
