"""Version comparison, checked against dpkg itself and with properties."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpunode.versions import compare_debian, compare_dotted, matches_prefix

dotted_versions = st.lists(st.integers(0, 999), min_size=1, max_size=4).map(
    lambda parts: ".".join(map(str, parts))
)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        ("12.10", "12.9", 1),
        ("550.127.05", "550.54.15", 1),
        ("12.4", "12.4.0", 0),
        ("570.26", "570.26.01", -1),
        ("2.21", "2.3", 1),
    ],
)
def test_compare_dotted(a: str, b: str, want: int) -> None:
    assert compare_dotted(a, b) == want
    assert compare_dotted(b, a) == -want


@given(dotted_versions, dotted_versions, dotted_versions)
def test_dotted_is_a_total_order(a: str, b: str, c: str) -> None:
    assert compare_dotted(a, b) == -compare_dotted(b, a)
    if compare_dotted(a, b) <= 0 and compare_dotted(b, c) <= 0:
        assert compare_dotted(a, c) <= 0


@given(st.lists(st.integers(0, 99), min_size=1, max_size=3))
def test_dotted_matches_integer_tuples(parts: list[int]) -> None:
    bumped = [*parts[:-1], parts[-1] + 1]
    assert compare_dotted(".".join(map(str, bumped)), ".".join(map(str, parts))) == 1


def test_prefix() -> None:
    assert matches_prefix("550.127.05", "550")
    assert matches_prefix("12.4", "12.4")
    assert not matches_prefix("12.40", "12.4")


DEBIAN_CASES = [
    ("2.21.5-1+cuda12.4", "2.21.5-1+cuda12.2"),
    ("1:1.0", "2.0"),
    ("1.0~rc1", "1.0"),
    ("1.0~rc1", "1.0~rc2"),
    ("550.127.05-0ubuntu1", "550.54.15-0ubuntu1"),
    ("9.14.0.64-1", "9.1.0.70-1"),
    ("1.0a", "1.0"),
    ("1.0+b1", "1.0"),
    ("1.0-1", "1.0-1~bpo1"),
    ("0:1.2-3", "1.2-3"),
    ("1.0", "1.0"),
    ("13.0.96-1", "13.0.2-1"),
]


@pytest.mark.parametrize(("a", "b"), DEBIAN_CASES)
def test_debian_matches_dpkg(a: str, b: str) -> None:
    want = _dpkg_cmp(a, b)
    assert compare_debian(a, b) == want
    assert compare_debian(b, a) == -want


def _dpkg_cmp(a: str, b: str) -> int:
    if shutil.which("dpkg") is None:
        pytest.skip("dpkg is not installed: cannot compare against the reference")
    for op, result in (("lt", -1), ("eq", 0), ("gt", 1)):
        if subprocess.run(["dpkg", "--compare-versions", a, op, b]).returncode == 0:
            return result
    raise AssertionError("dpkg gave no order")


debian_versions = st.builds(
    lambda epoch, up, tilde, rev: f"{epoch}{up}{tilde}{rev}",
    st.sampled_from(["", "1:", "2:"]),
    st.from_regex(r"[0-9][0-9a-z.+]{0,6}", fullmatch=True),
    st.sampled_from(["", "~rc1", "~beta"]),
    st.sampled_from(["", "-1", "-0ubuntu1", "-1+cuda12.4", "-1~bpo"]),
)


@settings(max_examples=60, deadline=None)
@given(debian_versions, debian_versions)
def test_debian_agrees_with_dpkg_on_random_versions(a: str, b: str) -> None:
    assert compare_debian(a, b) == _dpkg_cmp(a, b)
