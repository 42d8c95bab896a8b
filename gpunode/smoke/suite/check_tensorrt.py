"""tensorrt: an ONNX model made here, built into an FP16 engine, run, and checked against PyTorch.

The model (Linear 64->128, ReLU, Linear 128->16, batch 8) is written as ONNX by this
script itself (`onnx_model`: a Gemm-Relu-Gemm graph in ONNX's protobuf encoding), so the
host needs neither the onnx package nor torch's exporter. TensorRT's Python API parses it
(OnnxParser), builds a serialized FP16 engine (BuilderFlag.FP16), and runs it with the
TensorRT 10 API (set_tensor_address, execute_async_v3) on torch CUDA tensors; the output
must match PyTorch's fp32 answer within FP16's tolerance. Bindings that cannot be imported
are a failure that names the package to install, not a skip: the test runs only where
TensorRT is declared or asked for.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # on the host these run as scripts beside smokelib.py
    from gpunode.smoke.suite.smokelib import NO_GPU, Timer, emit, gpu_device_present
else:
    from smokelib import NO_GPU, Timer, emit, gpu_device_present

BATCH, IN, HIDDEN, OUT = 8, 64, 128, 16
TOLERANCE = 1e-2  # of the output's largest magnitude: FP16 keeps ~3 decimal digits
OPSET, IR_VERSION = 17, 8
INSTALL = (
    "install python3-libnvinfer (stack.tensorrt with python: true), or the tensorrt wheel"
    " in a conda env of the stack"
)

# -- ONNX, as protobuf wire format (field numbers from onnx/onnx.proto) ----------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _tensor(name: str, dims: list[int], values: list[float]) -> bytes:
    """TensorProto: dims 1, data_type 2 (1 = FLOAT), name 8, raw_data 9 (little-endian)."""
    raw = struct.pack(f"<{len(values)}f", *values)
    return b"".join(_int(1, d) for d in dims) + _int(2, 1) + _str(8, name) + _bytes(9, raw)


def _value_info(name: str, dims: list[int]) -> bytes:
    """ValueInfoProto name 1, type 2 -> TypeProto.tensor_type 1 -> elem_type 1, shape 2."""
    shape = b"".join(_bytes(1, _int(1, d)) for d in dims)
    return _str(1, name) + _bytes(2, _bytes(1, _int(1, 1) + _bytes(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str], name: str, trans_b: bool) -> bytes:
    """NodeProto input 1, output 2, name 3, op_type 4, attribute 5 (INT: i 3, type 20 = 2)."""
    out = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    out += _str(3, name) + _str(4, op)
    if trans_b:
        out += _bytes(5, _str(1, "transB") + _int(3, 1) + _int(20, 2))
    return out


def onnx_model(w1: list[float], b1: list[float], w2: list[float], b2: list[float]) -> bytes:
    """ModelProto (ir_version 1, producer 2, graph 7, opset_import 8) of
    y = Gemm(Relu(Gemm(x, w1^T, b1)), w2^T, b2), weights row-major as torch keeps them."""
    graph = (
        _bytes(1, _node("Gemm", ["x", "w1", "b1"], ["h"], "fc1", True))
        + _bytes(1, _node("Relu", ["h"], ["r"], "relu", False))
        + _bytes(1, _node("Gemm", ["r", "w2", "b2"], ["y"], "fc2", True))
        + _str(2, "gpunode_smoke")
        + _bytes(5, _tensor("w1", [HIDDEN, IN], w1))
        + _bytes(5, _tensor("b1", [HIDDEN], b1))
        + _bytes(5, _tensor("w2", [OUT, HIDDEN], w2))
        + _bytes(5, _tensor("b2", [OUT], b2))
        + _bytes(11, _value_info("x", [BATCH, IN]))
        + _bytes(12, _value_info("y", [BATCH, OUT]))
    )
    return (
        _int(1, IR_VERSION)
        + _str(2, "gpunode-smoke")
        + _bytes(7, graph)
        + _bytes(8, _str(1, "") + _int(2, OPSET))
    )


def reference(torch: Any) -> tuple[Any, bytes]:
    """The torch model (seeded, so every run builds the same engine) and its ONNX bytes."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT)).eval()

    def flat(t: Any) -> list[float]:
        return [float(v) for v in t.detach().reshape(-1).tolist()]

    fc1, fc2 = model[0], model[2]
    data = onnx_model(flat(fc1.weight), flat(fc1.bias), flat(fc2.weight), flat(fc2.bias))
    return model, data


def compare(got: Any, want: Any) -> tuple[float, float, bool]:
    """(max abs difference, that relative to the reference's largest magnitude, within
    TOLERANCE): a NaN anywhere fails."""
    diff = float((got.float() - want.float()).abs().max())
    scale = max(float(want.float().abs().max()), 1e-6)
    rel = diff / scale
    return diff, rel, rel == rel and rel < TOLERANCE


# -- TensorRT ---------------------------------------------------------------------------


def build_engine(trt: Any, data: bytes) -> tuple[Any, float]:
    """A serialized FP16 engine from ONNX bytes, and the seconds the build took."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch: the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(data):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"the ONNX parser refused the model: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 28)
    config.set_flag(trt.BuilderFlag.FP16)
    t0 = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    seconds = time.perf_counter() - t0
    if plan is None:
        raise RuntimeError("build_serialized_network returned None (see TensorRT's log)")
    return plan, seconds


def run_engine(trt: Any, torch: Any, plan: Any, x: Any) -> Any:
    """Run the engine once on `x` (a CUDA tensor) with the TensorRT 10 API."""
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    engine = runtime.deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    y = torch.empty(BATCH, OUT, dtype=torch.float32, device="cuda")
    buffers = {"x": x.contiguous(), "y": y}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        context.set_tensor_address(name, int(buffers[name].data_ptr()))
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    if not context.execute_async_v3(stream.cuda_stream):
        raise RuntimeError("execute_async_v3 returned False")
    stream.synchronize()
    return y


def installed_version() -> str | None:
    """The tensorrt distribution's version as its metadata says, importable or not."""
    try:
        from importlib import metadata

        return metadata.version("tensorrt")
    except Exception:
        return None


def not_importable(exc: BaseException, t: Any) -> None:
    have = installed_version()
    said = "TensorRT's Python bindings are not importable here"
    if have:
        said = f"tensorrt {have} is installed here but `import tensorrt` fails"
    emit(
        "tensorrt",
        "fail",
        f"{said} ({type(exc).__name__}: {exc}): {INSTALL}",
        seconds=t.seconds,
        details={"python": sys.executable, "dist_version": have},
    )


def main() -> int:
    argparse.ArgumentParser().parse_args()
    t = Timer()
    try:
        import tensorrt as trt
    except Exception as exc:  # ImportError, or a library the bindings load is missing
        not_importable(exc, t)
        return 0
    version = str(getattr(trt, "__version__", "?"))
    try:
        import torch
    except ImportError as exc:
        emit(
            "tensorrt",
            "fail",
            f"TensorRT {version} is here, but torch is not ({exc}): the test's buffers and"
            " reference are torch's; run it in a python with both (--python, a conda env)",
            seconds=t.seconds,
            details={"tensorrt": version},
        )
        return 0
    if not torch.cuda.is_available():
        why = NO_GPU if not gpu_device_present() else "torch.cuda.is_available() is False"
        emit("tensorrt", "skip", f"TensorRT {version}: {why}", seconds=t.seconds)
        return 0
    return run(trt, torch, version)


def run(trt: Any, torch: Any, version: str) -> int:
    t = Timer()
    details: dict[str, Any] = {"tensorrt": version, "torch": torch.__version__}
    try:
        model, data = reference(torch)
        details["onnx_bytes"] = len(data)
        plan, build_seconds = build_engine(trt, data)
        details["build_seconds"] = round(build_seconds, 3)
        x = torch.randn(BATCH, IN, device="cuda")
        with torch.no_grad():
            want = model.cuda()(x)
        got = run_engine(trt, torch, plan, x)
        diff, rel, ok = compare(got, want)
        details.update(max_abs=diff, max_rel=rel)
        reason = (
            f"TensorRT {version}: ONNX Gemm-ReLU-Gemm ({BATCH}x{IN} -> {OUT}) built as an"
            f" FP16 engine in {build_seconds:.2f} s; max error {rel:.2e} of the output's"
            f" range against torch (limit {TOLERANCE:g})"
        )
        status, value = ("pass" if ok else "fail"), round(rel, 6)
        if not ok:
            reason = "the engine's output differs from torch's: " + reason
    except Exception as exc:
        status, value = "fail", None
        reason = f"TensorRT {version}: {type(exc).__name__}: {exc}"
    emit(
        "tensorrt/fp16-engine",
        status,
        reason,
        value=value,
        unit="rel err",
        seconds=t.seconds,
        details=details,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
