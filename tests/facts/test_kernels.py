"""The kernels and DKMS sections: installed kernels, the next boot's, headers, `dkms status`."""

from __future__ import annotations

from gpunode.facts.model import DkmsModule
from gpunode.facts.parse import parse_dkms_status, parse_facts

# dkms 3.0.11 (Ubuntu 24.04) after a kernel update, before the reboot: the module is built
# for the running kernel only; an older branch's sources are still registered.
DKMS3 = (
    """\
nvidia/580.95.05, 6.8.0-45-generic, x86_64: installed
nvidia/580.95.05, 6.8.0-87-generic, x86_64: built
nvidia/535.247.01: added
nvidia/580.95.05, 6.8.0-31-generic, x86_64: installed"""
    " (WARNING! Diff between built and installed module!)\n"
    "Error! Could not locate dkms.conf file.\n"
)
# dkms 2.8.7 (Ubuntu 22.04) separates module and version with a comma
DKMS2 = "nvidia, 535.183.01, 5.15.0-91-generic, x86_64: installed\n"


def test_dkms3_lines() -> None:
    got = parse_dkms_status(DKMS3)
    assert got[:3] == [
        DkmsModule(
            module="nvidia",
            version="580.95.05",
            kernel="6.8.0-45-generic",
            arch="x86_64",
            state="installed",
        ),
        DkmsModule(
            module="nvidia",
            version="580.95.05",
            kernel="6.8.0-87-generic",
            arch="x86_64",
            state="built",
        ),
        DkmsModule(module="nvidia", version="535.247.01", state="added"),
    ]
    assert [d.installed for d in got] == [True, False, False, True]
    assert got[3].state.startswith("installed (WARNING!")
    assert len(got) == 4  # the error line is not a module


def test_dkms2_lines() -> None:
    (only,) = parse_dkms_status(DKMS2)
    assert (only.module, only.version, only.kernel, only.state) == (
        "nvidia",
        "535.183.01",
        "5.15.0-91-generic",
        "installed",
    )


def _facts(kernels: str, dkms: str) -> str:
    return (
        "### kernel\n6.8.0-45-generic\n### kernels\n" + kernels + "### dkms\n" + dkms + "### end\n"
    )


def test_kernels_next_boot_and_what_dkms_must_build() -> None:
    f = parse_facts(
        _facts(
            "installed 6.8.0-45-generic\nheaders 6.8.0-45-generic\ninstalled 6.8.0-87-generic\n"
            "next vmlinuz-6.8.0-87-generic\n",
            DKMS3,
        )
    )
    assert f.errors == []
    assert f.kernels.installed == ["6.8.0-45-generic", "6.8.0-87-generic"]
    assert f.kernels.headers == ["6.8.0-45-generic"]
    assert f.kernels.next_boot == "6.8.0-87-generic"
    assert f.dkms_kernels == ["6.8.0-45-generic", "6.8.0-87-generic"]
    assert f.dkms_installed("nvidia", "580.95.05", "6.8.0-45-generic")
    assert not f.dkms_installed("nvidia", "580.95.05", "6.8.0-87-generic")  # built only
    assert not f.dkms_installed("nvidia", "535.247.01", "6.8.0-45-generic")


def test_next_boot_is_the_running_kernel() -> None:
    f = parse_facts(_facts("installed 6.8.0-45-generic\nnext vmlinuz-6.8.0-45-generic\n", ""))
    assert f.kernels.next_boot == "6.8.0-45-generic"
    assert f.dkms_kernels == ["6.8.0-45-generic"]
    assert f.dkms == []


def test_facts_view_shows_kernels_headers_and_dkms() -> None:
    from gpunode.views.facts import render

    f = parse_facts(
        _facts(
            "installed 6.8.0-45-generic\nheaders 6.8.0-45-generic\ninstalled 6.8.0-87-generic\n"
            "next vmlinuz-6.8.0-87-generic\n",
            DKMS2,
        )
    )
    rows = {line.split("  ")[1].strip(): line for line in render("h", f).splitlines()[1:]}
    assert rows["kernels"].endswith("6.8.0-45-generic (headers), 6.8.0-87-generic (no headers)")
    assert rows["next boot"].endswith("6.8.0-87-generic (installed, waiting for a reboot)")
    assert rows["dkms"].endswith("nvidia/535.183.01 5.15.0-91-generic: installed")


def test_a_failed_build_keeps_the_whole_make_log_tail() -> None:
    from gpunode.changes import LOG_TAIL
    from gpunode.execute.aptmessages import failure

    log = [f"line {i}" for i in range(20)]
    stderr = "\n".join(
        ["Error! Bad return status for module build on kernel: 6.8.0-87-generic (x86_64)",
         LOG_TAIL + "/var/lib/dkms/nvidia/580.95.05/build/make.log", *log]
    )  # fmt: skip
    why = failure(10, stderr, "")
    assert why.startswith("exit 10:\nlast lines of /var/lib/dkms/nvidia/580.95.05/build/make.log")
    assert why.endswith("\n".join(log))
    assert failure(1, "a\nb\nc\nd", "") == "exit 1: b | c | d"  # others: 3 lines
