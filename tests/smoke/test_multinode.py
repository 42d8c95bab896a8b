"""nccl-multinode without the lab: the launch lines, NCCL's INFO lines read, the grading,
the inventory's refusals, and the real all-reduce script under the real torchrun (CPU
torch, gloo) on this machine, as two "hosts" of `connection: local`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpunode.inventory import InventoryError, loads
from gpunode.inventory.model import Host
from gpunode.smoke.multinode import grade, launches, parse_output
from gpunode.smoke.report import render
from gpunode.smoke.runner import HostSmoke
from gpunode.views.schemas import validate
from tests.conftest import SLOT

TORCHRUN = Path(sys.executable).parent / "torchrun"
SCRIPT = Path(__file__).parents[2] / "gpunode" / "smoke" / "suite" / "nccl_multinode.py"

# As NCCL 2.2x prints them (src/transport/net.cc, p2p.cc, shm.cc; src/misc/socket.cc).
NCCL_IB = """\
gpu-a:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:192.0.2.4<0>
gpu-a:1234:1234 [0] NCCL INFO Using network IB
gpu-a:1234:1290 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/IB/0/GDRDMA
gpu-a:1234:1290 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/1/GDRDMA
gpu-a:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
"""
NCCL_SOCKET = """\
gpu-a:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.4<0>
gpu-a:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
gpu-a:1234:1290 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via SHM/direct/direct
"""


def hosts(nccl: str = "", count: int = 2) -> list[Host]:
    body = "".join(f"  h{i}: {{address: 192.0.2.{i + 1}}}\n" for i in range(count))
    inv = loads(f"defaults:\n  gpus: {{count: 8}}\n{nccl}hosts:\n{body}")
    return list(inv.hosts.values())


def report(busbw: float = 40.0, backend: str = "nccl", correct: bool = True) -> str:
    row = {"bytes": 1 << 30, "seconds": 0.1, "algbw_gbps": busbw / 1.75, "busbw_gbps": busbw}
    doc = {"world": 16, "backend": backend, "correct": correct, "inter": [row], "intra": [row]}
    return "GPUNODE-NCCL " + json.dumps(doc) + "\n"


def test_each_host_gets_its_rank_and_meets_the_others_on_its_own_loopback() -> None:
    nccl = "  nccl: {interface: ib0, env: {NCCL_IB_HCA: 'mlx5_0:1,mlx5_1:1'}}\n"
    plan = launches(hosts(nccl, 3), run_id="gpunode-abc")
    for rank, launch in enumerate(plan):
        # the first host's port is its store's, filled in by its launcher; the others' is
        # the forward gpunode opened on their loopback
        port = str(40000 + rank) if rank else "@PORT@"
        launch = replace(launch, port=40000 + rank) if rank else launch
        argv = launch.argv()
        assert "--nnodes=3" in argv and f"--node-rank={rank}" in argv
        assert "--nproc-per-node=8" in argv and "--rdzv-backend=c10d" in argv
        assert f"--rdzv-endpoint=127.0.0.1:{port}" in argv and "--rdzv-conf=is_host=0" in argv
        cmd = launch.command()
        assert "gpunode-abc" not in cmd, "the run id is in the process list"
        assert launch.stdin(b"BLOB") == b"gpunode-abc\nBLOB"
        assert "IFS= read -r rid || exit 98; " in cmd and "PET_RDZV_ID=$rid; export" in cmd
        assert "NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 " in cmd
        assert "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1 " in cmd and "NCCL_DEBUG=INFO" in cmd
        assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 " in cmd
        assert "command -v torchrun" in cmd
        if rank == 0:
            assert 'timeout -k 45 120 "$py" "$d/nccl_multinode.py" --hold-store "$t" ' in cmd
        else:
            assert 'timeout -k 45 120 "$t" --nnodes=3 ' in cmd and "--hold-store" not in cmd
            assert f"GPUNODE_STORE_PORT={40000 + rank} " in cmd
    assert len({launch.run_id for launch in launches(hosts())} | {"gpunode-abc"}) == 2
    assert len(launches(hosts())[0].run_id) == len("gpunode-") + 32  # 128 random bits


def test_a_fixed_rendezvous_is_refused_and_the_interface_validated() -> None:
    with pytest.raises(InventoryError, match=r"rendezvous_port is gone: .* remove rendezvous_port"):
        loads("defaults:\n  nccl: {rendezvous_port: 29500}\nhosts: {h: {}}\n")
    with pytest.raises(InventoryError, match="not a network interface name"):
        loads("defaults:\n  nccl: {interface: 'eth0 lo'}\nhosts: {h: {}}\n")
    with pytest.raises(InventoryError, match=r"NCCL_SOCKET_IFNAME .* disagree"):
        loads(
            "defaults:\n  nccl: {interface: ib0, env: {NCCL_SOCKET_IFNAME: eth0}}\nhosts: {h: {}}\n"
        )
    # env's NCCL_SOCKET_IFNAME, when it names one interface, binds gloo's sockets as well
    (launch,) = launches(hosts("  nccl: {env: {NCCL_SOCKET_IFNAME: ib0}}\n", 1))
    assert "GLOO_SOCKET_IFNAME=ib0 " in launch.command()
    (launch,) = launches(hosts("  nccl: {env: {NCCL_SOCKET_IFNAME: '^docker,lo'}}\n", 1))
    assert "GLOO_SOCKET_IFNAME" not in launch.command()


def test_the_torchrun_comes_from_nccl_bin_else_the_conda_env_with_pytorch() -> None:
    (launch,) = launches(hosts("  nccl: {bin: /opt/torch/.venv/bin}\n", 1))
    assert launch.torchrun == "/opt/torch/.venv/bin/torchrun"
    assert "command -v torchrun" not in launch.command()
    assert 't=/opt/torch/.venv/bin/torchrun; test -x "$t" || exit 94;' in launch.command()
    assert "no executable torchrun in nccl.bin" in grade(launch, 94, "", 0.1)["reason"]
    assert "no python beside torchrun" in grade(launch, 93, "", 0.1)["reason"]
    conda = "  stack:\n    conda: {prefix: /opt/conda, envs: {tf: {}, pt: {pytorch: '2.11'}}}\n"
    (launch,) = launches(hosts(conda, 1))
    assert launch.torchrun == "/opt/conda/envs/pt/bin/torchrun"


@pytest.mark.parametrize(
    "value",
    ["eth0; rm -rf /", "$(id)", "a b", "`x`", "x\ny", "-" * 300],
)
def test_env_values_that_a_shell_would_read_as_more_are_refused(value: str) -> None:
    env = f"{{NCCL_SOCKET_IFNAME: {json.dumps(value)}}}"
    text = f"defaults:\n  nccl:\n    env: {env}\nhosts: {{h: {{}}}}\n"
    with pytest.raises(InventoryError, match=r"nccl\.env"):
        loads(text)


def test_env_names_and_the_torchrun_folder_are_validated() -> None:
    with pytest.raises(InventoryError, match="environment variable name"):
        loads("defaults:\n  nccl: {env: {'A-B': x}}\nhosts: {h: {}}\n")
    with pytest.raises(InventoryError, match="absolute, normalized path"):
        loads("defaults:\n  nccl: {bin: 'venv/bin'}\nhosts: {h: {}}\n")


def test_nccls_lines_name_the_transports_and_the_network_devices() -> None:
    ib = parse_output(NCCL_IB)
    assert ib.transports == {"ib": 2, "p2p": 1}
    assert ib.net_devices == ["IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:192.0.2.4<0>"]
    assert ib.networks == ["IB"] and len(ib.lines) == 5
    sock = parse_output(NCCL_SOCKET)
    assert sock.transports == {"socket": 1, "shm": 1}


def grade_one(nccl: str, out: str, code: int | None = 0) -> dict[str, Any]:
    (launch,) = launches(hosts(nccl, 1))
    return grade(launch, code, out, 1.0)


def test_ib_expected_and_used_passes_with_the_busbw_of_the_largest_size() -> None:
    r = grade_one("  nccl: {expect: {transport: ib, min_busbw_gbps: 30}}\n", NCCL_IB + report())
    assert (r["status"], r["value"], r["expected"]) == ("pass", 40.0, 30.0)


def test_sockets_where_ib_was_expected_fail_naming_the_fallback() -> None:
    r = grade_one("  nccl: {expect: {transport: ib}}\n", NCCL_SOCKET + report())
    assert r["status"] == "fail"
    assert r["reason"].startswith("NCCL used shm, socket where ib was expected")
    assert "fell back to sockets" in r["reason"]


def test_less_than_the_expected_bandwidth_fails() -> None:
    r = grade_one("  nccl: {expect: {min_busbw_gbps: 300}}\n", NCCL_IB + report(40.0))
    assert r["status"] == "fail" and "below the expected 300" in r["reason"]


def test_a_wrong_sum_or_the_cpu_backend_fails() -> None:
    assert grade_one("", report(correct=False))["reason"] == "an all-reduce returned a wrong sum"
    assert grade_one("", report(backend="gloo"))["reason"] == "ran gloo, not nccl"


def test_a_stopped_torchrun_fails_naming_the_rendezvous() -> None:
    out = "torch.distributed.DistNetworkError: The client socket has failed to connect\n"
    r = grade_one("", out, code=124)
    assert r["status"] == "fail"
    assert "did not finish within 120 s and was stopped" in r["reason"]
    assert "rendezvous on the first host's loopback (its store did not start)" in r["reason"]
    assert "DistNetworkError" in r["reason"]
    r = grade_one("", "", code=95)
    assert "set nccl.bin" in r["reason"]


def test_the_plain_view_shows_the_sweep() -> None:
    smoke = HostSmoke("h0", results=[grade_one("", NCCL_IB + report())])
    text = render([smoke])
    assert "NCCL transports: ib x2, p2p x1" in text
    assert "1024 MiB" in text and "NET/IB: [0]mlx5_0:1/IB" in text


needs_torch = pytest.mark.skipif(not TORCHRUN.exists(), reason="no torchrun beside this python")


@needs_torch
def test_the_script_all_reduces_for_real_under_torchrun(tmp_path: Path) -> None:
    """Two torchruns of 2 processes each, as two nodes: across them and within each."""
    port = str(29700 + SLOT)
    argv = [str(TORCHRUN), "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=unit", "--max-restarts=0",
            str(SCRIPT), "--sizes-mib=1,2", "--warmup=1", "--iters=2"]  # fmt: skip
    procs = [
        subprocess.Popen([*argv[:3], f"--node-rank={r}", *argv[3:]], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=120)[0] for p in procs]
    reports = [parse_output(o).report for o in outs]
    assert all(r is not None for r in reports), outs
    for r in reports:
        assert r is not None
        assert (r["world"], r["nodes"], r["local_world"], r["backend"]) == (4, 2, 2, "gloo")
        assert r["correct"] is True
        assert [row["bytes"] for row in r["inter"]] == [1 << 20, 2 << 20]
        assert [row["bytes"] for row in r["intra"]] == [1 << 20, 2 << 20]
        row = r["inter"][0]
        # both are rounded to 3 decimals: on a slow machine (0.05 GB/s) that alone is 1 %
        rounding = 0.0005 + 0.0005 * 2 * 3 / 4
        assert row["busbw_gbps"] == pytest.approx(
            row["algbw_gbps"] * 2 * 3 / 4, rel=0.01, abs=rounding
        )
    assert sorted(r["group_rank"] for r in reports if r) == [0, 1]


@needs_torch
def test_gpunode_smoke_runs_two_local_hosts_through_torchrun(tmp_path: Path) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("no timeout(1)")
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n  connection: local\n  become: none\n"
        f"  nccl: {{bin: {TORCHRUN.parent}, backend: gloo, sizes_mib: [1], "
        "timeout: 90, expect: {min_busbw_gbps: 0.0001}}\n"
        "hosts: {gpu0: {}, gpu1: {}}\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "gpunode", "smoke", str(inv), "--only", "nccl-multinode", "--json"],
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    doc = json.loads(res.stdout)
    assert res.returncode == 0, res.stdout
    validate("smoke", res.stdout)  # the published schema, docs/schemas/smoke.json
    assert doc["kind"] == "smoke"
    for host in doc["hosts"]:
        (r,) = host["results"]
        assert r["status"] in ("pass", "warn") and r["value"] > 0, r
        assert r["details"]["world"] == 2


@needs_torch
def test_nccl_without_a_gpu_fails_saying_so(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "defaults:\n  connection: local\n  become: none\n"
        f"  nccl: {{bin: {TORCHRUN.parent}, sizes_mib: [1], timeout: 90}}\n"
        "hosts: {gpu0: {nccl: {env: {CUDA_VISIBLE_DEVICES: '0'}}}}\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "gpunode", "smoke", str(inv), "--only", "nccl-multinode"],
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "RuntimeError: NCCL needs CUDA: torch" in res.stdout
    assert "sees no GPU (CUDA_VISIBLE_DEVICES=0)" in res.stdout


HUNG_MAIN = """\
def main(argv=None):
    import os, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stuck where TERM does not end it
    open(os.environ["PIDS"] + "/" + str(os.getpid()), "w").close()
    while True:
        time.sleep(1)


"""


@needs_torch
def test_a_hung_worker_that_ignores_term_is_gone_after_the_timeout(tmp_path: Path) -> None:
    """gpunode's own wrapper around torchrun (the store's launcher included), with a worker
    that never ends by itself."""
    import base64

    nccl = (
        f"  connection: local\n  nccl: {{bin: {TORCHRUN.parent}, timeout: 15, nproc_per_node: 1, "
        f"env: {{PIDS: {tmp_path}}}}}\n"
    )
    (launch,) = launches(hosts(nccl, 1))
    hung = SCRIPT.read_text().replace(
        '\nif __name__ == "__main__":', HUNG_MAIN + 'if __name__ == "__main__":'
    )
    res = subprocess.run(
        ["sh", "-c", launch.command()], input=launch.stdin(base64.encodebytes(hung.encode())),
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 124, res.stdout[-2000:]
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert pids, res.stdout[-2000:]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"worker {pid} left behind"
    r = grade(launch, res.returncode, res.stdout.decode(), 1.0)
    assert "did not finish within 15 s and was stopped" in r["reason"]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
