"""The tensorrt role through the real CLI on lab hosts: `gpunode plan`, `apply --check` and
`apply` against the lab's NVIDIA repository, which carries TensorRT releases with a build per
CUDA line (gpunode_lab/repo/nvidia_repo.yaml, written from NVIDIA's naming, not gpunode's).

Every assertion reads the host: dpkg's database, `apt-mark showhold`, the files the packages
put there, dpkg's own log. The lab's python3-libnvinfer carries its dist-info and no module,
so the smoke test's answer there is the failure that names what to install; the engine build
itself needs TensorRT's libraries and a GPU and does not run here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.apply.labhelpers import Lab, apply, fresh, of, on_host, packages

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab-02"
RUNTIME = ["libnvinfer10", "libnvinfer-plugin10", "libnvinfer-lean10", "libnvinfer-dispatch10",
           "libnvinfer-vc-plugin10", "libnvonnxparsers10"]  # fmt: skip
OTHERS = ["tensorrt-libs", "libnvinfer-headers-dev", "libnvinfer-headers-plugin-dev",
          "libnvinfer-dev", "libnvinfer-plugin-dev", "libnvinfer-lean-dev",
          "libnvinfer-dispatch-dev", "libnvinfer-vc-plugin-dev", "libnvonnxparsers-dev",
          "libnvinfer-bin", "tensorrt-dev", "python3-libnvinfer", "python3-libnvinfer-lean",
          "python3-libnvinfer-dispatch"]  # fmt: skip
WORDS = ("nvinfer", "tensorrt", "nvonnx")  # the packages of TensorRT's set
DPKG_STATE = "sha256sum /var/lib/dpkg/status /var/log/dpkg.log; apt-mark showhold"


def stack(cuda: str, tensorrt: Any, smoke: list[str] | None = None) -> dict[str, Any]:
    return {
        "driver": None,
        "cuda": {"toolkits": [cuda]},
        "cudnn": None,
        "nccl": None,
        "cuda_env": False,
        "smoke": smoke or [],
        "tensorrt": tensorrt,
    }


def trt(inv: Path, host: str = HOST) -> dict[str, tuple[str, bool]]:
    return {n: v for n, v in packages(inv, host).items() if any(w in n for w in WORDS)}


def test_tensorrt_converges_a_second_apply_changes_nothing_and_a_pin_moves_it(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    inv = lab.inventory(tmp_path / "a", **stack("13.0", "10", smoke=["tensorrt"]))

    # plan and --check read, and write nothing
    before = lab.tree(HOST)
    planned = lab.gpunode("plan", str(inv), "--limit", HOST)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "libnvinfer10=10.14.1.48-1+cuda13.0" in planned.stdout
    checked = lab.gpunode("apply", str(inv), "--limit", HOST, "--check", "--yes")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert lab.tree(HOST) == before

    code, evs = apply(lab, inv, "--limit", HOST)
    (done,) = of(evs, "host-finished", HOST)
    build = "10.14.1.48-1+cuda13.0"  # the newest release, its CUDA 13 build
    assert trt(inv) == {
        **{n: (build, True) for n in RUNTIME},
        **{n: (build, False) for n in OTHERS},
    }, done["message"]
    header = on_host(inv, HOST, "cat /usr/include/x86_64-linux-gnu/NvInferVersion.h")
    assert "#define NV_TENSORRT_MINOR 14" in header
    lib = on_host(inv, HOST, "readlink /usr/lib/x86_64-linux-gnu/libnvinfer.so.10").strip()
    assert lib == "libnvinfer.so.10.14.1"

    # the smoke test ran on the host: the bindings' metadata is there, no module to import
    smoke = {e["result"]["name"]: e["result"] for e in of(evs, "smoke-result", HOST)}
    assert smoke["tensorrt"]["status"] == "fail"
    assert smoke["tensorrt"]["reason"].startswith(
        "tensorrt 10.14.1.48 is installed here but `import tensorrt` fails"
    )
    assert "install python3-libnvinfer" in smoke["tensorrt"]["reason"]
    assert code == 2  # a smoke test failed; the converge itself did not

    # a second apply: nothing planned, dpkg's database, log and holds unchanged
    state = on_host(inv, HOST, DPKG_STATE)
    code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
    assert code == 0
    assert of(evs, "change-started", HOST) == []
    assert on_host(inv, HOST, DPKG_STATE) == state

    # a series the installed release is not of: every package moves to 10.13, still held
    pin = lab.inventory(tmp_path / "b", **stack("13.0", "10.13"))
    code, evs = apply(lab, pin, "--limit", HOST, "--no-smoke")
    assert code == 0, [e["message"] for e in of(evs, "host-finished", HOST)]
    older = "10.13.3.9-1+cuda13.0"
    assert trt(pin) == {
        **{n: (older, True) for n in RUNTIME},
        **{n: (older, False) for n in OTHERS},
    }


def test_a_cuda_12_toolkit_gets_the_cuda_12_build_and_without_python_no_bindings(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    spec = {"version": "10.9", "python": False}
    inv = lab.inventory(tmp_path, **stack("12.8", spec))
    code, evs = apply(lab, inv, "--limit", HOST, "--no-smoke")
    assert code == 0, [e["message"] for e in of(evs, "host-finished", HOST)]
    have = trt(inv)
    assert have["libnvinfer10"] == ("10.9.0.34-1+cuda12.8", True)
    assert {v for v, _ in have.values()} == {"10.9.0.34-1+cuda12.8"}
    assert not any(n.startswith("python3-") for n in have)


def test_a_release_without_a_build_for_the_toolkit_is_refused_at_plan_time(
    lab: Lab, tmp_path: Path
) -> None:
    fresh(lab, HOST)
    before = lab.tree(HOST)
    inv = lab.inventory(tmp_path, **stack("13.0", "10.9"))
    plan = lab.gpunode("plan", str(inv), "--limit", HOST)
    assert plan.returncode == 4, plan.stdout + plan.stderr
    assert (
        "refused: stack.tensorrt: TensorRT 10.9 for CUDA 13.0 (a +cuda13.x build of"
        " libnvinfer10) is not in http://"
    ) in plan.stdout
    assert 'it has 10.13.3.9-1+cuda13.0, 10.14.1.48-1+cuda13.0. Use tensorrt: "10.14"' in (
        plan.stdout
    )
    code, evs = apply(lab, inv, "--limit", HOST)
    assert code == 4 and of(evs, "change-started") == []
    assert lab.tree(HOST) == before  # nothing was written
