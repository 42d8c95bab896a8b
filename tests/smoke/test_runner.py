"""The runner over real transports, `gpunode smoke` end to end, and the recorded H200 results."""

from __future__ import annotations

import base64
import io
import json
import shutil
import socket
import tarfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpunode.cli import cli
from gpunode.events import Bus, Event, HostFinished, HostStatusChanged, HostUnreachable, SmokeResult
from gpunode.inventory import loads
from gpunode.smoke.report import render
from gpunode.smoke.runner import HostSmoke, selected_tests, smoke_host, suite_blob, suite_files
from gpunode.transport.local import LocalTransport

HARDWARE = Path(__file__).parent.parent / "fixtures" / "hardware"


def local_host(extra: str = "") -> Any:
    inv = loads(f"hosts:\n  here:\n    connection: local\n    become: none\n{extra}")
    return inv.hosts["here"]


def recorder() -> tuple[Bus, list[Event]]:
    bus, seen = Bus(), []
    bus.subscribe(seen.append)
    return bus, seen


def test_suite_blob_unpacks_to_the_suite_files() -> None:
    raw = base64.decodebytes(suite_blob())
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        assert {n: tar.extractfile(n).read() for n in names} == suite_files()  # type: ignore[union-attr]
    assert "driver.py" in names and "vectoradd.cu" in names and "__init__.py" not in names


def test_selected_tests_only_then_stack_then_all() -> None:
    host = local_host("    stack: {smoke: [nvidia-smi, torch]}\n")
    assert selected_tests(host) == ["nvidia-smi", "torch"]
    assert selected_tests(host, ["nccl-allreduce"]) == ["nccl-allreduce"]
    assert "cuda-vectoradd" in selected_tests(local_host())
    with pytest.raises(ValueError, match="unknown smoke tests"):
        selected_tests(host, ["gpu-burn"])


def test_smoke_host_over_the_local_transport_publishes_each_result() -> None:
    host = local_host("    gpus: {model: H200, count: 1}\n")
    bus, seen = recorder()
    smoke = smoke_host(host, LocalTransport("here"), bus, only=["nvidia-smi", "cuda-vectoradd"])
    assert isinstance(seen[0], HostStatusChanged) and seen[0].status == "smoke"
    published = [e.result.to_json() for e in seen if isinstance(e, SmokeResult)]
    assert published == smoke.results
    names = [r["name"] for r in smoke.results]
    assert names[0] == "environments"
    assert any(n.startswith("nvidia-smi") for n in names)
    assert any(n.startswith("cuda-vectoradd") for n in names)
    assert all(r["env"] in {"system", "-"} for r in smoke.results)
    if not Path("/dev/nvidiactl").exists():
        # The inventory promises a GPU this machine does not have: that is a failure.
        assert smoke.failed and smoke.status == "failed"
    assert smoke.seconds > 0 and smoke.unreachable is None
    again = HostSmoke.from_json(json.loads(json.dumps(smoke.to_json())))
    assert again.results == smoke.results and again.status == smoke.status


def test_smoke_host_reports_a_host_without_python3(tmp_path: Path) -> None:
    # A host whose PATH has no python3: the suite cannot start, and says why.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("mktemp", "base64", "tar", "gzip", "rm"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    host = local_host()
    smoke = smoke_host(host, _PathTransport(str(bin_dir)), None, only=["nvidia-smi"])
    (failure,) = smoke.results
    assert failure["status"] == "fail"
    assert failure["reason"].startswith("no python3 on the host")


class _PathTransport(LocalTransport):
    """The local transport with another PATH, as a host without python3 would have."""

    def __init__(self, path: str) -> None:
        super().__init__("here")
        self._path = path

    def run(self, command: Any, **kw: Any) -> Any:
        return super().run(f"PATH={self._path}; {command}", **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  here:\n    connection: local\n    become: none\n")
    res = CliRunner().invoke(cli, ["smoke", str(inv), "--only", "nvidia-smi", "--json"])
    data = json.loads(res.output)
    assert (data["kind"], data["schema"]) == ("smoke", 1)
    (host,) = data["hosts"]
    assert host["host"] == "here"
    if Path("/dev/nvidiactl").exists():
        return
    # No GPU declared, none found: skips are not failures.
    assert res.exit_code == 0 and data["exit_code"] == 0
    assert host["counts"]["fail"] == 0 and host["counts"]["skip"] >= 1

    inv.write_text(
        "hosts:\n  here:\n    connection: local\n    become: none\n"
        "    gpus: {model: H200, count: 2}\n"
    )
    res = CliRunner().invoke(cli, ["smoke", str(inv), "--only", "nvidia-smi"])
    assert res.exit_code == 2
    assert "here: failed" in res.output and "nvidia-smi not found" in res.output


def test_cli_unreachable_host_exits_4(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  gone:\n    address: 127.0.0.1\n"
        f"    ssh: {{port: {free_port()}, connect_timeout: 3, host_key_policy: accept-new,"
        f" known_hosts_file: {tmp_path / 'known_hosts'}, config_file: null}}\n"
    )
    res = CliRunner().invoke(cli, ["smoke", str(inv), "--json"])
    assert res.exit_code == 3, res.output
    (host,) = json.loads(res.output)["hosts"]
    assert host["status"] == "unreachable" and host["unreachable"]
    assert host["results"] == []


def test_cli_rejects_an_unknown_test(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  here:\n    connection: local\n")
    res = CliRunner().invoke(cli, ["smoke", str(inv), "--only", "gpu-burn"])
    assert res.exit_code == 5 and "gpu-burn" in res.output


@pytest.mark.parametrize("machine", ["h200x1", "h200x2"])
def test_recorded_h200_results_meet_the_reference(machine: str) -> None:
    """The real outputs of `gpunode smoke` on the H200 machines (docs/hardware.md)."""
    text = (HARDWARE / machine / "smoke.json").read_text()
    data = json.loads(text[text.index("{") : text.rindex("}") + 1])
    assert data["exit_code"] == 0
    (host,) = data["hosts"]
    r = {x["name"]: x for x in host["results"]}
    assert host["seconds"] < 60  # the whole suite, per host
    assert r["torch/matmul-bf16"]["value"] >= 0.9 * 773
    assert r["torch/copy"]["value"] >= 4.0
    assert r["nvidia-smi/driver"]["value"] == "580.159.04"
    assert r["cuda-vectoradd/13.0"]["status"] == "pass"
    if machine == "h200x2":
        assert r["nccl-allreduce/1GiB"]["value"] >= 300
    else:
        assert r["nccl-allreduce"]["status"] == "skip"
    table = render([HostSmoke.from_json(host)])
    assert "torch/matmul-bf16" in table and "TFLOP/s" in table


def test_events_for_a_run(tmp_path: Path) -> None:
    from gpunode.smoke.runner import smoke_hosts

    host = local_host()
    bus, seen = recorder()
    (smoke,) = smoke_hosts([host], bus, only=["nvidia-smi"])
    finished = [e for e in seen if isinstance(e, HostFinished)]
    assert len(finished) == 1 and finished[0].status == smoke.status
    assert not [e for e in seen if isinstance(e, HostUnreachable)]
