"""A converged apply imports the planner while it waits on the network (execute/warm.py):
start-up leaves it out, and the thread started with the run brings in everything a host's
read imports in its methods."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from gpunode.execute import host, warm

HEAVY = ("jinja2", "gpunode.plan.planner", "gpunode.roles.walk", "gpunode.facts.model",
         "gpunode.resolve.resolver", "gpunode.compat.rules")  # fmt: skip
# What `gpunode apply` imports before its run starts: the command, the session and views.
START = ("gpunode.cli", "gpunode.cli.apply", "gpunode.cli.common", "gpunode.cli.display",
         "gpunode.execute.session", "gpunode.execute.run", "gpunode.execute.preview",
         "gpunode.resolve.index", "gpunode.roles", "gpunode.plan.saved", "gpunode.records",
         "gpunode.views.jsonl", "gpunode.views.plain", "gpunode.views.recap")  # fmt: skip
# A host's methods that run after its read, on changes: never on a converged host.
AFTER_READ = {"smoke", "_doctor", "_diff"}


def loaded_after(*modules: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def lazy_imports() -> dict[str, str]:
    """Module -> the HostRun method that imports it in its body."""
    tree = ast.parse(Path(host.__file__).read_text())
    found: dict[str, str] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HostRun"):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module:
                    found[node.module] = fn.name
                    for alias in node.names:  # `from gpunode.plan import simulate`: a module
                        name = f"{node.module}.{alias.name}"
                        if _is_module(name):
                            found[name] = fn.name
    return found


def test_start_up_imports_no_planner_roles_jinja_or_facts_model() -> None:
    loaded = loaded_after(*START)
    assert not [m for m in HEAVY if m in loaded]


def test_warm_imports_what_a_hosts_read_and_changes_import() -> None:
    wanted = {m: fn for m, fn in lazy_imports().items() if fn not in AFTER_READ}
    assert "gpunode.plan.planner" in wanted and "gpunode.execute.readhost" in wanted
    loaded = loaded_after(*warm.AFTER_LOCK)
    missing = {m: fn for m, fn in wanted.items() if m not in loaded}
    assert not missing, f"add to warm.AFTER_LOCK (imported by HostRun's methods): {missing}"
    assert all(m in loaded for m in HEAVY)


def test_start_runs_once_and_wait_returns_when_done() -> None:
    code = (
        "import sys, threading\n"
        "from gpunode.execute import warm\n"
        "warm.wait()\n"  # nothing started: returns at once
        "warm.start(['gpunode.transport.local'])\n"
        "first = warm._thread\n"
        "warm.start(['gpunode.transport.ssh'])\n"
        "assert warm._thread is first\n"
        "warm.wait()\n"
        "assert not first.is_alive()\n"
        "assert 'gpunode.transport.local' in sys.modules and 'jinja2' in sys.modules\n"
        "assert 'gpunode.transport.ssh' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
