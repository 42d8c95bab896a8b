"""Cost per measured work: figures from real H200 smoke runs, prices from the inventory.

The two smoke outputs are real `gpunode smoke --json` runs on H200 machines
(tests/fixtures/hardware/h200x1 and h200x2: bf16 matmul 758.6 and 785.7 TFLOP/s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpunode.cost import gpu_types, latest, plan_work
from gpunode.exitcodes import ExitCode
from gpunode.inventory import InventoryError, load
from gpunode.views.schemas import validate

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def real_smoke(machine: str) -> dict[str, Any]:
    """The host of a real `gpunode smoke --json` capture (after its `$ command` line)."""
    text = (HARDWARE / machine / "smoke.json").read_text()
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    (host,) = doc["hosts"]
    return dict(host)


def record(run: str, started: float, hosts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    smoked = {name: {"status": "ok", "smoke": smoke} for name, smoke in hosts.items()}
    return {"id": run, "command": "smoke", "started": started, "hosts": smoked}


def failed(smoke: dict[str, Any]) -> dict[str, Any]:
    """The same run with its bf16 matmul failed (no value to use)."""
    out = json.loads(json.dumps(smoke))
    for r in out["results"]:
        if (r.get("details") or {}).get("metric") == "bf16_tflops":
            r.update(status="fail", value=None, reason="RuntimeError: CUDA error")
    return out


def faster(smoke: dict[str, Any]) -> dict[str, Any]:
    """The same run with its bf16 matmul twice as fast."""
    out = json.loads(json.dumps(smoke))
    for r in out["results"]:
        if (r.get("details") or {}).get("metric") == "bf16_tflops":
            r["value"] *= 2
    return out


def inventory(tmp: Path, text: str) -> Path:
    path = tmp / "inv.yaml"
    path.write_text(text)
    return path


FLEET = """\
hosts:
  h200-a: {address: 192.0.2.11, gpus: {model: H200, count: 8, hourly_cost: {amount: 3.5}}}
  h200-b: {address: 192.0.2.12, gpus: {model: H200, count: 8, hourly_cost: {amount: 28, per: host}}}
  a100-a: {address: 192.0.2.21, gpus: {model: A100, count: 8, hourly_cost: {amount: 1.2}}}
  spare: {address: 192.0.2.31, gpus: {model: L40S, count: 4}}
"""


def test_the_newest_passing_figure_of_each_host_is_used() -> None:
    x1, x2 = real_smoke("h200x1"), real_smoke("h200x2")
    runs = [
        record("old", 100.0, {"h200-a": x1, "h200-b": x1}),
        record("new", 200.0, {"h200-a": x2, "h200-b": failed(x2)}),
    ]
    found = latest(runs)
    assert found["h200-a"].tflops == 785.7 and found["h200-a"].run == "new"
    # the newest run failed its matmul: the figure before it stands
    assert found["h200-b"].tflops == 758.6 and found["h200-b"].run == "old"
    assert found["h200-a"].gpu == "NVIDIA H200"


def test_types_price_per_gpu_and_rank_a_job(tmp_path: Path) -> None:
    hosts = load(inventory(tmp_path, FLEET)).hosts
    found = latest([record("r1", 1.0, {"h200-a": real_smoke("h200x2"),
                                       "h200-b": real_smoke("h200x2")})])  # fmt: skip
    types, unpriced = gpu_types(list(hosts.values()), found)
    assert [u.host for u in unpriced] == ["spare"]
    by = {t.model: t for t in types}
    assert len(types) == 2  # 3.5 per GPU and 28 per 8-GPU host: the same price, one type
    h200 = by["H200"]
    assert h200.hosts == ["h200-a", "h200-b"] and h200.gpus == 16 and h200.gpu_hour == 3.5
    assert h200.tflops == 785.7
    assert h200.tflops_per_cost == pytest.approx(785.7 / 3.5)
    assert h200.cost_per_pflops_hour == pytest.approx(3.5 * 1000 / 785.7)
    assert by["A100"].tflops is None  # never measured: no guess from a table
    # 1e6 PFLOP of bf16 in 12 h: 353.5 GPU-hours of H200, 30 GPUs; the fleet has 16
    options = plan_work(types, 1e6, 12, budget=None)
    gpu_hours = 1e21 / 785.7e12 / 3600
    first = options[0]
    assert first.type is h200 and first.gpu_hours == pytest.approx(gpu_hours)
    assert first.gpus_needed == 30 and not any(o.fits for o in options)
    assert first.why == "needs 30 GPUs to finish in 12 h; the fleet has 16"
    assert [o.why for o in options if o.type.model == "A100"] == [
        "never measured: run `gpunode smoke INVENTORY --only torch-matmul` on its hosts"
    ]
    # in 24 h, 15 GPUs do it; a budget below the cost rules it out
    ok = plan_work(types, 1e6, 24, budget=None)[0]
    assert ok.fits and ok.gpus_needed == 15 and ok.cost == pytest.approx(gpu_hours * 3.5)
    over = plan_work(types, 1e6, 24, budget=1000)[0]
    cost = f"{gpu_hours * 3.5:,.2f}"
    assert not over.fits and over.why == f"costs {cost} USD, over the budget of 1,000.00"


def test_a_host_price_without_a_gpu_count_is_refused_with_its_line(tmp_path: Path) -> None:
    path = inventory(tmp_path, "hosts:\n  a:\n    address: 192.0.2.1\n"
                     "    gpus: {model: H200, hourly_cost: {amount: 28, per: host}}\n")  # fmt: skip
    with pytest.raises(InventoryError) as err:
        load(path)
    text = str(err.value.problems[0])
    assert f"{path}:4" in text and "hourly_cost.per: host needs gpus.count" in text, text


def gpunode(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUNODE_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "gpunode", *args], capture_output=True,
                          text=True, env=env, timeout=60)  # fmt: skip


def test_cost_command_reads_the_records_and_ranks(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True, mode=0o700)
    inv = inventory(tmp_path, FLEET)
    rec = record("20261201T090000-abc123", 1.0, {"h200-a": real_smoke("h200x1")})
    rec["inventory"] = str(inv.resolve())
    # A newer, faster measure of another inventory's h200-a (staging's, say): not this one's.
    other = record("20261202T090000-def456", 2.0, {"h200-a": faster(real_smoke("h200x1"))})
    other["inventory"] = str(tmp_path / "staging.yaml")
    for r in (rec, other):
        (state / "runs" / f"{r['id']}.json").write_text(json.dumps(r))
    out = gpunode(state, "cost", str(inv))
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("H200 ") and "758.6" in x)
    assert "3.50 USD" in line and f"{758.6 / 3.5:,.1f}" in line, line
    assert f"{3500 / 758.6:,.2f} USD" in line and "(1 of 2 hosts)" in line, line
    assert "never measured: A100: run `gpunode smoke INVENTORY --only torch-matmul`" in out.stdout
    assert "no gpus.hourly_cost: 1 hosts (spare)" in out.stdout
    job = gpunode(state, "cost", str(inv), "--work", "1e5", "--hours", "10", "--json")
    assert job.returncode == 0, job.stderr
    validate("cost", job.stdout)
    options = json.loads(job.stdout)["work"]["options"]
    assert options[0]["model"] == "H200" and options[0]["fits"] and options[0]["gpus_needed"] == 4
    bad = gpunode(state, "cost", str(inv), "--hours", "10")
    assert bad.returncode == ExitCode.BAD_INPUT and "give its size with --work" in bad.stderr


def test_types_in_two_currencies_are_not_ranked(tmp_path: Path) -> None:
    inv = inventory(tmp_path, FLEET.replace("{amount: 1.2}", "{amount: 1.1, currency: EUR}"))
    shown = gpunode(tmp_path / "state", "cost", str(inv))
    assert shown.returncode == 0 and "1.10 EUR" in shown.stdout, shown.stderr
    ranked = gpunode(tmp_path / "state", "cost", str(inv), "--work", "10")
    assert ranked.returncode == ExitCode.BAD_INPUT
    assert "priced in EUR, USD: costs in different currencies cannot be ranked" in ranked.stderr


PRICED_LOCAL = """\
hosts:
  me: {connection: local, become: none, gpus: {model: H200, count: 2, hourly_cost: {amount: 3.5}}}
"""


def test_a_smoke_run_leaves_a_record_cost_reads(tmp_path: Path) -> None:
    fake_smi = Path(__file__).resolve().parents[1] / "fixtures" / "monitor"
    inv = inventory(tmp_path, PRICED_LOCAL)
    env = {
        **os.environ,
        "GPUNODE_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{fake_smi}{os.pathsep}{os.environ['PATH']}",
    }
    smoke = [sys.executable, "-m", "gpunode", "smoke", str(inv), "--only", "nvidia-smi"]
    run = subprocess.run(smoke, capture_output=True, text=True, env=env, timeout=120)
    # the smoke table, then the priced types: nvidia-smi alone measures no TFLOP/s
    assert "never measured: H200" in run.stdout, run.stdout + run.stderr
    (path,) = (tmp_path / "state" / "runs").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["command"] == "smoke" and rec["exit_code"] == run.returncode
    assert rec["hosts"]["me"]["smoke"]["results"], rec
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    shown = gpunode(tmp_path / "state", "report", "--cost")
    assert shown.returncode == 0 and "never measured: H200" in shown.stdout, shown.stderr
