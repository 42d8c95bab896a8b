"""The tensorrt smoke test's parts that run without TensorRT: the ONNX model it writes
(decoded here by an independent reader and computed with torch; checked by the onnx package
where it is importable), the FP16 comparison, the failure that names the package to
install, and the driver running it where no python has the bindings.

The engine build and run (TensorRT's Builder, OnnxParser, execute_async_v3) need TensorRT's
libraries and a GPU: no test here runs them."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpunode.smoke import suite

SUITE = Path(suite.__file__).parent
torch = pytest.importorskip("torch")


def module() -> Any:
    sys.path.insert(0, str(SUITE))
    try:
        return __import__("check_tensorrt")
    finally:
        sys.path.remove(str(SUITE))


# -- a protobuf reader of its own, to read back what the script wrote --------------------


def _varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise AssertionError(f"wire type {wire} in field {number}")
    return out


def one(data: bytes, number: int) -> Any:
    (value,) = [v for n, v in fields(data) if n == number]
    return value


def many(data: bytes, number: int) -> list[Any]:
    return [v for n, v in fields(data) if n == number]


def test_the_onnx_model_reads_back_as_the_torch_model_and_computes_its_answer() -> None:
    c = module()
    model, data = c.reference(torch)
    assert one(data, 1) == 8  # ir_version
    assert one(one(data, 8), 2) == 17  # opset_import.version
    graph = one(data, 7)
    nodes = [(one(n, 4).decode(), [i.decode() for i in many(n, 1)]) for n in many(graph, 1)]
    assert nodes == [("Gemm", ["x", "w1", "b1"]), ("Relu", ["h"]), ("Gemm", ["r", "w2", "b2"])]
    trans_b = [one(a, 3) for n in many(graph, 1) for a in many(n, 5) if one(a, 1) == b"transB"]
    assert trans_b == [1, 1]
    weights = {}
    for t in many(graph, 5):
        dims = many(t, 1)
        assert one(t, 2) == 1  # FLOAT
        raw = one(t, 9)
        values = struct.unpack(f"<{len(raw) // 4}f", raw)
        weights[one(t, 8).decode()] = torch.tensor(values).reshape(dims)
    assert {k: list(v.shape) for k, v in weights.items()} == {
        "w1": [128, 64], "b1": [128], "w2": [16, 128], "b2": [16]
    }  # fmt: skip
    x = torch.randn(8, 64)
    h = torch.relu(x @ weights["w1"].T + weights["b1"])
    y = h @ weights["w2"].T + weights["b2"]
    assert torch.equal(y, model(x).detach()) or torch.allclose(y, model(x).detach(), atol=1e-6)
    (inp,) = many(graph, 11)
    assert one(inp, 1) == b"x"


def test_the_onnx_model_passes_the_onnx_checker_where_onnx_is_importable() -> None:
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator

    c = module()
    model, data = c.reference(torch)
    proto = onnx.load_from_string(data)
    onnx.checker.check_model(proto, full_check=True)
    x = torch.randn(8, 64)
    (y,) = ReferenceEvaluator(proto).run(None, {"x": x.numpy()})
    assert c.compare(torch.from_numpy(y), model(x).detach())[2]


def test_fp16_rounding_passes_and_a_wrong_answer_or_nan_fails() -> None:
    c = module()
    model, _ = c.reference(torch)
    want = model(torch.randn(8, 64)).detach()
    diff, rel, ok = c.compare(want.half(), want)
    assert ok and 0 < rel < 1e-3 and diff > 0
    assert not c.compare(want * 1.05, want)[2]
    bad = want.clone()
    bad[0, 0] = float("nan")
    assert not c.compare(bad, want)[2]


def run_script(env: dict[str, str]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, str(SUITE / "check_tensorrt.py")],
        cwd=SUITE, capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_without_the_bindings_it_fails_naming_the_package() -> None:
    (line,) = run_script({})
    assert (line["name"], line["status"]) == ("tensorrt", "fail")
    assert line["reason"].startswith("TensorRT's Python bindings are not importable here")
    assert "install python3-libnvinfer" in line["reason"]


def test_installed_metadata_without_an_importable_module_says_which_version(
    tmp_path: Path,
) -> None:
    # what the lab's python3-libnvinfer leaves: a dist-info, no module
    info = tmp_path / "tensorrt-10.14.1.48.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorrt\nVersion: 10.14.1.48\n")
    (line,) = run_script({"PYTHONPATH": str(tmp_path)})
    assert line["status"] == "fail"
    assert line["reason"].startswith(
        "tensorrt 10.14.1.48 is installed here but `import tensorrt` fails (ModuleNotFoundError"
    )
    assert line["details"]["dist_version"] == "10.14.1.48"


def test_the_driver_runs_it_in_the_system_python_when_no_env_has_tensorrt() -> None:
    proc = subprocess.run(
        [sys.executable, str(SUITE / "driver.py"), "--tests", "tensorrt"],
        cwd=SUITE, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert lines[0]["name"] == "environments"
    (trt,) = [x for x in lines if x["name"] == "tensorrt"]
    assert trt["status"] == "fail" and trt["env"] == "system"
    assert "python3-libnvinfer" in trt["reason"]


def test_tensorrt_runs_by_default_where_the_stack_declares_it() -> None:
    from gpunode.inventory import loads
    from gpunode.smoke.runner import selected_tests

    text = "defaults:\n  connection: local\n  stack:\n{}hosts:\n  h: {{}}\n"
    plain = loads(text.format("    cuda_env: false\n"), "i.yaml").hosts["h"]
    trt = loads(text.format('    cuda: {toolkits: ["13.0"]}\n    tensorrt: "10"\n'), "i.yaml")
    assert "tensorrt" not in selected_tests(plain)
    assert selected_tests(trt.hosts["h"])[-1] == "tensorrt"
