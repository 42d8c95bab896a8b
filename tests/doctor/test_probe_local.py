"""The real probe script on this machine (LocalTransport), checked against what the machine's
own tools say."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from gpunode.doctor.probe import parse_probe, probe_command, script
from gpunode.transport.local import LocalTransport


def _run(*prefixes: str) -> str:
    res = LocalTransport().run(probe_command(prefixes), stdin=script(), timeout=120)
    assert "### end" in res.stdout, res.stderr
    return res.stdout


def test_probe_reads_this_machine() -> None:
    p = parse_probe(_run())
    if shutil.which("ldconfig"):
        ld = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        want = [x.strip() for x in ld.splitlines() if "libcudart.so" in x]
        assert [x for x in p.ldconfig or [] if "libcudart.so" in x] == want
    if shutil.which("bash"):
        assert p.login is not None and "/usr/bin" in p.login["PATH"]
    assert all(("NVRM" in x or "nouveau" in x or "fallen off" in x) for x in p.kernel_log)


def test_conda_disk_is_the_prefix_filesystem(tmp_path: Path) -> None:
    conda = tmp_path / "conda" / "bin" / "conda"
    conda.parent.mkdir(parents=True)
    conda.write_text("#!/bin/sh\n")
    conda.chmod(0o755)
    p = parse_probe(_run(str(tmp_path / "conda")))
    df = subprocess.run(["df", "-P", "-B1", str(tmp_path)], capture_output=True, text=True)
    cols = df.stdout.splitlines()[-1].split()
    assert [(d.path, d.free_bytes > 0) for d in p.conda_disks] == [(" ".join(cols[5:]), True)]
