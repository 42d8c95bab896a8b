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
    ],
)
def test_patterns(inv, pattern: str | None, expected: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert select(inv, pattern) == expected


def test_pattern_matching_nothing_is_an_error(inv) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PatternError, match="'gpu-v100' matches no host or group"):
        select(inv, "gpu-v100")
