"""The line shown for a failed apt step, read from real apt outputs (tests/fixtures/apt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.execute.aptmessages import Lock, failure, lock, summary

FIXTURES = Path(__file__).parent.parent / "fixtures" / "apt"


def said(name: str) -> tuple[str, str]:
    return (FIXTURES / f"{name}.stdout").read_text(), (FIXTURES / f"{name}.stderr").read_text()


def test_an_unmet_dependency_names_the_package_and_what_it_lacks() -> None:
    why = summary(*said("unmet"))
    assert why == (
        "gpunode-cap-app: Depends: gpunode-cap-missing (>= 2) but it is not installable"
        " | E: Unable to correct problems, you have held broken packages."
    )


def test_a_hash_mismatch_says_so_and_names_the_file_not_a_filesize_line() -> None:
    why = summary(*said("hash"))
    assert why is not None and "Filesize" not in why and "[weak]" not in why
    assert why.startswith(
        "E: Failed to fetch copy:/tmp/aptcap/repo/./gpunode-cap-hash_1.0_all.deb  Hash Sum mismatch"
    ), why
    assert why.endswith("E: Some files failed to download")


def test_a_full_disk_shows_dpkgs_reason_not_apts_error_code() -> None:
    why = summary(*said("full"))
    assert why == (
        "dpkg: error processing archive /tmp/aptcap/cache/archives/gpunode-cap-lib_1.0_all.deb"
        " (--unpack): cannot copy extracted data for './usr/share/doc/gpunode-cap-lib/blob' to"
        " '/tmp/aptroot/usr/share/doc/gpunode-cap-lib/blob.dpkg-new': failed to write"
        " (No space left on device)"
    )


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("gone", "E: Failed to fetch copy:/tmp/aptcap/repo/./gpunode-cap-lib_1.0_all.deb"
                 "  Failed to stat - stat (2: No such file or directory)"
                 " | E: Some files failed to download"),
        ("ver", "E: Version '9.9' for 'gpunode-cap-lib' was not found"),
        ("nope", "E: Unable to locate package gpunode-cap-nope"),
        ("interrupted", "E: dpkg was interrupted, you must manually run 'dpkg --configure -a'"
                        " to correct the problem."),
    ],
)  # fmt: skip
def test_apts_error_lines(name: str, line: str) -> None:
    assert summary(*said(name)) == line


def test_the_dpkg_lock_is_named_with_its_holder_from_apts_waiting_lines() -> None:
    assert lock(*said("lock")) == Lock(
        "dpkg lock", "/tmp/aptcap/dpkg/lock-frontend", "pid 13038 (python3)"
    )


def test_the_list_lock_is_named_as_such_with_its_holder() -> None:
    got = lock(*said("lists"))
    assert got == Lock("apt's list lock", "/tmp/aptcap/lists/lock", "pid 13160 (python3)")
    why = failure(100, said("lists")[1], said("lists")[0], "pid 1 (x)")
    assert why.startswith("apt's list lock held by pid 13160 (python3); try again")
    assert "dpkg" not in why


def test_dpkgs_own_lock_message() -> None:
    err = "dpkg: error: dpkg frontend lock was locked by another process with pid 4242\n"
    assert lock("", err) == Lock("dpkg lock", "", "pid 4242")


def test_no_lock_no_apt_lines() -> None:
    assert lock(*said("unmet")) is None and lock(*said("hash")) is None
    assert summary("some output\n", "curl: (22) The requested URL returned error: 404\n") is None


def test_a_failed_recovery_shows_its_own_verdict() -> None:
    err = (
        "E: Unable to correct problems, you have held broken packages.\n"
        "gpunode: dpkg --configure -a and apt-get -f install left these packages half-done:\n"
        "gpunode:   libnccl-dev unpacked\n"
        "gpunode: run on the host: sudo dpkg --configure -a && sudo apt-get -f install\n"
    )
    assert summary("", err) == (
        "dpkg --configure -a and apt-get -f install left these packages half-done:"
        " libnccl-dev unpacked;"
        " run on the host: sudo dpkg --configure -a && sudo apt-get -f install"
        " | E: Unable to correct problems, you have held broken packages."
    )
