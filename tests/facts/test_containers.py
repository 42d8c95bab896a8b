"""The containers section: the runtimes on PATH and the driver the CDI spec names."""

from __future__ import annotations

from gpunode.facts.parse import parse_facts


def facts(section: str) -> str:
    return f"\n### containers\n{section}\n### end\n"


def test_runtimes_and_cdi_driver() -> None:
    f = parse_facts(facts("runtime docker\nruntime containerd\ncdi-spec\ncdi-driver 580.95.05"))
    assert f.containers.runtimes == ["docker", "containerd"]
    assert f.containers.cdi_spec and f.containers.cdi_driver == "580.95.05"
    assert not f.errors


def test_nothing_installed() -> None:
    f = parse_facts(facts(""))
    assert f.containers.runtimes == [] and not f.containers.cdi_spec
    assert f.containers.cdi_driver is None


def test_spec_without_a_driver_library() -> None:
    """A spec written without the driver's libraries (no libcuda.so.<release>) names none,
    so the role writes it again once the driver is there."""
    f = parse_facts(facts("cdi-spec"))
    assert f.containers.cdi_spec and f.containers.cdi_driver is None


def test_unknown_words_are_not_taken() -> None:
    f = parse_facts(facts("runtime podman; rm -rf /\nruntime cri-o\ncdi-driver 580.95.05; x"))
    assert f.containers.runtimes == [] and f.containers.cdi_driver is None


def test_script_reads_the_spec(tmp_path: object) -> None:
    """The sed in script.sh takes the release from a real spec's hostPath line."""
    import subprocess
    from pathlib import Path

    spec = Path(str(tmp_path)) / "nvidia.yaml"
    spec.write_text(
        "  mounts:\n  - containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n"
        "    hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n"
        "    options: [ro, nosuid, nodev, bind]\n"
    )
    script = (Path(__file__).parents[2] / "gpunode/facts/script.sh").read_text()
    line = next(ln for ln in script.splitlines() if "cdi-driver" in ln)
    out = subprocess.run(
        ["sh", "-c", line.replace("/etc/cdi/nvidia.yaml", str(spec))],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout == "cdi-driver 580.95.05\n"
