#!/usr/bin/env bash
# The tensorrt smoke test on a real GPU machine, as far as one without TensorRT allows:
# the ONNX model the test writes itself is checked by the onnx package's full checker and
# evaluated by onnxruntime against torch on the GPU (what TensorRT's parser would be given),
# then `gpunode smoke --only tensorrt` runs on the machine as one `connection: local` host
# and must fail naming what to install (no TensorRT there: its libraries come only from
# NVIDIA's repositories, which the machine cannot reach).
#
#   bench/hardware-tensorrt.sh [OUTDIR]      (default: $OUT, else /tmp/gpunode-tensorrt)
#
# Needs: PyTorch with CUDA, onnx and onnxruntime at $TORCH_BIN (default /opt/torch/.venv/bin);
# gpunode's dependencies as wheels in .whl/ when the machine has no index.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gpunode-tensorrt}}
torch_bin=${TORCH_BIN:-/opt/torch/.venv/bin}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
. bench/hardware-env.sh
export GPUNODE_STATE_DIR=$out/state GPUNODE_CACHE_DIR=$out/cache
echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

echo "--- the test's ONNX model: onnx.checker, onnxruntime vs torch (CUDA)"
"$torch_bin/python3" - <<'PY'
import sys
sys.path.insert(0, "gpunode/smoke/suite")
import numpy as np, onnx, onnxruntime as ort, torch
import check_tensorrt as t

model, data = t.reference(torch)
proto = onnx.load_from_string(data)
onnx.checker.check_model(proto, full_check=True)
print("onnx", onnx.__version__, "checker: ok;", len(data), "bytes; opset",
      proto.opset_import[0].version, "; nodes", [n.op_type for n in proto.graph.node])
x = torch.randn(t.BATCH, t.IN, device="cuda")
with torch.no_grad():
    want = model.cuda()(x)
sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
(got,) = sess.run(None, {"x": x.cpu().numpy()})
diff, rel, ok = t.compare(torch.from_numpy(np.asarray(got)), want.cpu())
print(f"onnxruntime {ort.__version__} (CPU) vs torch {torch.__version__} on "
      f"{torch.cuda.get_device_name()}: max abs {diff:.3e}, {rel:.3e} of the range, "
      f"within {t.TOLERANCE:g}: {ok}")
half = model.half().cuda()
with torch.no_grad():
    fp16 = half(x.half())
diff, rel, ok = t.compare(fp16, want)
print(f"the same model in fp16 on the GPU (what an FP16 engine computes): {rel:.3e} of the"
      f" range, within {t.TOLERANCE:g}: {ok}")
PY

echo "--- gpunode smoke --only tensorrt on this machine"
cat >"$out/inventory.yaml" <<YAML
hosts:
  gpu-local:
    connection: local
    become: none
    repos: {nvidia: null}
    stack:
      cuda: {toolkits: ["13.0"]}
      tensorrt: "10"
YAML
python3 -m gpunode smoke --only tensorrt --python "$torch_bin/python3" "$out/inventory.yaml"
echo "[exit $?]"
python3 -m gpunode smoke --only tensorrt --python "$torch_bin/python3" --json \
  "$out/inventory.yaml" >"$out/smoke.json"
echo "[json exit $?]"
