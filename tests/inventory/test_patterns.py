from __future__ import annotations

import pytest

from gpunode.inventory import PatternError, load, select
from tests.conftest import EXAMPLE_INVENTORY


@pytest.fixture(scope="module")
def inv():  # type: ignore[no-untyped-def]
    return load(EXAMPLE_INVENTORY)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (None, ["gpu-a100-01", "gpu-a100-02", "gpu-h100-01"]),
        ("all", ["gpu-a100-01", "gpu-a100-02", "gpu-h100-01"]),
        ("a100", ["gpu-a100-01", "gpu-a100-02"]),
        ("gpu-h100-01", ["gpu-h100-01"]),
        ("gpu-*-01", ["gpu-a100-01", "gpu-h100-01"]),
        ("a100,!gpu-a100-02", ["gpu-a100-01"]),
        ("all:!a100", ["gpu-h100-01"]),
        ("!gpu-h100-01", ["gpu-a100-01", "gpu-a100-02"]),
        ("gpu-*,&a100", ["gpu-a100-01", "gpu-a100-02"]),
        ("h1*", ["gpu-h100-01"]),  # a glob over group names
        # Ansible's subscripts: a group's hosts by position, slices as Python's
        ("a100[0]", ["gpu-a100-01"]),
        ("a100[-1]", ["gpu-a100-02"]),
        ("a100[1:]", ["gpu-a100-02"]),
        ("a100[0:1],h100", ["gpu-a100-01", "gpu-h100-01"]),
        ("a100[0:2]:!gpu-a100-01", ["gpu-a100-02"]),  # a colon inside [] is no separator
        ("all[1:3]", ["gpu-a100-02", "gpu-h100-01"]),
        # a regular expression over host and group names, from their start
        ("~gpu-a100-0[2-9]", ["gpu-a100-02"]),
        ("~h1", ["gpu-h100-01"]),
        ("~100-01", []),  # matched from the start, as Ansible's
    ],
)
def test_patterns(inv, pattern: str | None, expected: list[str]) -> None:  # type: ignore[no-untyped-def]
    if not expected:
        with pytest.raises(PatternError, match="matches no host"):
            select(inv, pattern)
        return
    assert select(inv, pattern) == expected


def test_pattern_matching_nothing_is_an_error(inv) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PatternError, match="'gpu-v100' matches no host or group"):
        select(inv, "gpu-v100")


def test_a_retry_file_names_the_hosts(inv, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # what Ansible writes after a failed run: one host a line
    retry = tmp_path / "site.retry"
    retry.write_text("gpu-a100-02\ngpu-h100-01\n")
    assert select(inv, f"@{retry}") == ["gpu-a100-02", "gpu-h100-01"]
    assert select(inv, f"@{retry},!h100") == ["gpu-a100-02"]
    with pytest.raises(PatternError, match=r"cannot read .*missing.retry: No such file"):
        select(inv, f"@{tmp_path}/missing.retry")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("gpu-a100-1", "did you mean 'gpu-a100-01' or "),
        ("a10", "did you mean 'a100'"),
        ("a10[0]", "did you mean 'a100'"),  # the group of a subscript
        ("a100[5]", "a100 has 2 host(s), positions 0 to 1"),
        ("~gpu-(", "not a regular expression"),
        ("zzz", "known: a100, gpu-a100-01"),
    ],
)
def test_a_pattern_that_fails_says_why_and_what_is_close(inv, pattern: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PatternError) as caught:
        select(inv, pattern)
    assert message in str(caught.value)
    if "matches no host" in str(caught.value):  # the syntax, for one who tried another
        assert "~regex, group[0], group[1:3], @file" in str(caught.value)
