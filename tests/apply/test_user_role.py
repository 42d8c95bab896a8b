"""A site role of the admin's own, next to the inventory: line_in_file, guarded commands and a
file with its own mode and owner, applied to lab hosts and read back from the hosts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_apply_lab import HOSTS

from tests.apply.labhelpers import Lab, apply, of, on_host

pytestmark = [pytest.mark.lab, pytest.mark.slow]

TASKS = """\
- name: apt through the site proxy
  op: line_in_file
  path: /etc/site/apt.conf
  line: 'Acquire::https::Proxy "{{ vars.proxy }}";'

- name: stamp the first converge
  op: command
  cmd: [sh, -c, "date +%s.%N > /etc/site/stamp"]
  creates: /etc/site/stamp

- name: swappiness
  op: command
  cmd: "echo vm.swappiness=10 >> /etc/site/sysctl.conf"
  unless: "grep -qx vm.swappiness=10 /etc/site/sysctl.conf"

- name: who to call
  op: file
  path: /etc/site/contact
  content: "{{ vars.contact }}\\n"
  mode: "0640"
  owner: "root:adm"
"""
# the inventory's stack.vars, read by the role as vars.NAME; "proxy" is an example address,
# nothing connects to it
VARS = {"proxy": "http://192.0.2.1:3128", "contact": "gpu-admins@example.org"}
NO_STACK = {"driver": None, "cuda": None, "cudnn": None, "nccl": None, "cuda_env": False,
            "smoke": [], "conda": None}  # fmt: skip


def test_site_role_converges_and_stays_converged(lab: Lab, tmp_path: Path) -> None:
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(TASKS)
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"], vars=VARS)
    setup = "sudo rm -rf /etc/site && sudo mkdir /etc/site"
    for host in HOSTS:  # an earlier line without its final newline must stay its own line
        on_host(inv, host, f"{setup} && printf 'Acquire::Retries \"3\";' | sudo tee "
                           "/etc/site/apt.conf >/dev/null")  # fmt: skip

    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0, [(e["host"], e["message"]) for e in of(evs, "host-finished")]
    first = {}
    for host in HOSTS:
        assert on_host(inv, host, "cat /etc/site/apt.conf") == (
            'Acquire::Retries "3";\nAcquire::https::Proxy "http://192.0.2.1:3128";\n'
        )
        assert on_host(inv, host, "cat /etc/site/sysctl.conf") == "vm.swappiness=10\n"
        assert on_host(inv, host, "stat -c '%a %U:%G' /etc/site/contact") == "640 root:adm\n"
        assert on_host(inv, host, "sudo cat /etc/site/contact") == "gpu-admins@example.org\n"
        first[host] = on_host(inv, host, "cat /etc/site/stamp")

    before = {h: lab.tree(h) for h in HOSTS}
    code, evs = apply(lab, inv, "--no-smoke")
    assert code == 0
    assert of(evs, "change-started") == []
    for host in HOSTS:
        assert lab.tree(host) == before[host]
        assert on_host(inv, host, "cat /etc/site/stamp") == first[host]

    # a changed variable changes only what it feeds: one more line, nothing else
    inv = lab.inventory(tmp_path, **NO_STACK, roles=["site"],
                        vars={**VARS, "proxy": "http://192.0.2.2:3128"})  # fmt: skip
    code, evs = apply(lab, inv, "--no-smoke", "--limit", "lab-01")
    assert code == 0
    (planned,) = of(evs, "plan-ready", "lab-01")
    assert [c["op"] for c in planned["changes"]] == ["line_in_file"]
    assert on_host(inv, "lab-01", "tail -n 1 /etc/site/apt.conf") == textwrap.dedent("""\
        Acquire::https::Proxy "http://192.0.2.2:3128";
    """)
