"""Run `async def` tests here with asyncio (Textual's Pilot is async; no plugin needed);
`tui_lab`: a small lab of our own for the tests that drive the real app in tmux."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Iterator

import pytest

from tests.conftest import Lab, gpunode_lab, lab_unavailable, slot_net


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{n: pyfuncitem.funcargs[n] for n in names}))
    return True


# -- a lab of our own for the real-terminal tests -----------------------------------------------

# hosts on 127.0.58.11+: apart from the shared test lab and the apply tests'
TUI_LAB_NET = slot_net(58)


@pytest.fixture(scope="session")
def tui_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """3 hosts x 2 simulated H200s, brought up for this session and always brought down."""
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("tui-lab")
    gpunode_lab(state, "up", "--hosts", "3", "--gpus", "2", "--net", str(TUI_LAB_NET))
    try:
        text = gpunode_lab(state, "inventory").stdout
        inv = state / "inventory.yaml"
        inv.write_text(text)
        doc = json.loads(gpunode_lab(state, "status", "--json").stdout)
        yield Lab(
            state_dir=state,
            inventory_text=text,
            inventory_path=inv,
            names=[h["name"] for h in doc["hosts"]],
            addresses={h["name"]: h["address"] for h in doc["hosts"]},
            port=int(doc["config"]["port"]),
            key=state / "client" / "id_ed25519",
            known_hosts=state / "client" / "known_hosts",
            started_here=True,
            config=doc["config"],
        )
    finally:
        gpunode_lab(state, "down", check=False)
