"""The host-side scripts, run as the host runs them: `python3 script.py` in the suite folder.

On a machine without a GPU (CI) the GPU parts skip and say why; the CPU parts compute.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpunode.smoke import suite

SUITE = Path(suite.__file__).parent
FIXTURES = Path(__file__).parent.parent / "fixtures" / "smoke"
KEYS = {"name", "status", "reason", "value", "expected", "unit", "seconds", "env", "details"}
HAS_GPU = os.path.exists("/dev/nvidiactl")


def run(
    script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, str(SUITE / script), *args],
        cwd=SUITE,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    for line in lines:
        assert set(line) == KEYS, line
        assert line["status"] in {"pass", "warn", "fail", "skip"}
        assert isinstance(line["seconds"], float | int) and line["seconds"] >= 0
        assert isinstance(line["details"], dict)
        if line["status"] in {"skip", "fail", "warn"}:
            assert line["reason"], f"{line['name']} {line['status']} without a reason"
    return lines


def by_name(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["name"]: line for line in lines}


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def no_tools_path(tmp_path: Path) -> str:
    """A PATH with a shell's basics but no nvidia-smi or nvcc."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sh", "cat", "python3"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


# -- nvidia-smi ----------------------------------------------------------------------------


def fake_smi(tmp_path: Path, capture: str) -> Path:
    """nvidia-smi answering the query with the fields of a capture from a real H200 host.

    The capture's columns are index, uuid, name, driver_version, pci.bus_id, memory.total...;
    the check asks for index, name, driver_version, uuid, pci.bus_id, memory.total.
    """
    rows = []
    for line in (FIXTURES / capture).read_text().splitlines():
        c = [x.strip() for x in line.split(",")]
        rows.append(", ".join([c[0], c[2], c[3], c[1], c[4], c[5]]))
    out = tmp_path / "query.csv"
    out.write_text("\n".join(rows) + "\n")
    return executable(tmp_path / "nvidia-smi", f"#!/bin/sh\ncat {out}\n")


def module_file(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "version"
    path.write_text(version + "\n")
    return path


def test_nvidia_smi_lists_every_gpu_of_the_real_two_gpu_capture(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "h200x2-query-gpu.csv")
    lines = by_name(
        run(
            "check_nvidia_smi.py",
            "--count",
            "2",
            "--smi",
            str(smi),
            "--module-version-file",
            str(module_file(tmp_path, "580.159.04")),
        )
    )
    gpus = lines["nvidia-smi/gpus"]
    assert (gpus["status"], gpus["value"], gpus["expected"]) == ("pass", 2, 2)
    assert [g["name"] for g in gpus["details"]["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert gpus["details"]["gpus"][1]["uuid"] == "GPU-b04010c1-7166-6096-5d84-4ad10eafff39"
    driver = lines["nvidia-smi/driver"]
    assert (driver["status"], driver["value"], driver["expected"]) == (
        "pass",
        "580.159.04",
        "580.159.04",
    )


def test_nvidia_smi_fails_when_gpus_are_missing(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "h200-query-gpu.csv")
    lines = by_name(
        run(
            "check_nvidia_smi.py",
            "--count",
            "2",
            "--smi",
            str(smi),
            "--module-version-file",
            str(module_file(tmp_path, "580.159.04")),
        )
    )
    assert lines["nvidia-smi/gpus"]["status"] == "fail"
    assert lines["nvidia-smi/gpus"]["reason"] == "1 GPUs listed, the inventory expects 2"


def test_nvidia_smi_fails_when_the_loaded_module_is_older_than_the_driver(tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "h200-query-gpu.csv")
    lines = by_name(
        run(
            "check_nvidia_smi.py",
            "--smi",
            str(smi),
            "--module-version-file",
            str(module_file(tmp_path, "570.124.06")),
        )
    )
    driver = lines["nvidia-smi/driver"]
    assert driver["status"] == "fail"
    assert (
        "kernel module 570.124.06 is loaded but the installed driver is 580.159.04"
        in (driver["reason"])
    )
    assert "reboot" in driver["reason"]
    lines = by_name(
        run(
            "check_nvidia_smi.py",
            "--smi",
            str(smi),
            "--module-version-file",
            str(tmp_path / "absent"),
        )
    )
    assert "the nvidia kernel module is not loaded" in lines["nvidia-smi/driver"]["reason"]


def test_nvidia_smi_absent(tmp_path: Path) -> None:
    path = {"PATH": no_tools_path(tmp_path)}
    (line,) = run("check_nvidia_smi.py", env=path)
    assert line["status"] == "skip" and "nvidia-smi not found" in line["reason"]
    (line,) = run("check_nvidia_smi.py", "--count", "1", env=path)
    assert line["status"] == "fail" and line["expected"] == 1


# -- cuda-vectoradd ------------------------------------------------------------------------


def import_suite_module(name: str) -> Any:
    sys.path.insert(0, str(SUITE))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(SUITE))


def test_toolkits_are_found_once_each_oldest_first(tmp_path: Path) -> None:
    for version in ("12.8", "13.0", "12.10"):
        (tmp_path / f"cuda-{version}" / "bin").mkdir(parents=True)
        executable(tmp_path / f"cuda-{version}" / "bin" / "nvcc", "#!/bin/sh\n")
    (tmp_path / "cuda-13").symlink_to(tmp_path / "cuda-13.0")  # as NVIDIA's packages link it
    (tmp_path / "cuda-notes").mkdir()
    mod = import_suite_module("check_cuda_vectoradd")
    found = mod.find_toolkits(str(tmp_path))
    assert [v for v, _ in found] == ["12.8", "12.10", "13.0"]


def test_vectoradd_skips_without_a_toolkit(tmp_path: Path) -> None:
    (line,) = run(
        "check_cuda_vectoradd.py", "--root", str(tmp_path), env={"PATH": no_tools_path(tmp_path)}
    )
    assert line["status"] == "skip"
    assert line["reason"].startswith("no CUDA toolkit: no ")


def test_vectoradd_reports_the_compiler_error(tmp_path: Path) -> None:
    (tmp_path / "cuda-12.4" / "bin").mkdir(parents=True)
    executable(
        tmp_path / "cuda-12.4" / "bin" / "nvcc",
        '#!/bin/sh\ncase "$1" in --version) echo \'Cuda compilation tools, '
        "release 12.4, V12.4.131';; *) echo 'nvcc fatal : Host compiler targets "
        "unsupported OS.' >&2; exit 1;; esac\n",
    )
    (line,) = run("check_cuda_vectoradd.py", "--root", str(tmp_path))
    assert line["name"] == "cuda-vectoradd/12.4" and line["status"] == "fail"
    assert "nvcc 12.4.131 could not build vectoradd.cu" in line["reason"]
    assert "Host compiler targets unsupported OS" in line["reason"]


@pytest.mark.skipif(
    not list(Path("/usr/local").glob("cuda-*/bin/nvcc")),
    reason="no CUDA toolkit under /usr/local on this machine",
)
def test_vectoradd_builds_with_the_installed_nvcc() -> None:
    lines = run("check_cuda_vectoradd.py", timeout=300)
    assert lines and all(line["name"].startswith("cuda-vectoradd/") for line in lines)
    for line in lines:
        assert line["details"]["compile_seconds"] > 0, line
        if HAS_GPU:
            assert line["status"] == "pass", line
        else:
            assert line["status"] == "skip"
            assert "not run: no NVIDIA GPU visible" in line["reason"]


# -- torch ---------------------------------------------------------------------------------


def test_torch_computes_on_the_cpu_and_says_why_the_gpu_parts_skip() -> None:
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    lines = by_name(run("check_torch.py", timeout=300))
    cpu = lines["torch/cpu-matmul"]
    assert cpu["status"] == "pass" and cpu["unit"] == "GFLOP/s" and cpu["value"] > 0
    if HAS_GPU:
        pytest.skip("a GPU is visible here: the skip reasons are for machines without one")
    cuda = lines["torch/cuda"]
    assert cuda["status"] == "skip"
    assert "CPU-only build" in cuda["reason"] or cuda["reason"].startswith(
        "torch.cuda.is_available() is False"
    )
    assert not any(name.startswith("torch/matmul") for name in lines)


def test_amp_training_step_lowers_the_loss(capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    mod = import_suite_module("check_torch")
    mod.amp_train_step(torch, device="cpu", hidden=256)
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["status"] == "pass", line
    assert 0 < line["value"] < 0.5
    assert "bf16 autocast, 30 AdamW steps" in line["reason"]


def test_torch_absent_is_a_skip_with_a_reason(tmp_path: Path) -> None:
    # A python with no torch: -S drops site-packages, as a bare venv would.
    proc = subprocess.run(
        [sys.executable, "-S", str(SUITE / "check_torch.py")],
        cwd=SUITE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = [json.loads(x) for x in proc.stdout.splitlines()]
    assert line["name"] == "torch" and line["status"] == "skip"
    assert line["reason"].startswith("torch is not importable here: No module named 'torch'")


def test_the_labs_torch_stand_in_is_a_skip_not_a_failure(tmp_path: Path) -> None:
    """The lab installs a stand-in torch wheel (it computes nothing): say so and skip."""
    import zipfile

    from gpunode_lab.repo.pypi import torch_wheel

    with zipfile.ZipFile(io.BytesIO(torch_wheel("2.11", "cu130").build())) as whl:
        whl.extractall(tmp_path)
    lines = run("check_torch.py", env={"PYTHONPATH": str(tmp_path)})
    assert [(x["name"], x["status"]) for x in lines] == [("torch", "skip")]
    assert lines[0]["reason"] == (
        "torch 2.11.0+cu130 here is gpunode lab's stand-in: nothing to compute"
    )


# -- nccl-allreduce ------------------------------------------------------------------------


def test_allreduce_skips_without_gpus() -> None:
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    if HAS_GPU:
        pytest.skip("a GPU is visible here")
    (line,) = run("check_nccl.py")
    assert line["name"] == "nccl-allreduce" and line["status"] == "skip"
    assert "CPU-only build" in line["reason"] or "no NVIDIA GPU visible" in line["reason"]


def test_allreduce_code_path_sums_correctly_across_two_processes() -> None:
    """The same workers over gloo on CPU: spawn, the loopback store, the sum check, busbw."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    (line,) = run("check_nccl.py", "--backend", "gloo", "--sizes", str(1 << 20), timeout=300)
    assert line["name"] == "nccl-allreduce/1MiB" and line["status"] == "pass", line
    assert line["details"]["ranks"] == 2 and line["value"] > 0
    # busbw = algbw * 2(n-1)/n, which is algbw itself for two ranks
    assert line["value"] == pytest.approx(line["details"]["algbw_gbs"], abs=0.01)


def test_bus_bandwidth_formula() -> None:
    mod = import_suite_module("check_nccl")
    assert mod.bus_bandwidth(1 << 30, (1 << 30) / 324e9, 2) == pytest.approx(324)
    assert mod.bus_bandwidth(8 * 10**9, 0.1, 8) == pytest.approx(80 * 2 * 7 / 8)


# -- tensorflow ----------------------------------------------------------------------------


def test_tensorflow_absent_is_a_skip_with_a_reason() -> None:
    proc = subprocess.run(
        [sys.executable, "-S", str(SUITE / "check_tensorflow.py")],
        cwd=SUITE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = [json.loads(x) for x in proc.stdout.splitlines()]
    assert line["name"] == "tensorflow" and line["status"] == "skip"
    assert "tensorflow is not importable here" in line["reason"]


# -- the driver ----------------------------------------------------------------------------


def broken_torch_python(tmp_path: Path, body: str) -> Path:
    """A python whose torch is installed but broken: import raises, or hangs."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(body)
    return executable(
        tmp_path / "python", f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n'
    )


def driver(*args: str, timeout: float = 300) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [sys.executable, str(SUITE / "driver.py"), *args],
        cwd=SUITE,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, [json.loads(x) for x in proc.stdout.splitlines()]


def test_driver_turns_a_crashing_test_into_a_failure(tmp_path: Path) -> None:
    python = broken_torch_python(tmp_path, "raise RuntimeError('libcudart.so.13: cannot open')\n")
    code, lines = driver("--tests", "torch", "--python", str(python))
    assert code == 0
    envs = lines[0]
    assert envs["name"] == "environments"
    assert envs["details"]["envs"][0]["python"] == str(python)
    failed = [x for x in lines if x["env"] == str(python)]
    assert len(failed) == 1 and failed[0]["status"] == "fail"
    assert failed[0]["reason"].startswith("check_torch.py exited 1 after 0 results")
    assert "libcudart.so.13: cannot open" in failed[0]["reason"]


def test_driver_stops_a_hanging_test(tmp_path: Path) -> None:
    python = broken_torch_python(tmp_path, "import time\ntime.sleep(60)\n")
    _, lines = driver("--tests", "torch", "--python", str(python), "--timeout", "2")
    (hung,) = [x for x in lines if x["env"] == str(python)]
    assert hung["status"] == "fail" and "did not finish within 2 s" in hung["reason"]


def test_driver_reports_a_bad_python_and_unknown_tests(tmp_path: Path) -> None:
    _, lines = driver("--tests", "nvidia-smi", "--python", str(tmp_path / "nope"))
    bad = [x for x in lines if x["name"] == "environments" and x["status"] == "fail"]
    assert bad and "is not an executable file" in bad[0]["reason"]
    code, lines = driver("--tests", "nvidia-smi,gpu-burn")
    assert code == 2
    assert lines[0]["status"] == "fail" and "unknown tests ['gpu-burn']" in lines[0]["reason"]


def test_driver_finds_conda_envs_with_a_framework_only(tmp_path: Path) -> None:
    prefix = tmp_path / "conda"
    with_torch = broken_torch_python(tmp_path / "a", "")
    plain = tmp_path / "b" / "python"
    plain.parent.mkdir()
    executable(plain, f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    for name, python in (("pt", with_torch), ("plain", plain)):
        (prefix / "envs" / name / "bin").mkdir(parents=True)
        (prefix / "envs" / name / "bin" / "python").symlink_to(python)
    _, lines = driver("--tests", "nvidia-smi", "--conda-prefix", str(prefix))
    labels = [e["label"] for e in lines[0]["details"]["envs"]]

    # "plain" has no framework. The stand-ins run this interpreter with -S: outside a
    # virtual environment they share the system python's prefix, which then folds into the
    # first of them (one prefix, one environment); in one, the system python is its own.
    def prefix(*flags: str) -> str:
        code = "import sys; print(sys.prefix)"
        return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip

    assert labels == ["conda:pt"] + ([] if prefix("-S") == prefix() else ["system"])


def test_every_test_process_runs_with_nvlink_multicast_off(tmp_path: Path) -> None:
    python = broken_torch_python(
        tmp_path,
        "import os\nraise RuntimeError('|'.join(os.environ.get(k, 'unset') for k in "
        "('NCCL_NVLS_ENABLE', 'TORCH_SYMM_MEM_DISABLE_MULTICAST', 'NVSHMEM_DISABLE_NVLS')))\n",
    )
    _, lines = driver("--tests", "torch", "--python", str(python))
    (failed,) = [x for x in lines if x["env"] == str(python)]
    assert "RuntimeError: 0|1|1" in failed["reason"]
