"""Values that reach a command line or a managed file: the inventory's stack.vars stay under
`vars` and never replace a built-in role's defaults, and every operation checks the shape of
what it is given, so an option (`-o...`, which apt reads as one even quoted), a second line
or a path elsewhere refuses the host at plan time, naming the task's file:line."""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpunode.changes import HostPlan
from gpunode.facts.model import HostFacts, Package
from gpunode.inventory import Host, load
from gpunode.resolve.resolver import Resolved, driver_pin
from gpunode.roles import search_path
from gpunode.roles.loader import RoleError
from gpunode.roles.walk import walk
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

NO_SYSTEMD = {"systemd": False}
APT_OPTION = "-oAPT::Update::Pre-Invoke::=touch /tmp/gpunode-injected"
# what an inventory could once set to replace the built-in roles' own values (the inventory
# itself now refuses control characters in vars, so no newline here)
HOSTILE_VARS = {
    "driver_version": APT_OPTION,
    "driver_packages": [APT_OPTION],
    "driver_userspace": "--allow-unauthenticated",
    "cuda_home": "/usr/local/cuda; export LD_PRELOAD=/tmp/evil.so",
    "cuda_keyring": "/k.gpg] [trusted=yes",
    "nvidia_repo_url": "http://evil.example/repo",
    "cudnn_dev_package": APT_OPTION,
    "nccl_build": "2.21.5-1 -oAPT::Get::AllowUnauthenticated=1",
    "conda_prefix": "/tmp/evil",
}


def words(plan: HostPlan) -> str:
    return json.dumps([c.to_json() for c in plan.changes] + [c.after for c in plan.changes])


def with_vars(text: str, values: Mapping[str, object]) -> str:
    # JSON is YAML: the values arrive as the strings above
    return text.replace(
        "    cuda_env: true\n", f"    cuda_env: true\n    vars: {json.dumps(values)}\n"
    )


def test_vars_never_replace_a_builtin_roles_defaults(host: Host, fresh: HostFacts) -> None:
    hostile = host_from(with_vars(STACK, HOSTILE_VARS))
    assert hostile.stack.vars["driver_version"] == APT_OPTION
    plain = plan_host(host, fresh, probes=NO_SYSTEMD)
    plan = plan_host(hostile, fresh, probes=NO_SYSTEMD)
    assert plan.refused is None
    assert plan.changes == plain.changes
    text = words(plan)
    for marker in ("Pre-Invoke", "allow-unauthenticated", "LD_PRELOAD", "trusted=yes", "evil"):
        assert marker not in text


def site_role(tmp: Path, tasks: str, stack: str = "") -> tuple[Host, tuple[Path, ...], Path]:
    role = tmp / "roles" / "site"
    role.mkdir(parents=True, exist_ok=True)
    (role / "tasks.yaml").write_text(textwrap.dedent(tasks))
    inv = tmp / "inv.yaml"
    inv.write_text(f"hosts:\n  gpu1: {{connection: local, stack: {{roles: [site]{stack}}}}}\n")
    from gpunode.roles.loader import load_role

    load_role.cache_clear()
    return load(inv).hosts["gpu1"], search_path(inv), role / "tasks.yaml"


def test_a_site_role_reads_vars_under_vars(tmp_path: Path, fresh: HostFacts) -> None:
    host, search, _ = site_role(
        tmp_path,
        """\
        - name: "proxy {{ vars.proxy }}"
          op: line_in_file
          path: /etc/apt/apt.conf.d/90proxy
          line: 'Acquire::http::Proxy "{{ vars.proxy }}"; // {{ vars.note | default("none") }}'
        """,
        ', vars: {proxy: "http://192.0.2.1:3128"}',
    )
    plan = plan_host(host, fresh, search=search)
    assert plan.refused is None
    assert plan.changes[0].task == "proxy http://192.0.2.1:3128"
    assert (
        plan.changes[0].steps[0].stdin == 'Acquire::http::Proxy "http://192.0.2.1:3128"; // none\n'
    )


@pytest.mark.parametrize("version", [APT_OPTION, "550.163.01\nPackage: evil", "550 -y"])
def test_a_hostile_resolved_version_is_refused_by_the_operation(host: Host, version: str) -> None:
    """Defence in depth: a version that reaches apt_packages from anywhere (a repository
    index, a bug) is checked by the operation itself."""
    facts = fresh_facts()
    with pytest.raises(RoleError) as err:
        assert host.stack.driver is not None
        pin = driver_pin(host.stack.driver, version, facts)
        list(walk(host, facts, search_path(None), resolved=Resolved(driver=pin)))
    why = str(err.value)
    assert "roles/driver/tasks.yaml:" in why and ": apt_packages: packages.0.version: " in why
    assert "is not a Debian version" in why


BAD_TASKS = [
    ("apt_packages", f"packages: [{json.dumps(APT_OPTION)}]", "is not a Debian package name"),
    ("apt_packages", "packages: [{name: htop, version: '3.0 -y'}]", "is not a Debian version"),
    ("apt_packages", 'packages: [htop]\n  hold: ["--x"]', "is not a Debian package name"),
    ("apt_packages", 'packages: [htop]\n  never: ["-y"]', "is not a Debian package name"),
    ("module_blacklist", 'module: "nouveau\\ninstall nvidia /bin/sh -c id"', "kernel module name"),
    ("module_blacklist", "module: ../../etc/x", "kernel module name"),
    ("line_in_file", 'path: /etc/x\n  line: "a = 1\\nb = 2"', "control character"),
    ("line_in_file", 'path: /etc/x\n  line: "a\\rb"', "control character"),
    ("line_in_file", "path: etc/x\n  line: a", "is not an absolute path"),
    ("alternatives", "alternative: --all\n  link: /usr/bin/x\n  path: /opt/x", "not an option"),
    ("alternatives", "alternative: x\n  link: /usr/bin/x\n  path: -x", "absolute path"),
    ("alternatives", "alternative: x\n  link: x\n  path: /opt/x", "absolute path"),
    ("file", "path: /etc/x\n  mode: --reference=/etc/shadow", "octal mode"),
    ("file", "path: /etc/x\n  owner: --from=root", "user[:group]"),
    ("file", "path: /etc/x/", "names a directory"),
    ("service", "unit: --now", "not an option"),
    (
        "apt_repository",
        "path: /etc/apt/sources.list.d/x.list\n  uri: http://x/\n  keyring: /k.gpg] [trusted=yes",
        "keyring path",
    ),
    (
        "apt_repository",
        "path: /etc/apt/sources.list.d/x.list\n  uri: 'http://x/ /'\n  keyring: /k.gpg",
        "a URL",
    ),
    (
        "apt_repository",
        "path: /etc/apt/sources.list.d/x.list\n  uri: http://x/\n  suite: -o\n  keyring: /k",
        "one word",
    ),
    ("pip", "python: /opt/p\n  packages: [{name: --index-url=http://e, version: '1'}]", "PyPI"),
    ("pip", "python: /opt/p\n  packages: [{name: x, version: '1 --pre'}]", "version"),
    ("conda_env", "prefix: /opt/conda\n  env: ../../etc\n  python: '3.11'", "not an option"),
    ("command", "cmd: [true]\n  creates: relative", "absolute path"),
]


@pytest.mark.parametrize(("op", "args", "problem"), BAD_TASKS)
def test_a_bad_value_refuses_the_host_naming_the_task(
    tmp_path: Path, fresh: HostFacts, op: str, args: str, problem: str
) -> None:
    host, search, tasks = site_role(tmp_path, f"- name: bad\n  op: {op}\n  {args}\n")
    plan = plan_host(host, fresh, search=search)
    assert plan.refused is not None and not plan.changes
    assert plan.refused.startswith(f"{tasks}:1:3: {op}: "), plan.refused
    assert problem in plan.refused


def test_package_lists_follow_a_double_dash(host: Host, fresh: HostFacts) -> None:
    # on 570 with 550 held: an unhold, one joined install with removals, holds
    names = ["nvidia-open-550", "libnvidia-compute-550"]
    old = fresh.model_copy(
        update={
            "packages": {
                n: Package(name=n, version="550.163.01-1", status="hold ok installed")
                for n in names
            },
            "gpunode_holds": names,  # gpunode held them
        }
    )
    moved = host_from(STACK.replace('branch: "550"', 'branch: "570"').replace("12.4", "12.8")
                      .replace('"2.21"', '"2.26"'))  # fmt: skip
    seen = set()
    for plan in (plan_host(host, fresh, probes=NO_SYSTEMD), plan_host(moved, old, probes={})):
        assert plan.refused is None
        for step in (s for c in plan.changes if c.op == "apt_packages" for s in c.steps):
            argv = shlex.split(step.command)
            verb = next((v for v in ("install", "hold", "unhold") if v in argv), None)
            if verb is None:
                continue  # apt-get update
            seen.add(verb)
            rest = argv[argv.index(verb) + 1 :]
            assert rest[0] == "--" and rest[1:] and all(not w.startswith("-") for w in rest[1:])
            if verb == "install":
                assert list(step.installs) == [shlex.quote(w) for w in rest[1:]]
    assert seen == {"install", "hold", "unhold"}


def test_a_held_package_name_read_from_the_host_is_checked_too(
    tmp_path: Path, fresh: HostFacts
) -> None:
    host, search, tasks = site_role(
        tmp_path, "- name: htop\n  op: apt_packages\n  packages: [htop]\n  replace_held: '.*'\n"
    )
    held = {n: Package(name=n, version="1", status="hold ok installed") for n in ("mc", "-oX=1")}
    ours = {"gpunode_holds": ["mc"]}
    plan = plan_host(host, fresh.model_copy(update={"packages": held, **ours}), search=search)
    assert plan.refused == f"{tasks}:1:3: held package '-oX=1' is not a Debian package name"
    held.pop("-oX=1")
    plan = plan_host(host, fresh.model_copy(update={"packages": held, **ours}), search=search)
    assert plan.changes[0].commands[1] == "apt-mark unhold -- mc"
