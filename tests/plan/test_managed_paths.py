"""The files the facts round trip hashes, before any fact is known: every file a real plan
compares by sha256 must be among them, or it reads as missing and is written again at every
apply. The walk asks each file task for its path without rendering its content (which may
need the versions resolved), and a role that cannot render is an error naming its file:line.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from gpunode.facts.model import HostFacts, KernelModule, Package
from gpunode.inventory import Host, load
from gpunode.plan.planner import _managed_paths, managed_paths
from gpunode.roles.loader import RoleError, search_path
from gpunode.roles.ops import OPERATIONS, Operation
from tests.plan.planhelpers import STACK, fresh_facts, host_from, plan_host

REPO = Path(__file__).resolve().parent.parent.parent
SEARCH = search_path(None)


def read_by_plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path an operation asks the facts' sha256 of: file_hash, in every module of the
    operations that imports it."""
    import gpunode.roles.ops as ops
    from gpunode.roles.ops.base import file_hash as real

    asked: list[str] = []

    def file_hash(facts: HostFacts, path: str) -> str | None:
        asked.append(path)
        return real(facts, path)

    for info in pkgutil.iter_modules(ops.__path__):
        module = importlib.import_module(f"{ops.__name__}.{info.name}")
        if getattr(module, "file_hash", None) is real:
            monkeypatch.setattr(module, "file_hash", file_hash)
    return asked


def stacks(tmp_path: Path) -> list[tuple[str, Host]]:
    """inventories/lab.yaml's hosts, and the stacks the tests plan and apply."""
    out = [(f"lab.yaml {n}", h) for n, h in load(REPO / "inventories" / "lab.yaml").hosts.items()]
    (tmp_path / "env.yml").write_text("dependencies: [numpy]\n")
    (tmp_path / "req.txt").write_text("requests==2.32.3\n")
    more: dict[str, str] = {
        "tests' stack": STACK,
        "driver only, 580": STACK.split("  stack:")[0]
        + '  stack:\n    driver: {branch: "580", flavor: open, hold: true}\n'
        + "    cuda: null\n    cudnn: null\n    nccl: null\n    cuda_env: false\n"
        + "hosts:\n  gpu1: {}\n",
        "conda env files": STACK.replace(
            "    cuda_env: true\n",
            "    cuda_env: true\n    conda:\n      tos: accept\n      envs:\n"
            "        site: {python: '3.11', environment_file: env.yml,"
            " requirements_file: req.txt}\n",
        ),
    }
    for i, (name, text) in enumerate(more.items()):
        inv = tmp_path / f"inv{i}.yaml"
        inv.write_text(text)
        out.append((name, load(inv).hosts["gpu1"]))
    return out


LOADED = fresh_facts(
    module=KernelModule(loaded=True, version="550.163.01", flavor="open"),
    packages={"cuda-keyring": Package(name="cuda-keyring", version="1.1-1", status="ii")},
)


@pytest.mark.parametrize("facts", [fresh_facts(), LOADED], ids=["fresh", "driver loaded"])
def test_every_file_a_plan_compares_was_hashed_before_the_facts(
    facts: HostFacts, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked = read_by_plans(monkeypatch)
    for name, host in stacks(tmp_path):
        hashed = managed_paths(host, SEARCH)
        got = facts.model_copy(update={"files": dict.fromkeys(hashed, "absent")})
        asked.clear()
        plan = plan_host(host, got, probes={"systemd": False})
        assert plan.refused is None, (name, plan.refused)
        assert asked, name  # the stack manages files: the check below is not empty
        assert [p for p in asked if p not in got.files] == [], name
        assert set(asked) <= set(plan.reads), name  # what the executor hashes after facts


SITE = """\
- name: a file whose content needs the resolved driver
  op: file
  path: /etc/site/driver
  content: "{{ resolved.driver.release }}\\n"

- name: a file named after the running kernel
  op: file
  path: "/etc/site/{{ facts.kernels.installed[0] }}.conf"
  content: "x\\n"
"""


def site(tmp_path: Path, tasks: str) -> tuple[Host, tuple[Path, ...]]:
    role = tmp_path / "roles" / "site"
    role.mkdir(parents=True)
    (role / "tasks.yaml").write_text(tasks)
    text = STACK.replace("    cuda_env: true\n", "    cuda_env: true\n    roles: [site]\n")
    inv = tmp_path / "inv.yaml"
    inv.write_text(text)
    return host_from(text, file=str(inv)), search_path(inv)


def test_a_file_is_hashed_whatever_its_content_needs_and_a_path_only_facts_name_later(
    tmp_path: Path,
) -> None:
    host, search = site(tmp_path, SITE)
    hashed = _managed_paths(host, search)
    assert "/etc/site/driver" in hashed  # its content was never rendered for this
    assert not any(p.startswith("/etc/site/") and p.endswith(".conf") for p in hashed)
    facts = fresh_facts().model_copy(update={"files": dict.fromkeys(hashed, "absent")})
    facts.kernels.installed = ["6.8.0-45-generic"]
    plan = plan_host(host, facts, search=search, probes={"systemd": False})
    # the plan names the one only the facts could: the executor hashes it, then plans again
    assert "/etc/site/6.8.0-45-generic.conf" in plan.reads
    assert "/etc/site/6.8.0-45-generic.conf" not in facts.files


@pytest.mark.parametrize(
    ("tasks", "said"),
    [
        ("- name: broken\n  op: file\n  path: '/etc/{{ vars.x + }}'\n", "unexpected"),
        ("- name: not absolute\n  op: file\n  path: etc/site\n", "not an absolute path"),
        ("- name: no such op\n  op: fiel\n  path: /etc/site\n", "unknown op 'fiel'"),
        ('- name: arithmetic\n  op: file\n  path: "/etc/{{ 1 // 0 }}"\n', "ZeroDivisionError"),
        (
            "- name: a loop over a string\n  op: file\n  loop: \"{{ 'abc' }}\"\n"
            "  path: '/etc/{{ item }}'\n",
            "loop: a list or a mapping is needed",
        ),
    ],
)
def test_a_role_that_cannot_render_is_an_error_with_its_file_and_line(
    tmp_path: Path, tasks: str, said: str
) -> None:
    host, search = site(tmp_path, tasks)
    with pytest.raises(RoleError, match=r"tasks\.yaml:1\b") as exc:
        _managed_paths(host, search)
    assert said in str(exc.value)
    # and the plan, which the same error refuses with its file:line
    why = plan_host(host, fresh_facts(), search=search).refused
    assert why is not None and "tasks.yaml:1" in why and said in why


def test_every_operation_that_reads_files_names_the_arguments_it_reads_them_from() -> None:
    reading = {n for n, op in OPERATIONS.items() if type(op).paths is not Operation.paths}
    assert reading  # file, template, module_blacklist, apt_repository...
    assert {n for n in reading if not OPERATIONS[n].path_args} == set()
