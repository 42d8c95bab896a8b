"""Parsed roles and compatibility rules kept between runs (gpunode.diskmemo): a second
process reads them back without parsing YAML, gets what parsing gives, parses again when
a file changes, and never loads a cache file that holds anything but plain data."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunode import diskmemo
from gpunode.compat import rules
from gpunode.roles import loader


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("GPUNODE_CACHE_DIR", str(tmp_path / "cache"))
    loader.load_role.cache_clear()
    rules.rules.cache_clear()
    yield tmp_path / "cache"
    loader.load_role.cache_clear()
    rules.rules.cache_clear()


def _site_role(tmp_path: Path) -> Path:
    role = tmp_path / "roles" / "site_role"
    shutil.copytree(loader.builtin_roles_dir() / "cuda_env", role)
    return role


def test_a_role_read_back_is_the_role_parsed(cache: Path, tmp_path: Path) -> None:
    role = _site_role(tmp_path)
    parsed = loader.load_role(role)
    assert len(list((cache / "roles").iterdir())) == 1
    loader.load_role.cache_clear()
    with pytest.MonkeyPatch.context() as mp:  # a hit reads no YAML
        mp.setattr(loader, "load_file", lambda path: pytest.fail(f"parsed {path}"))
        assert loader.load_role(role) == parsed


def test_a_changed_role_is_parsed_again(cache: Path, tmp_path: Path) -> None:
    role = _site_role(tmp_path)
    loader.load_role(role)
    tasks = role / "tasks.yaml"
    tasks.write_text(tasks.read_text() + "\n- name: one more\n  op: command\n  cmd: 'true'\n")
    loader.load_role.cache_clear()
    changed = loader.load_role(role)
    assert changed.tasks[-1].name == "one more"
    assert changed == loader._parse_role(role)
    assert len(list((cache / "roles").iterdir())) == 2


def test_a_role_error_is_never_kept(cache: Path, tmp_path: Path) -> None:
    role = _site_role(tmp_path)
    (role / "tasks.yaml").write_text("- name: no op\n")
    for _ in range(2):
        loader.load_role.cache_clear()
        with pytest.raises(loader.RoleError, match="missing op"):
            loader.load_role(role)
    assert not (cache / "roles").exists()


def test_the_rules_read_back_are_the_rules_parsed(cache: Path) -> None:
    first = rules.rules()
    rules.rules.cache_clear()
    assert rules.rules() == first
    assert len(list((cache / "compat").iterdir())) == 1


def test_a_cache_file_with_code_is_refused(cache: Path, tmp_path: Path) -> None:
    role = _site_role(tmp_path)
    parsed = loader.load_role(role)
    (entry,) = (cache / "roles").iterdir()
    marker = tmp_path / "ran"
    # a pickle that would run a command when loaded by pickle.loads
    evil = pickle.dumps(_Run(["touch", str(marker)]))
    entry.write_bytes(evil)
    assert diskmemo.get("roles", entry.name) is None
    loader.load_role.cache_clear()
    assert loader.load_role(role) == parsed  # a miss: parsed again, and stored again
    assert not marker.exists()
    assert diskmemo.get("roles", entry.name) is not None


class _Run:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def __reduce__(self) -> tuple[object, tuple[list[str]]]:
        return (subprocess.call, (self.argv,))


def test_an_unwritable_cache_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUNODE_CACHE_DIR", str(blocker))  # a file: no folder under it
    loader.load_role.cache_clear()
    role = _site_role(tmp_path)
    assert loader.load_role(role) == loader._parse_role(role)
    loader.load_role.cache_clear()


def test_a_second_process_parses_no_role(cache: Path) -> None:
    """The converged path: a process whose roles and rules are cached imports no parser
    for them (ruamel's composer runs only for the inventory itself)."""
    script = (
        "import sys\n"
        "from gpunode.roles import loader\n"
        "from gpunode.compat import rules\n"
        "from gpunode.inventory import yamlsrc\n"
        "calls = []\n"
        "yamlsrc.load_text = lambda *a: calls.append(a)\n"
        "loader.load_file = lambda p: calls.append(p)\n"
        "base = loader.builtin_roles_dir()\n"
        "for p in sorted(base.iterdir()):\n"
        "    if (p / 'tasks.yaml').is_file():\n"
        "        loader.load_role(p)\n"
        "rules.rules()\n"
        "print(len(calls), 'ruamel.yaml' in sys.modules)\n"
    )
    for p in sorted(loader.builtin_roles_dir().iterdir()):
        if (p / "tasks.yaml").is_file():
            loader.load_role(p)
    rules.rules()
    env = {"GPUNODE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", script], env=env, text=True, capture_output=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "False"]


def test_a_cache_others_may_write_is_not_read(cache: Path, tmp_path: Path) -> None:
    role = _site_role(tmp_path)
    loader.load_role(role)
    (entry,) = (cache / "roles").iterdir()
    assert diskmemo.get("roles", entry.name) is not None
    entry.chmod(0o622)  # a file anyone may rewrite, with tasks of their choosing
    assert diskmemo.get("roles", entry.name) is None
    entry.chmod(0o600)
    (cache / "roles").chmod(0o777)  # a folder where anyone may replace the file
    assert diskmemo.get("roles", entry.name) is None
    (cache / "roles").chmod(0o700)
    assert diskmemo.get("roles", entry.name) is not None


def test_the_cache_stays_bounded(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskmemo, "MAX_ENTRIES", 8)
    for i in range(20):
        diskmemo.put("roles", f"{i:064x}", {"n": i})
    kept = sorted(int(p.name, 16) for p in (cache / "roles").iterdir())
    assert len(kept) <= 8
    assert kept[-1] == 19  # the newest stays
    assert diskmemo.get("roles", f"{19:064x}") == {"n": 19}
